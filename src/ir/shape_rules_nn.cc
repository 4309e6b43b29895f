// Shape rules for contractions and neural-network ops (matmul, conv, pooling, norms, attention).
#include "ir/shape_rules.h"
#include "kiln/error.h"
#include "kiln/graph.h"

namespace kiln {

namespace {
void require_float_same(const InferCtx& ctx, size_t i) {
  if (!is_float(ctx.inputs[0].dtype))
    ctx.fail(str("needs a floating-point dtype, got ", dtype_name(ctx.inputs[0].dtype)));
  if (i < ctx.inputs.size() && ctx.inputs[i].dtype != ctx.inputs[0].dtype)
    ctx.fail(str("operand ", i, " must have the dtype of operand 0"));
}
void require_rank(const InferCtx& ctx, size_t i, int rank, const char* what) {
  if (ctx.inputs[i].rank() != rank)
    ctx.fail(str(what, " (operand ", i, ") must have rank ", rank, ", got ", ctx.inputs[i].rank()));
}
std::vector<int64_t> ints_of_len(const InferCtx& ctx, const char* name, size_t n) {
  const auto& v = ctx.attrs.get_ints(name);
  if (v.size() != n) ctx.fail(str("attribute ", name, " must have ", n, " entries, got ", v.size()));
  return v;
}
// floor((in + pad - dil*(k-1) - 1) / stride) + 1, or the ceil variant.
SymInt window_out(const InferCtx& ctx, const SymInt& in, int64_t pad_total, int64_t k, int64_t stride,
                  int64_t dil, bool ceil_mode, int64_t pad_begin) {
  if (k <= 0 || stride <= 0 || dil <= 0) ctx.fail("kernel, stride and dilation must be positive");
  SymInt span = in + SymInt(pad_total - dil * (k - 1) - 1);
  // A window one step larger than the padded input gives an empty output (as a symbolic extent
  // bound to that size does); beyond that the output extent would be negative.
  if (span.is_constant() && span.constant() < -stride)
    ctx.fail(str("window of ", k, " (dilation ", dil, ") is larger than the padded input ", in.to_string()));
  if (!ceil_mode) return floordiv(span, SymInt(stride)) + SymInt(1);
  SymInt out = floordiv(span + SymInt(stride - 1), SymInt(stride)) + SymInt(1);
  // The last window must start inside the input or its leading padding.
  if (out.is_constant() && in.is_constant() && (out.constant() - 1) * stride >= in.constant() + pad_begin)
    out = out - SymInt(1);
  return out;
}
}  // namespace

std::vector<TensorType> rule_matmul(const InferCtx& ctx) {
  const TensorType& a = ctx.inputs[0];
  const TensorType& b = ctx.inputs[1];
  if (a.dtype != b.dtype) ctx.fail("matmul operands must share a dtype");
  if (a.dtype == DType::Bool) ctx.fail("matmul needs a numeric dtype");
  if (a.rank() == 0 || b.rank() == 0) ctx.fail("matmul operands must have rank >= 1");
  Shape sa = a.shape, sb = b.shape;
  bool a_vec = sa.size() == 1, b_vec = sb.size() == 1;
  if (a_vec) sa.insert(sa.begin(), SymInt(1));
  if (b_vec) sb.push_back(SymInt(1));
  ctx.require_equal(sa[sa.size() - 1], sb[sb.size() - 2], "matmul contraction dims (a's last, b's second-to-last)");
  Shape batch = broadcast_shapes(ctx, Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2));
  Shape out = batch;
  if (!a_vec) out.push_back(sa[sa.size() - 2]);
  if (!b_vec) out.push_back(sb[sb.size() - 1]);
  return {TensorType{a.dtype, out, a.device}};
}

