// Broadcast planning shared by the elementwise and movement kernels. Why: collapsing dims once per
// call turns every broadcast pattern into rows whose operands are contiguous or constant.
#include "kernels/cpu/cpu_common.h"

namespace kiln::eager::detail {

BroadcastPlan make_broadcast_plan(const std::vector<std::vector<int64_t>>& in_shapes,
                                  const std::vector<int64_t>& out_shape) {
  const size_t operands = in_shapes.size();
  const int rank = int(out_shape.size());
  // Per operand and output dim: the element stride, 0 where the operand is broadcast.
  std::vector<std::vector<int64_t>> strides(operands, std::vector<int64_t>(size_t(rank), 0));
  for (size_t k = 0; k < operands; ++k) {
    const auto& shape = in_shapes[k];
    KILN_ASSERT(int(shape.size()) <= rank);
    int offset = rank - int(shape.size());
    int64_t stride = 1;
    for (int i = int(shape.size()) - 1; i >= 0; --i) {
      KILN_ASSERT(shape[size_t(i)] == 1 || shape[size_t(i)] == out_shape[size_t(offset + i)]);
      strides[k][size_t(offset + i)] = shape[size_t(i)] == 1 ? 0 : stride;
      stride *= shape[size_t(i)];
    }
  }
  // Keep output dims larger than 1, merging a dim into the (inner) group after it when every
  // operand steps through both as one run: stride[d] == stride[inner] * size[inner].
  std::vector<int64_t> sizes;                   // merged groups, outermost first
  std::vector<std::vector<int64_t>> group_strides(operands);
  for (int d = rank - 1; d >= 0; --d) {
    int64_t size = out_shape[size_t(d)];
    if (size == 1) continue;
    bool mergeable = !sizes.empty();
    for (size_t k = 0; k < operands && mergeable; ++k)
      mergeable = strides[k][size_t(d)] == group_strides[k].back() * sizes.back();
    if (mergeable) {
      sizes.back() *= size;
      continue;
    }
    sizes.push_back(size);
    for (size_t k = 0; k < operands; ++k) group_strides[k].push_back(strides[k][size_t(d)]);
  }
  // `sizes` is innermost first; the innermost group becomes the row.
  BroadcastPlan plan;
  plan.inner_stride.assign(operands, 1);
  plan.outer_strides.assign(operands, {});
  if (sizes.empty()) return plan;  // one element
  plan.inner = sizes.front();
  for (size_t k = 0; k < operands; ++k) plan.inner_stride[k] = group_strides[k].front();
  for (size_t g = sizes.size(); g-- > 1;) {
    plan.outer_shape.push_back(sizes[g]);
    plan.rows *= sizes[g];
    for (size_t k = 0; k < operands; ++k) plan.outer_strides[k].push_back(group_strides[k][g]);
  }
  return plan;
}

}  // namespace kiln::eager::detail
