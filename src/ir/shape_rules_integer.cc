// Shape/dtype rules for the bitwise integer ops and det. Why: bitwise ops only make sense on
// integers (not bool, not floats), and det needs a float [..., n, n] input.
#include "ir/shape_rules.h"
#include "kiln/error.h"
#include "kiln/graph.h"

namespace kiln {

std::vector<TensorType> rule_unary_integer(const InferCtx& ctx) {
  if (!is_integer(ctx.inputs[0].dtype))
    ctx.fail(str("operand 0 has dtype ", dtype_name(ctx.inputs[0].dtype), ", but this op needs an integer dtype"));
  return {ctx.inputs[0]};
}

std::vector<TensorType> rule_binary_integer(const InferCtx& ctx) {
  const TensorType &a = ctx.inputs[0], &b = ctx.inputs[1];
  if (a.dtype != b.dtype)
    ctx.fail(str("operands must share a dtype (", dtype_name(a.dtype), " vs ", dtype_name(b.dtype), "); insert a cast"));
  if (!is_integer(a.dtype))
    ctx.fail(str("operand 0 has dtype ", dtype_name(a.dtype), ", but bitwise ops need an integer dtype"));
  if (a.device != b.device) ctx.fail("operands are on different devices");
  return {TensorType{a.dtype, broadcast_shapes(ctx, a.shape, b.shape), a.device}};
}

std::vector<TensorType> rule_det(const InferCtx& ctx) {
  const TensorType& x = ctx.inputs[0];
  if (!is_float(x.dtype)) ctx.fail(str("det needs a floating-point dtype, got ", dtype_name(x.dtype)));
  if (x.rank() < 2) ctx.fail("det needs rank >= 2 ([..., n, n])");
  ctx.require_equal(x.shape[size_t(x.rank() - 2)], x.shape[size_t(x.rank() - 1)], "det's last two dims");
  Shape out(x.shape.begin(), x.shape.end() - 2);
  return {TensorType{x.dtype, out, x.device}};
}

}  // namespace kiln
