// Shape rules for ops added for the ONNX frontend (cumsum, topk, conv_transpose2d, resize).
#include "ir/shape_rules.h"
#include "kiln/error.h"
#include "kiln/graph.h"

namespace kiln {

std::vector<TensorType> rule_cumsum(const InferCtx& ctx) {
  const TensorType& x = ctx.inputs[0];
  if (x.dtype == DType::Bool) ctx.fail("cumsum needs a numeric dtype");
  if (x.rank() == 0) ctx.fail("cumsum needs rank >= 1");
  ctx.normalize_axis(ctx.attrs.get_int("axis"), x.rank());
  return {x};
}

std::vector<TensorType> rule_topk(const InferCtx& ctx) {
  const TensorType& x = ctx.inputs[0];
  if (x.dtype == DType::Bool) ctx.fail("topk needs a numeric dtype");
  if (x.rank() == 0) ctx.fail("topk needs rank >= 1");
  int axis = ctx.normalize_axis(ctx.attrs.get_int("axis"), x.rank());
  int64_t k = ctx.attrs.get_int("k");
  if (k < 0) ctx.fail(str("k must be >= 0, got ", k));
  auto dim = x.shape[size_t(axis)].maybe_constant();
  if (dim && k > *dim) ctx.fail(str("k = ", k, " is larger than the dim (", *dim, ")"));
  Shape out = x.shape;
  out[size_t(axis)] = SymInt(k);
  return {TensorType{x.dtype, out, x.device}, TensorType{DType::I64, out, x.device}};
}

std::vector<TensorType> rule_conv_transpose2d(const InferCtx& ctx) {
  const TensorType& x = ctx.inputs[0];
  const TensorType& w = ctx.inputs[1];
  if (!is_float(x.dtype) || w.dtype != x.dtype) ctx.fail("conv_transpose2d needs floating-point x and w of one dtype");
  if (x.rank() != 4 || w.rank() != 4) ctx.fail("conv_transpose2d needs x [N, C, H, W] and w [C, O/groups, kH, kW]");
  int64_t groups = ctx.attrs.get_int("groups");
  if (groups < 1) ctx.fail("groups must be >= 1");
  ctx.require_equal(x.shape[1], w.shape[0], "conv_transpose2d input channels vs weight dim 0");
  SymInt out_c = w.shape[1] * SymInt(groups);
  if (ctx.inputs.size() > 2) {
    if (ctx.inputs[2].rank() != 1 || ctx.inputs[2].dtype != x.dtype) ctx.fail("bias must be [O] of the input's dtype");
    ctx.require_equal(ctx.inputs[2].shape[0], out_c, "conv_transpose2d bias length vs output channels");
  }
  const auto& s = ctx.attrs.get_ints("strides");
  const auto& p = ctx.attrs.get_ints("pads");
  const auto& d = ctx.attrs.get_ints("dilations");
  const auto& op = ctx.attrs.get_ints("output_padding");
  if (s.size() != 2 || p.size() != 4 || d.size() != 2 || op.size() != 2)
    ctx.fail("strides, dilations, output_padding need 2 entries and pads 4");
  Shape out = {x.shape[0], out_c};
  for (int i = 0; i < 2; ++i) {
    auto k = w.shape[size_t(2 + i)].maybe_constant();
    if (!k) ctx.fail("conv_transpose2d kernel size must be static");
    if (s[size_t(i)] <= 0 || d[size_t(i)] <= 0) ctx.fail("strides and dilations must be positive");
    SymInt o = SymInt(s[size_t(i)]) * (x.shape[size_t(2 + i)] - SymInt(1)) +
               SymInt(op[size_t(i)] + (*k - 1) * d[size_t(i)] + 1 - p[size_t(i)] - p[size_t(i + 2)]);
    if (o.is_constant() && o.constant() < 0) ctx.fail("conv_transpose2d output size is negative");
    out.push_back(o);
  }
  return {TensorType{x.dtype, out, x.device}};
}

std::vector<TensorType> rule_resize(const InferCtx& ctx) {
  const TensorType& x = ctx.inputs[0];
  Shape sizes = ctx.attrs.get_shape("sizes");
  if (int(sizes.size()) != x.rank()) ctx.fail("resize sizes need one entry per dim");
  if (int(ctx.attrs.get_floats("scales").size()) != x.rank()) ctx.fail("resize scales need one entry per dim");
  const std::string& mode = ctx.attrs.get_string("mode");
  if (mode != "nearest" && mode != "linear" && mode != "cubic") ctx.fail("resize mode must be nearest, linear or cubic");
  const std::string& cm = ctx.attrs.get_string("coord_mode");
  if (cm != "half_pixel" && cm != "half_pixel_symmetric" && cm != "pytorch_half_pixel" && cm != "align_corners" &&
      cm != "asymmetric" && cm != "tf_crop_and_resize")
    ctx.fail("unknown resize coordinate transformation '" + cm + "'");
  if (cm == "tf_crop_and_resize" && int(ctx.attrs.get_floats("roi").size()) != 2 * x.rank())
    ctx.fail("tf_crop_and_resize needs roi with 2 * rank entries");
  if (x.dtype == DType::Bool) ctx.fail("resize needs a numeric dtype");
  for (const auto& d : sizes)
    if (d.is_constant() && d.constant() < 0) ctx.fail("resize sizes must be >= 0");
  return {TensorType{x.dtype, sizes, x.device}};
}

}  // namespace kiln
