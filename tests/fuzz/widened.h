// The reference as generated kernels compute f16/bf16 graphs, for the fuzz checker's
// narrow-precision verdict (docs/testing.md). Why: kernels keep 16-bit intermediates in float and
// round at stores and where a discontinuous op reads them; the interpreter rounds after every op.
#pragma once

#include <vector>

#include "kiln/graph.h"
#include "kiln/host_tensor.h"
#include "kiln/target.h"

namespace kiln::fuzz {

bool is_16bit_float(DType d);

// Ops that read an f16/bf16 operand computed inside a kernel rounded to its dtype: comparisons and
// the steps of floor/ceil/round/sign/cast.
bool reads_rounded_operand(const Node& n);

// Whether `got` (output `output` of the compiled graph) agrees with the reference run on the graph
// widened to f32 as kernels compute it, as written or with the target's decompositions applied.
bool matches_widened_reference(const Target& target, const Graph& g, const std::vector<HostTensor>& inputs,
                               const HostTensor& got, size_t output);

}  // namespace kiln::fuzz
