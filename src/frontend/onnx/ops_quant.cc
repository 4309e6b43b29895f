// ONNX quantization ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
// QLinearMatMul, ConvInteger and QLinearConv. Why: each is casts, a scale, a round-half-to-even and a saturating clamp; integer
// products are exact in f64 (|sum| stays far below 2^53), so existing Kiln ops compute them exactly.
#include <algorithm>

#include "frontend/onnx/build_helpers.h"

namespace kiln::onnx_import {

namespace {

// The saturation range of a quantized integer type.
std::pair<double, double> quant_range(const NodeCtx& c, DType t) {
  switch (t) {
    case DType::U8: return {0, 255};
    case DType::I8: return {-128, 127};
    case DType::U16: return {0, 65535};
    case DType::I16: return {-32768, 32767};
    case DType::U4: return {0, 15};
    case DType::I4: return {-8, 7};
    default:
      c.unsupported(str("quantized type ", dtype_name(t),
                        " (int4/8/16, uint4/8/16 and the float8/float4 types are supported)"));
  }
}

// A scale or zero point broadcast against x: per tensor (a scalar or one element), per axis (1-D
// of x's dim `axis`) or blocked (x's shape with dim `axis` in blocks of block_size: each entry is
// repeated block_size times along that axis by a gather).
Value* broadcast_param(NodeCtx& c, Value* p, Value* x, int64_t axis_attr, int64_t block, const char* what) {
  auto ps = static_shape_of(c, p, what);
  if (numel_of_dims(ps) == 1) return c.reshape(p, {});
  auto xs = static_shape_of(c, x, "x");
  int axis = normalize_axis(c, axis_attr, int(xs.size()));
  if (block <= 0) {
    if (ps.size() != 1 || ps[0] != xs[size_t(axis)])
      c.fail(str(what, " must be a scalar or have x's dim ", axis, " (", xs[size_t(axis)], ") entries, got ",
                 dims_to_string(ps)));
    Shape s(xs.size(), SymInt(1));
    s[size_t(axis)] = SymInt(ps[0]);
    return c.reshape(p, s);
  }
  bool ok = ps.size() == xs.size();
  for (size_t i = 0; ok && i < xs.size(); ++i)
    ok = int(i) == axis ? ps[i] == (xs[i] + block - 1) / block : ps[i] == xs[i];
  if (!ok)
    c.fail(str(what, " ", dims_to_string(ps), " does not block x ", dims_to_string(xs), " along axis ", axis,
               " with block_size ", block));
  std::vector<double> idx;
  for (int64_t i = 0; i < xs[size_t(axis)]; ++i) idx.push_back(double(i / block));
  return c.emit(Op::Gather, {p, const_of(c, DType::I64, {xs[size_t(axis)]}, idx)}, {{"axis", int64_t(axis)}});
}

// round-half-to-even, then the zero point, then saturation: the spec's order.
Value* saturate_round(NodeCtx& c, Value* scaled, Value* zero_point, DType to) {
  auto [lo, hi] = quant_range(c, to);
  Value* q = c.cast(c.emit(Op::Round, {scaled}), DType::F64);
  if (zero_point) q = c.emit(Op::Add, {q, c.cast(zero_point, DType::F64)});
  return c.cast(c.emit(Op::Clamp, {q}, {{"min", lo}, {"max", hi}}), to);
}

void dequantize_linear(NodeCtx& c) {
  Value* x = c.input(0);
  Value* scale = c.input(1);
  // The float8/float4 inputs are values already: their zero point is ignored, as in the reference.
  const bool float_x = is_narrow_float(x->type.dtype) && x->type.dtype != DType::F8E8M0;
  if (!is_integer(x->type.dtype) && !float_x)
    c.unsupported(str("DequantizeLinear of ", dtype_name(x->type.dtype), " (integer, float8 and float4 inputs only)"));
  if (!is_float(scale->type.dtype)) c.fail("x_scale must be a float tensor");
  int64_t axis = c.attr_int("axis", 1), block = c.attr_int("block_size", 0);
  DType out = scale->type.dtype;
  if (c.has_attr("output_dtype") && c.attr_int("output_dtype", 0) != 0) {
    auto dt = dtype_from_onnx(int(c.attr_int("output_dtype", 0)));
    if (!dt || !is_float(*dt)) c.fail("output_dtype must be a float type");
    out = *dt;
  }
  Value* v = c.cast(x, DType::F64);
  if (c.has_input(2) && !float_x) {
    Value* zp = c.input(2);
    if (zp->type.dtype != x->type.dtype) c.fail("x_zero_point must have x's type");
    v = c.emit(Op::Sub, {v, c.cast(broadcast_param(c, zp, x, axis, block, "x_zero_point"), DType::F64)});
  }
  v = c.emit(Op::Mul, {v, c.cast(broadcast_param(c, scale, x, axis, block, "x_scale"), DType::F64)});
  c.set_output(0, c.cast(v, out));
}

void quantize_linear(NodeCtx& c) {
  Value* x = c.input(0);
  Value* scale = c.input(1);
  if (!is_float(x->type.dtype) || !is_float(scale->type.dtype)) c.fail("x and y_scale must be float tensors");
  if (c.has_attr("precision")) c.unsupported("QuantizeLinear with precision");
  int64_t axis = c.attr_int("axis", 1), block = c.attr_int("block_size", 0);
  DType to = DType::U8;
  int64_t out_attr = c.attr_int("output_dtype", 0);
  if (out_attr != 0) {
    auto dt = dtype_from_onnx(int(out_attr));
    if (!dt) c.unsupported(str("quantizing to ", onnx_type_name(int(out_attr))));
    to = *dt;
  }
  Value* zp = nullptr;
  if (c.has_input(2)) {
    zp = c.input(2);
    if (out_attr != 0 && zp->type.dtype != to) c.fail("output_dtype and y_zero_point's type differ");
    to = zp->type.dtype;
    zp = broadcast_param(c, zp, x, axis, block, "y_zero_point");
  }
  // The reference divides in x's type, so the quotient is rounded as x's type first.
  Value* s = c.cast(broadcast_param(c, scale, x, axis, block, "y_scale"), x->type.dtype);
  Value* scaled = c.emit(Op::Div, {x, s});
  if (to == DType::F4E2M1) {  // the zero point is added as a float; the cast saturates by itself
    if (zp) scaled = c.emit(Op::Add, {scaled, c.cast(zp, x->type.dtype)});
    return c.set_output(0, c.cast(scaled, to));
  }
  if (is_narrow_float(to) && to != DType::F8E8M0)  // float8: the reference ignores the zero point
    return c.set_output(0, onnx_cast(c, scaled, to, c.attr_int("saturate", 1) != 0));
  c.set_output(0, saturate_round(c, scaled, zp, to));
}

// uint8 quantization with the scale and zero point from the data's range (widened to hold 0).
void dynamic_quantize_linear(NodeCtx& c) {
  Value* x = c.input(0);
  DType ft = x->type.dtype;
  if (!is_float(ft)) c.fail("x must be a float tensor");
  auto k = [&](double v) { return scalar_of(c, ft, v); };
  Value* hi = c.emit(Op::Maximum, {c.emit(Op::ReduceMax, {x}), k(0)});
  Value* lo = c.emit(Op::Minimum, {c.emit(Op::ReduceMin, {x}), k(0)});
  Value* range = c.emit(Op::Where, {c.emit(Op::Eq, {hi, lo}), k(1), c.emit(Op::Sub, {hi, lo})});
  Value* scale = c.emit(Op::Div, {range, k(255)});
  Value* zp = c.emit(Op::Sub, {k(0), c.emit(Op::Div, {lo, scale})});
  zp = c.emit(Op::Round, {c.emit(Op::Clamp, {zp}, {{"min", 0.0}, {"max", 255.0}})});
  c.set_output(0, saturate_round(c, c.emit(Op::Div, {x, scale}), zp, DType::U8));
  c.set_output(1, scale);
  c.set_output(2, c.cast(zp, DType::U8));
}

// An integer matrix operand minus its zero point, in f64. A's zero point is per tensor or per row
// ([M] -> [M, 1]); B's per tensor or per column ([N]).
Value* centred(NodeCtx& c, int x_at, int zp_at, bool rows) {
  Value* x = c.input(x_at);
  if (!is_integer(x->type.dtype)) c.fail(str("input ", x_at, " must be an integer tensor"));
  Value* v = c.cast(x, DType::F64);
  if (!c.has_input(zp_at)) return v;
  Value* zp = c.input(zp_at);
  if (zp->type.dtype != x->type.dtype) c.fail(str("input ", zp_at, " (zero point) must have input ", x_at, "'s type"));
  auto zs = static_shape_of(c, zp, "zero point");
  if (numel_of_dims(zs) == 1) zp = c.reshape(zp, {});
  else if (zs.size() != 1) c.fail(str("input ", zp_at, " (zero point) must be a scalar or 1-D"));
  else if (rows) zp = c.reshape(zp, {SymInt(zs[0]), SymInt(1)});
  return c.emit(Op::Sub, {v, c.cast(zp, DType::F64)});
}

void matmul_integer(NodeCtx& c) {
  Value* y = c.emit(Op::MatMul, {centred(c, 0, 2, true), centred(c, 1, 3, false)});
  c.set_output(0, c.cast(y, DType::I32));
}

// y = saturate(round((a - a_zp) @ (b - b_zp) * (a_scale * b_scale / y_scale)) + y_zp); the scale
// ratio is computed in the scales' type, as the reference does.
void qlinear_matmul(NodeCtx& c) {
  Value* acc = c.emit(Op::MatMul, {centred(c, 0, 2, true), centred(c, 3, 5, false)});
  auto param = [&](int i, bool rows) {
    Value* p = c.input(i);
    auto ps = static_shape_of(c, p, "scale");
    if (numel_of_dims(ps) == 1) return c.reshape(p, {});
    if (ps.size() != 1) c.fail(str("input ", i, " (scale) must be a scalar or 1-D"));
    return rows ? c.reshape(p, {SymInt(ps[0]), SymInt(1)}) : p;
  };
  Value* sa = param(1, true);
  Value* sb = param(4, false);
  Value* sy = param(6, false);
  if (sa->type.dtype != sb->type.dtype || sa->type.dtype != sy->type.dtype || !is_float(sa->type.dtype))
    c.fail("a_scale, b_scale and y_scale must be float tensors of one type");
  Value* ratio = c.emit(Op::Div, {c.emit(Op::Mul, {sa, sb}), sy});
  Value* scaled = c.emit(Op::Mul, {acc, c.cast(ratio, DType::F64)});
  Value* zp = c.has_input(7) ? param(7, false) : nullptr;
  DType to = zp ? zp->type.dtype : c.input(0)->type.dtype;
  c.set_output(0, saturate_round(c, scaled, zp, to));
}

// (x - x_zp) convolved with (w - w_zp), exact in f64: [N, O, spatial...]. w's zero point is per
// tensor or per output channel.
Value* integer_conv(NodeCtx& c, int x_at, int xzp_at, int w_at, int wzp_at, Value* bias) {
  Value* x = c.input(x_at);
  Value* w = c.input(w_at);
  if (!is_integer(x->type.dtype) || !is_integer(w->type.dtype)) c.fail("x and w must be integer tensors");
  auto centre = [&](Value* v, int zp_at, bool per_channel) {
    Value* f = c.cast(v, DType::F64);
    if (!c.has_input(zp_at)) return f;
    Value* zp = c.input(zp_at);
    if (zp->type.dtype != v->type.dtype) c.fail(str("input ", zp_at, " (zero point) must have its operand's type"));
    auto zs = static_shape_of(c, zp, "zero point");
    if (numel_of_dims(zs) == 1) zp = c.reshape(zp, {});
    else if (!per_channel || zs.size() != 1) c.fail(str("input ", zp_at, " (zero point) must be a scalar", per_channel ? " or per output channel" : ""));
    else {
      Shape s(size_t(v->type.rank()), SymInt(1));
      s[0] = SymInt(zs[0]);
      zp = c.reshape(zp, s);
    }
    return c.emit(Op::Sub, {f, c.cast(zp, DType::F64)});
  };
  std::vector<int64_t> kernel;
  for (int i = 2; i < w->type.rank(); ++i) kernel.push_back(static_dim(c, w, i, "w"));
  Window win = window_params(c, x, c.attr_ints("kernel_shape", kernel));
  std::vector<Value*> ops{lift(c, centre(x, xzp_at, false), win.lifted), lift(c, centre(w, wzp_at, true), win.lifted)};
  if (bias) ops.push_back(c.cast(bias, DType::F64));
  Value* y = c.emit(Op::Conv2d, ops, {{"strides", win.strides}, {"pads", win.pads}, {"dilations", win.dilations},
                                      {"groups", c.attr_int("group", 1)}});
  return unlift(c, y, win.lifted);
}

void conv_integer(NodeCtx& c) { c.set_output(0, c.cast(integer_conv(c, 0, 2, 1, 3, nullptr), DType::I32)); }

// y = saturate(round((conv + bias) * (x_scale * w_scale / y_scale)) + y_zp); w_scale may be per
// output channel; the scale ratio is computed in the scales' type, as the reference does.
void qlinear_conv(NodeCtx& c) {
  Value* bias = c.has_input(8) ? c.input(8) : nullptr;
  if (bias && bias->type.dtype != DType::I32) c.fail("B must be an int32 tensor");
  Value* acc = integer_conv(c, 0, 2, 3, 5, bias);
  Value* sx = c.reshape(c.input(1), {});
  Value* sy = c.reshape(c.input(6), {});
  Value* sw = c.input(4);
  auto ws = static_shape_of(c, sw, "w_scale");
  if (numel_of_dims(ws) == 1) sw = c.reshape(sw, {});
  else if (ws.size() == 1) {
    Shape s(size_t(acc->type.rank() - 1), SymInt(1));
    s[0] = SymInt(ws[0]);
    sw = c.reshape(sw, s);
  } else c.fail("w_scale must be a scalar or 1-D (per output channel)");
  if (!is_float(sx->type.dtype) || sw->type.dtype != sx->type.dtype || sy->type.dtype != sx->type.dtype)
    c.fail("x_scale, w_scale and y_scale must be float tensors of one type");
  Value* ratio = c.emit(Op::Div, {c.emit(Op::Mul, {sx, sw}), sy});
  Value* scaled = c.emit(Op::Mul, {acc, c.cast(ratio, DType::F64)});
  Value* zp = c.has_input(7) ? c.reshape(c.input(7), {}) : nullptr;
  c.set_output(0, saturate_round(c, scaled, zp, zp ? zp->type.dtype : c.input(0)->type.dtype));
}

}  // namespace

void register_quant_ops(OpRegistry& r) {
  r["ConvInteger"] = conv_integer;
  r["QLinearConv"] = qlinear_conv;
  r["QuantizeLinear"] = quantize_linear;
  r["DequantizeLinear"] = dequantize_linear;
  r["DynamicQuantizeLinear"] = dynamic_quantize_linear;
  r["MatMulInteger"] = matmul_integer;
  r["QLinearMatMul"] = qlinear_matmul;
}

}  // namespace kiln::onnx_import