std::vector<TensorType> rule_conv2d(const InferCtx& ctx) {
  require_float_same(ctx, 1);
  const std::string& layout = ctx.attrs.get_string("layout");
  if (layout != "NCHW" && layout != "NHWC") ctx.fail(str("conv2d layout must be \"NCHW\" or \"NHWC\", not \"", layout, "\""));
  const bool nhwc = layout == "NHWC";
  require_rank(ctx, 0, 4, nhwc ? "conv2d input [N, H, W, C]" : "conv2d input [N, C, H, W]");
  require_rank(ctx, 1, 4, "conv2d weight [O, C/groups, kH, kW]");
  // Checked as NCHW: the channels-last input seen through its permute.
  TensorType x = ctx.inputs[0];
  if (nhwc) x.shape = {x.shape[0], x.shape[3], x.shape[1], x.shape[2]};
  const TensorType& w = ctx.inputs[1];
  int64_t groups = ctx.attrs.get_int("groups");
  if (groups < 1) ctx.fail("groups must be >= 1");
  ctx.require_equal(x.shape[1], w.shape[1] * SymInt(groups), "conv2d input channels vs weight dim 1 * groups");
  const SymInt& O = w.shape[0];
  if (O.is_constant() && O.constant() % groups != 0) ctx.fail("conv2d output channels must divide by groups");
  if (ctx.inputs.size() > 2) {
    if (ctx.inputs[2].dtype != x.dtype) ctx.fail("conv2d bias must have the input's dtype");
    require_rank(ctx, 2, 1, "conv2d bias [O]");
    ctx.require_equal(ctx.inputs[2].shape[0], O, "conv2d bias length vs output channels");
  }
  auto strides = ints_of_len(ctx, "strides", 2);
  auto pads = ints_of_len(ctx, "pads", 4);
  auto dil = ints_of_len(ctx, "dilations", 2);
  for (int64_t p : pads) if (p < 0) ctx.fail("conv2d pads must be >= 0");
  SymInt kh = w.shape[2], kw = w.shape[3];
  if (!kh.is_constant() || !kw.is_constant()) ctx.fail("conv2d kernel size must be static");
  Shape out = {x.shape[0], O,
               window_out(ctx, x.shape[2], pads[0] + pads[2], kh.constant(), strides[0], dil[0], false, pads[0]),
               window_out(ctx, x.shape[3], pads[1] + pads[3], kw.constant(), strides[1], dil[1], false, pads[1])};
  if (nhwc) out = {out[0], out[2], out[3], out[1]};
  return {TensorType{x.dtype, out, x.device}};
}

std::vector<TensorType> rule_im2col(const InferCtx& ctx) {
  const TensorType& x = ctx.inputs[0];
  if (!is_float(x.dtype)) ctx.fail("im2col needs a floating-point dtype");
  require_rank(ctx, 0, 4, "im2col input [N, C, H, W]");
  auto k = ints_of_len(ctx, "kernel", 2);
  auto strides = ints_of_len(ctx, "strides", 2);
  auto pads = ints_of_len(ctx, "pads", 4);
  auto dil = ints_of_len(ctx, "dilations", 2);
  for (int64_t p : pads) if (p < 0) ctx.fail("im2col pads must be >= 0");
  for (int64_t v : k) if (v < 1) ctx.fail("im2col kernel dims must be >= 1");
  SymInt oh = window_out(ctx, x.shape[2], pads[0] + pads[2], k[0], strides[0], dil[0], false, pads[0]);
  SymInt ow = window_out(ctx, x.shape[3], pads[1] + pads[3], k[1], strides[1], dil[1], false, pads[1]);
  return {TensorType{x.dtype, {x.shape[0], x.shape[1] * SymInt(k[0] * k[1]), oh * ow}, x.device}};
}

std::vector<TensorType> rule_pool2d(const InferCtx& ctx) {
  const TensorType& x = ctx.inputs[0];
  if (x.dtype == DType::Bool) ctx.fail("pooling needs a numeric dtype");
  if (ctx.op == Op::AvgPool2d && !is_float(x.dtype)) ctx.fail("avg_pool2d needs a floating-point dtype");
  require_rank(ctx, 0, 4, "pooling input [N, C, H, W]");
  auto k = ints_of_len(ctx, "kernel", 2);
  auto strides = ints_of_len(ctx, "strides", 2);
  auto pads = ints_of_len(ctx, "pads", 4);
  std::vector<int64_t> dil = {1, 1};
  if (ctx.op == Op::MaxPool2d) dil = ints_of_len(ctx, "dilations", 2);
  for (int i = 0; i < 2; ++i) {
    int64_t extent = dil[size_t(i)] * (k[size_t(i)] - 1) + 1;
    for (int64_t p : {pads[size_t(i)], pads[size_t(i + 2)]})
      if (p < 0 || p >= extent) ctx.fail("pooling pads must be >= 0 and smaller than the window");
  }
  bool ceil_mode = ctx.attrs.get_int("ceil_mode") != 0;
  Shape out = {x.shape[0], x.shape[1],
               window_out(ctx, x.shape[2], pads[0] + pads[2], k[0], strides[0], dil[0], ceil_mode, pads[0]),
               window_out(ctx, x.shape[3], pads[1] + pads[3], k[1], strides[1], dil[1], ceil_mode, pads[1])};
  return {TensorType{x.dtype, out, x.device}};
}

