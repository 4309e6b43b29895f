// Statistics a row operation guarantees of its own output, checked on a result without the
// reference: softmax rows sum to 1 (and lie in [0, 1]), log-softmax rows sum to 1 after exp,
// layer-norm rows have mean 0 and variance var/(var+eps) once weight and bias are undone,
// rms-norm rows have mean square ms/(ms+eps). Why: an element-wise tolerance scaled to a wide
// row's tiny values can still admit a wrong kernel (all zeros, one row's statistics reused);
// these cannot be met by one.
#pragma once

#include <string>
#include <vector>

#include "kiln/graph.h"
#include "kiln/host_tensor.h"

namespace kiln::testing {

// Empty when output `index` of g — when it is produced directly by softmax, log_softmax,
// layer_norm or rms_norm — meets its row statistic in `got` (computed from `inputs`); also empty
// for every other output. Weights and biases that are not graph inputs, rows shorter than 8 and
// weights with an element near 0 are not judged (the statistic says nothing there).
std::string check_row_statistics(const Graph& g, const std::vector<HostTensor>& inputs, size_t index,
                                 const HostTensor& got);

}  // namespace kiln::testing
