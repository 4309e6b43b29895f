// Whether a graph output is ill-conditioned at its inputs: the reference itself moves beyond the
// comparison contract when every other float input element is nudged by a relative `nudge(dtype)`.
// Why: then a one-ulp difference inside compiled kernels (kiln_exp vs libm, another summation
// order) legitimately changes the result, and such an output says nothing about the compiler.
#pragma once

#include <functional>
#include <vector>

#include "kiln/graph.h"
#include "kiln/host_tensor.h"

namespace kiln::testing {

bool ill_conditioned(const Graph& g, const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& want,
                     size_t output, const std::function<double(DType)>& nudge);

}  // namespace kiln::testing
