// The arithmetic an op performs, for the scoreboard's FLOPs column. Why: bytes moved and FLOPs per
// kernel are what reports set against the machine's bandwidth and compute ceilings.
#pragma once

#include <vector>

#include "kiln/attrs.h"
#include "kiln/host_tensor.h"
#include "kiln/ops.h"

namespace kiln::eager::detail {

// Conventions (docs/scoreboard.md): elementwise ops count 1 per output element, transcendentals
// included; reductions 1 per input element; matmul 2*M*N*K per batch; conv 2 per multiply-add;
// pooling 1 per window element; softmax 5, layer_norm 8, rms_norm 5, batch_norm 4 per element;
// movement, indexing and non-random sources 0.
double estimate_flops(Op op, const Attrs& attrs, const std::vector<HostTensor>& in,
                      const std::vector<HostTensor>& out);

}  // namespace kiln::eager::detail