std::vector<TensorType> rule_global_pool(const InferCtx& ctx) {
  const TensorType& x = ctx.inputs[0];
  if (!is_float(x.dtype)) ctx.fail("global_avg_pool needs a floating-point dtype");
  if (x.rank() < 3) ctx.fail("global_avg_pool needs [N, C, spatial...]");
  Shape out = x.shape;
  for (size_t i = 2; i < out.size(); ++i) out[i] = SymInt(1);
  return {TensorType{x.dtype, out, x.device}};
}

std::vector<TensorType> rule_layer_norm(const InferCtx& ctx) {
  const TensorType& x = ctx.inputs[0];
  require_float_same(ctx, 1);
  require_float_same(ctx, 2);
  if (x.rank() == 0) ctx.fail("norms need rank >= 1");
  int axis = ctx.normalize_axis(ctx.attrs.get_int("axis"), x.rank());
  Shape normalized(x.shape.begin() + axis, x.shape.end());
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    Shape b = broadcast_shapes(ctx, normalized, ctx.inputs[i].shape);
    if (b.size() != normalized.size())
      ctx.fail(str("operand ", i, " ", ctx.inputs[i].to_string(), " must broadcast to the normalised dims ",
                   shape_to_string(normalized)));
  }
  if (ctx.attrs.get_float("eps") < 0) ctx.fail("eps must be >= 0");
  return {x};
}

std::vector<TensorType> rule_batch_norm(const InferCtx& ctx) {
  const TensorType& x = ctx.inputs[0];
  for (size_t i = 1; i < 5; ++i) {
    require_float_same(ctx, i);
    require_rank(ctx, i, 1, "batch_norm parameters [C]");
  }
  if (x.rank() < 2) ctx.fail("batch_norm needs [N, C, ...]");
  // The channel dim as the parameters pin it (a symbolic C guarded equal to their static length):
  // the decomposition's broadcasts arrive at the same type.
  TensorType out = x;
  for (size_t i = 1; i < 5; ++i)
    out.shape[1] = ctx.require_equal(ctx.inputs[i].shape[0], out.shape[1], "batch_norm parameter length vs channels");
  return {out};
}

std::vector<TensorType> rule_attention(const InferCtx& ctx) {
  const TensorType& q = ctx.inputs[0];
  const TensorType& k = ctx.inputs[1];
  const TensorType& v = ctx.inputs[2];
  require_float_same(ctx, 1);
  require_float_same(ctx, 2);
  if (q.rank() < 2 || k.rank() != q.rank() || v.rank() != q.rank())
    ctx.fail("attention q, k, v must share a rank >= 2 ([..., T, D])");
  int r = q.rank();
  Shape batch;
  for (int i = 0; i < r - 2; ++i) {
    SymInt d = ctx.require_equal(q.shape[size_t(i)], k.shape[size_t(i)], str("attention batch dim ", i, " of q vs k"));
    batch.push_back(ctx.require_equal(d, v.shape[size_t(i)], str("attention batch dim ", i, " of q vs v")));
  }
  ctx.require_equal(q.shape[size_t(r - 1)], k.shape[size_t(r - 1)], "attention head dim of q vs k");
  ctx.require_equal(k.shape[size_t(r - 2)], v.shape[size_t(r - 2)], "attention key length of k vs v");
  Shape scores = batch;
  scores.push_back(q.shape[size_t(r - 2)]);
  scores.push_back(k.shape[size_t(r - 2)]);
  if (ctx.inputs.size() > 3) {
    const TensorType& m = ctx.inputs[3];
    if (m.dtype != DType::Bool && m.dtype != q.dtype)
      ctx.fail("attention mask must be bool (true = keep) or an additive mask of q's dtype");
    Shape b = broadcast_shapes(ctx, scores, m.shape);
    if (b.size() != scores.size()) ctx.fail("attention mask must broadcast to [..., Tq, Tk]");
  }
  Shape out = batch;
  out.push_back(q.shape[size_t(r - 2)]);
  out.push_back(v.shape[size_t(r - 1)]);
  if (ctx.attrs.get_int("heads_last") != 0) {  // [B, H, Tq, D] -> [B, Tq, H, D]
    if (r != 4) ctx.fail("attention heads_last needs rank-4 q, k, v ([B, H, T, D])");
    std::swap(out[1], out[2]);
  }
  return {TensorType{q.dtype, out, q.device}};
}

}  // namespace kiln
