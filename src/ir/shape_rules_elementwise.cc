// Shape/dtype rules for elementwise ops, reductions and sources.
#include "ir/shape_rules.h"
#include "kiln/error.h"
#include "kiln/graph.h"

namespace kiln {

namespace {
TensorType same_as(const TensorType& t, DType dtype) { return TensorType{dtype, t.shape, t.device}; }

void require_dtype(const InferCtx& ctx, int i, bool ok, const char* what) {
  if (!ok)
    ctx.fail(str("operand ", i, " has dtype ", dtype_name(ctx.inputs[size_t(i)].dtype), ", but ",
                 what));
}

void require_same_dtype_and_device(const InferCtx& ctx) {
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    if (ctx.inputs[i].dtype != ctx.inputs[0].dtype)
      ctx.fail(str("operands must share a dtype (", dtype_name(ctx.inputs[0].dtype), " vs ",
                   dtype_name(ctx.inputs[i].dtype), "); insert a cast"));
    if (ctx.inputs[i].device != ctx.inputs[0].device) ctx.fail("operands are on different devices");
  }
}
}  // namespace

Shape broadcast_shapes(const InferCtx& ctx, const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right.
    bool has_a = i < a.size(), has_b = i < b.size();
    SymInt da = has_a ? a[a.size() - 1 - i] : SymInt(1);
    SymInt db = has_b ? b[b.size() - 1 - i] : SymInt(1);
    SymInt r;
    if (da == SymInt(1)) r = db;
    else if (db == SymInt(1)) r = da;
    else r = ctx.require_equal(da, db, str("broadcast of ", shape_to_string(a), " and ",
                                             shape_to_string(b), " at dim -", i + 1));
    out[rank - 1 - i] = r;
  }
  return out;
}

std::vector<TensorType> rule_unary_numeric(const InferCtx& ctx) {
  require_dtype(ctx, 0, ctx.inputs[0].dtype != DType::Bool, "this op needs a numeric dtype");
  if (ctx.op == Op::Clamp && ctx.attrs.get_float("min") > ctx.attrs.get_float("max"))
    ctx.fail("clamp min is greater than max");
  return {ctx.inputs[0]};
}

std::vector<TensorType> rule_unary_float(const InferCtx& ctx) {
  require_dtype(ctx, 0, is_float(ctx.inputs[0].dtype), "this op needs a floating-point dtype");
  if (ctx.op == Op::Gelu) {
    const std::string& a = ctx.attrs.get_string("approximate");
    if (a != "none" && a != "tanh") ctx.fail("gelu approximate must be \"none\" or \"tanh\", got \"" + a + "\"");
  }
  return {ctx.inputs[0]};
}

std::vector<TensorType> rule_unary_bool(const InferCtx& ctx) {
  require_dtype(ctx, 0, ctx.inputs[0].dtype == DType::Bool, "this op needs bool");
  return {ctx.inputs[0]};
}

std::vector<TensorType> rule_unary_float_to_bool(const InferCtx& ctx) {
  require_dtype(ctx, 0, is_float(ctx.inputs[0].dtype), "this op needs a floating-point dtype");
  return {same_as(ctx.inputs[0], DType::Bool)};
}

std::vector<TensorType> rule_cast(const InferCtx& ctx) {
  return {same_as(ctx.inputs[0], ctx.attrs.get_dtype("dtype"))};
}

std::vector<TensorType> rule_binary_arith(const InferCtx& ctx) {
  require_same_dtype_and_device(ctx);
  require_dtype(ctx, 0, ctx.inputs[0].dtype != DType::Bool, "arithmetic needs a numeric dtype");
  return {TensorType{ctx.inputs[0].dtype, broadcast_shapes(ctx, ctx.inputs[0].shape, ctx.inputs[1].shape),
                     ctx.inputs[0].device}};
}

std::vector<TensorType> rule_binary_compare(const InferCtx& ctx) {
  require_same_dtype_and_device(ctx);
  return {TensorType{DType::Bool, broadcast_shapes(ctx, ctx.inputs[0].shape, ctx.inputs[1].shape),
                     ctx.inputs[0].device}};
}

std::vector<TensorType> rule_binary_logical(const InferCtx& ctx) {
  require_same_dtype_and_device(ctx);
  require_dtype(ctx, 0, ctx.inputs[0].dtype == DType::Bool, "logical ops need bool");
  return {TensorType{DType::Bool, broadcast_shapes(ctx, ctx.inputs[0].shape, ctx.inputs[1].shape),
                     ctx.inputs[0].device}};
}

std::vector<TensorType> rule_where(const InferCtx& ctx) {
  require_dtype(ctx, 0, ctx.inputs[0].dtype == DType::Bool, "where's condition must be bool");
  if (ctx.inputs[1].dtype != ctx.inputs[2].dtype)
    ctx.fail(str("where's branches must share a dtype (", dtype_name(ctx.inputs[1].dtype), " vs ",
                 dtype_name(ctx.inputs[2].dtype), ")"));
  Shape s = broadcast_shapes(ctx, ctx.inputs[0].shape, ctx.inputs[1].shape);
  s = broadcast_shapes(ctx, s, ctx.inputs[2].shape);
  return {TensorType{ctx.inputs[1].dtype, s, ctx.inputs[1].device}};
}

