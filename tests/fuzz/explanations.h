// Why a compiled result that differs from the reference can still be right: the fuzz checker's
// amplified and cancelling-sum verdicts (docs/testing.md). Why here: each rule says exactly which
// differences it accepts, apart from the checker's control flow, so that it can be read and mutated.
#pragma once

#include <string>
#include <vector>

#include "kiln/graph.h"
#include "kiln/host_tensor.h"
#include "kiln/target.h"

namespace kiln::fuzz {

// Whether every node explains a difference: the graph compiled again with every intermediate value
// as an extra output reproduces `got`, and each node's compiled value agrees with the reference op
// on the compiled values of its own operands (sums by the magnitude of their terms; products,
// overflowing sums and reads of fused 16-bit intermediates by the rules in explanations.cc).
// Returns "" when explained, else why not (the first node that is wrong for its operands).
std::string unexplained_by_nodes(const Target& target, const CompileOptions& options, const Graph& g,
                                 const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& got);

// Whether output `o` is a sum whose compiled value is within the contract's relative tolerance of
// the magnitude of its terms (their reference values): a sum cancelling to rounding noise.
bool cancelling_sum(const Graph& g, const std::vector<HostTensor>& inputs, const HostTensor& got,
                    const HostTensor& want, size_t o);

}  // namespace kiln::fuzz
