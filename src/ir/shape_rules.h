// Shape/dtype rules named in ops.def. Each computes an op's output types from operand types and
// attributes, and rejects ill-typed uses with a message naming the rule broken.
#pragma once

#include "kiln/ops.h"

namespace kiln {

std::vector<TensorType> rule_unary_numeric(const InferCtx&);
std::vector<TensorType> rule_unary_float(const InferCtx&);
std::vector<TensorType> rule_unary_bool(const InferCtx&);
std::vector<TensorType> rule_unary_float_to_bool(const InferCtx&);
std::vector<TensorType> rule_cast(const InferCtx&);
std::vector<TensorType> rule_binary_arith(const InferCtx&);
std::vector<TensorType> rule_binary_compare(const InferCtx&);
std::vector<TensorType> rule_binary_logical(const InferCtx&);
std::vector<TensorType> rule_where(const InferCtx&);
std::vector<TensorType> rule_reduce(const InferCtx&);
std::vector<TensorType> rule_reduce_float(const InferCtx&);
std::vector<TensorType> rule_arg_reduce(const InferCtx&);
std::vector<TensorType> rule_reshape(const InferCtx&);
std::vector<TensorType> rule_permute(const InferCtx&);
std::vector<TensorType> rule_expand(const InferCtx&);
std::vector<TensorType> rule_slice(const InferCtx&);
std::vector<TensorType> rule_concat(const InferCtx&);
std::vector<TensorType> rule_pad(const InferCtx&);
std::vector<TensorType> rule_squeeze(const InferCtx&);
std::vector<TensorType> rule_unsqueeze(const InferCtx&);
std::vector<TensorType> rule_flatten(const InferCtx&);
std::vector<TensorType> rule_split(const InferCtx&);
std::vector<TensorType> rule_gather(const InferCtx&);
std::vector<TensorType> rule_gather_elements(const InferCtx&);
std::vector<TensorType> rule_index_select(const InferCtx&);
std::vector<TensorType> rule_same_as_input(const InferCtx&);
std::vector<TensorType> rule_same_float(const InferCtx&);
std::vector<TensorType> rule_matmul(const InferCtx&);
std::vector<TensorType> rule_conv2d(const InferCtx&);
std::vector<TensorType> rule_pool2d(const InferCtx&);
std::vector<TensorType> rule_im2col(const InferCtx&);
std::vector<TensorType> rule_global_pool(const InferCtx&);
std::vector<TensorType> rule_layer_norm(const InferCtx&);
std::vector<TensorType> rule_batch_norm(const InferCtx&);
std::vector<TensorType> rule_attention(const InferCtx&);
std::vector<TensorType> rule_constant(const InferCtx&);
std::vector<TensorType> rule_arange(const InferCtx&);
std::vector<TensorType> rule_full(const InferCtx&);
std::vector<TensorType> rule_shape_of(const InferCtx&);

// Shared helpers for rules (and for the eager API, which infers types the same way).
Shape broadcast_shapes(const InferCtx& ctx, const Shape& a, const Shape& b);
// Output length of a python-style slice of a dim; start/end already as given (may be negative or
// huge); fails via ctx when it cannot be expressed.
SymInt slice_length(const InferCtx& ctx, const SymInt& dim, int64_t start, int64_t end, int64_t step);

}  // namespace kiln

// ---- added for the ONNX frontend (src/ir/shape_rules_onnx.cc) ----
namespace kiln {
std::vector<TensorType> rule_cumsum(const InferCtx&);
std::vector<TensorType> rule_topk(const InferCtx&);
std::vector<TensorType> rule_conv_transpose2d(const InferCtx&);
std::vector<TensorType> rule_resize(const InferCtx&);
}  // namespace kiln

// ---- selection and sampling (src/ir/shape_rules_selection.cc) ----
namespace kiln {
std::vector<TensorType> rule_sort(const InferCtx&);
std::vector<TensorType> rule_argsort(const InferCtx&);
std::vector<TensorType> rule_sample(const InferCtx&);
}  // namespace kiln

// ---- added for ONNX conformance, issue #3 (src/ir/shape_rules_integer.cc) ----
namespace kiln {
std::vector<TensorType> rule_unary_integer(const InferCtx&);
std::vector<TensorType> rule_binary_integer(const InferCtx&);
std::vector<TensorType> rule_det(const InferCtx&);
// Control flow and containers (shape_rules_control.cc).
std::vector<TensorType> rule_if(const InferCtx&);
std::vector<TensorType> rule_loop(const InferCtx&);
std::vector<TensorType> rule_scan(const InferCtx&);
std::vector<TensorType> rule_sequence_construct(const InferCtx&);
std::vector<TensorType> rule_sequence_empty(const InferCtx&);
std::vector<TensorType> rule_sequence_at(const InferCtx&);
std::vector<TensorType> rule_sequence_insert(const InferCtx&);
std::vector<TensorType> rule_sequence_erase(const InferCtx&);
std::vector<TensorType> rule_optional_wrap(const InferCtx&);
std::vector<TensorType> rule_optional_none(const InferCtx&);
std::vector<TensorType> rule_optional_has(const InferCtx&);
std::vector<TensorType> rule_optional_get(const InferCtx&);

}  // namespace kiln