namespace {
std::vector<bool> reduced_axes(const InferCtx& ctx, const std::vector<int64_t>& axes, int rank) {
  std::vector<bool> reduced(size_t(rank), axes.empty());
  for (int64_t a : axes) {
    int ax = ctx.normalize_axis(a, rank, "reduction axis");
    if (reduced[size_t(ax)] && !axes.empty()) ctx.fail(str("reduction axis ", a, " repeated"));
    reduced[size_t(ax)] = true;
  }
  return reduced;
}

TensorType reduce_type(const InferCtx& ctx, const std::vector<bool>& reduced, bool keepdim, DType dt) {
  const TensorType& in = ctx.inputs[0];
  Shape out;
  for (int i = 0; i < in.rank(); ++i) {
    if (!reduced[size_t(i)]) out.push_back(in.shape[size_t(i)]);
    else if (keepdim) out.push_back(SymInt(1));
  }
  return TensorType{dt, out, in.device};
}
}  // namespace

std::vector<TensorType> rule_reduce(const InferCtx& ctx) {
  const TensorType& in = ctx.inputs[0];
  require_dtype(ctx, 0, in.dtype != DType::Bool, "reductions need a numeric dtype");
  auto reduced = reduced_axes(ctx, ctx.attrs.get_ints("axes"), in.rank());
  return {reduce_type(ctx, reduced, ctx.attrs.get_int("keepdim") != 0, in.dtype)};
}

std::vector<TensorType> rule_reduce_float(const InferCtx& ctx) {
  require_dtype(ctx, 0, is_float(ctx.inputs[0].dtype), "this reduction needs a floating-point dtype");
  return rule_reduce(ctx);
}

std::vector<TensorType> rule_arg_reduce(const InferCtx& ctx) {
  const TensorType& in = ctx.inputs[0];
  require_dtype(ctx, 0, in.dtype != DType::Bool, "argmax/argmin need a numeric dtype");
  if (in.rank() == 0) ctx.fail("argmax/argmin need rank >= 1");
  int axis = ctx.normalize_axis(ctx.attrs.get_int("axis"), in.rank());
  std::vector<bool> reduced(size_t(in.rank()), false);
  reduced[size_t(axis)] = true;
  return {reduce_type(ctx, reduced, ctx.attrs.get_int("keepdim") != 0, DType::I64)};
}

std::vector<TensorType> rule_same_as_input(const InferCtx& ctx) {
  if ((ctx.op == Op::Tril || ctx.op == Op::Triu) && ctx.inputs[0].rank() < 2)
    ctx.fail("tril/triu need rank >= 2");
  return {ctx.inputs[0]};
}

std::vector<TensorType> rule_same_float(const InferCtx& ctx) {
  require_dtype(ctx, 0, is_float(ctx.inputs[0].dtype), "this op needs a floating-point dtype");
  if (ctx.inputs[0].rank() == 0) ctx.fail("needs rank >= 1");
  ctx.normalize_axis(ctx.attrs.get_int("axis"), ctx.inputs[0].rank());
  return {ctx.inputs[0]};
}

std::vector<TensorType> rule_constant(const InferCtx& ctx) {
  const HostTensor& t = ctx.attrs.get_tensor("value");
  return {TensorType{t.dtype(), to_shape(t.shape()), Device::CPU}};
}

namespace {
void check_shape_attr(const InferCtx& ctx, const Shape& s) {
  for (const auto& d : s)
    if (d.is_constant() && d.constant() < 0) ctx.fail("negative dimension in shape " + shape_to_string(s));
}
}  // namespace

std::vector<TensorType> rule_arange(const InferCtx& ctx) {
  Shape s = ctx.attrs.get_shape("size");
  if (s.size() != 1) ctx.fail("arange size must have exactly one entry");
  check_shape_attr(ctx, s);
  DType dt = ctx.attrs.get_dtype("dtype");
  if (dt == DType::Bool) ctx.fail("arange cannot produce bool");
  return {TensorType{dt, s, Device::CPU}};
}

std::vector<TensorType> rule_full(const InferCtx& ctx) {
  Shape s = ctx.attrs.get_shape("shape");
  check_shape_attr(ctx, s);
  DType dt = ctx.attrs.get_dtype("dtype");
  if ((ctx.op == Op::RandomUniform || ctx.op == Op::RandomNormal) && !is_float(dt))
    ctx.fail("random ops produce floating-point dtypes only");
  return {TensorType{dt, s, Device::CPU}};
}

std::vector<TensorType> rule_shape_of(const InferCtx& ctx) {
  return {TensorType{DType::I64, {SymInt(ctx.inputs[0].rank())}, ctx.inputs[0].device}};
}

}  // namespace kiln
