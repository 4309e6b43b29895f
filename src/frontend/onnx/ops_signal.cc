// ONNX signal ops: Hann/Hamming/Blackman windows, DFT and STFT. Why: with an import-time length
// these are products with constant cosine/sine matrices, so they decompose into arange, cos and
// matmul and need no new Kiln op (O(n^2) per transform, not an FFT).
#include <cmath>

#include "frontend/onnx/build_helpers.h"

namespace kiln::onnx_import {

namespace {

DType window_dtype(NodeCtx& c) {
  auto dt = dtype_from_onnx(int(c.attr_int("output_datatype", 1)));
  if (!dt || !is_float(*dt)) c.unsupported("output_datatype must be a float type supported by Kiln");
  return *dt;
}

// w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1.
void window(NodeCtx& c, double a0, double a1, double a2) {
  int64_t size = c.require_ints(0, "size").at(0);
  if (size < 0) c.fail(str("size must be >= 0, got ", size));
  bool periodic = c.attr_int("periodic", 1) != 0;
  DType dt = window_dtype(c);
  double n_div = double(periodic ? size : size - 1);
  if (size == 0) {
    c.set_output(0, c.emit(Op::Full, {}, {{"shape", Shape{SymInt(0)}}, {"value", 0.0}, {"dtype", dt}}));
    return;
  }
  // arange in f64 so the angle is exact before the cast to the output dtype.
  Value* n = c.emit(Op::Arange, {}, {{"size", Shape{SymInt(size)}}, {"dtype", DType::F64}});
  Value* theta = c.emit(Op::Mul, {n, scalar_of(c, DType::F64, n_div == 0 ? 0.0 : 2 * M_PI / n_div)});
  Value* y = c.emit(Op::Sub, {scalar_of(c, DType::F64, a0),
                              c.emit(Op::Mul, {c.emit(Op::Cos, {theta}), scalar_of(c, DType::F64, a1)})});
  if (a2 != 0) {
    Value* t2 = c.emit(Op::Mul, {theta, scalar_of(c, DType::F64, 2.0)});
    y = c.emit(Op::Add, {y, c.emit(Op::Mul, {c.emit(Op::Cos, {t2}), scalar_of(c, DType::F64, a2)})});
  }
  c.set_output(0, c.cast(y, dt));
}

// DFT of x [..., n, ..., 1|2] along `axis` (an axis of x other than the last). length L pads with
// zeros or truncates; onesided keeps L/2 + 1 bins; inverse conjugates and divides by L.
Value* dft_along(NodeCtx& c, Value* x, int axis, int64_t length, bool onesided, bool inverse) {
  int rank = x->type.rank();
  int64_t comp = static_dim(c, x, rank - 1, "DFT input");
  if (comp != 1 && comp != 2) c.fail(str("the last dim must be 1 (real) or 2 (complex), got ", comp));
  if (axis < 0 || axis >= rank - 1) c.fail(str("axis ", axis, " must name a signal dim (not the last of rank ", rank, ")"));
  int64_t n = static_dim(c, x, axis, "DFT input");
  if (length <= 0) c.fail(str("dft_length must be positive, got ", length));
  DType dt = x->type.dtype;
  if (!is_float(dt)) c.fail("input must be a float tensor");
  // Move the transformed axis last (after dropping the complex dim).
  std::vector<int64_t> perm;
  for (int i = 0; i < rank - 1; ++i)
    if (i != axis) perm.push_back(i);
  perm.push_back(axis);
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[size_t(perm[i])] = int64_t(i);
  auto part = [&](int64_t k) {
    Value* p = c.emit(Op::Squeeze, {slice_axis(c, x, rank - 1, k, k + 1)}, {{"axes", std::vector<int64_t>{rank - 1}}});
    p = c.emit(Op::Permute, {p}, {{"perm", perm}});
    int last = rank - 2;
    if (length < n) p = slice_axis(c, p, last, 0, length);
    if (length > n) {
      std::vector<int64_t> pads(size_t(2 * (rank - 1)), 0);
      pads[size_t(last + rank - 1)] = length - n;
      p = c.emit(Op::Pad, {p}, {{"pads", pads}});
    }
    return p;
  };
  Value* re = part(0);
  Value* im = comp == 2 ? part(1) : nullptr;
  int64_t bins = onesided ? length / 2 + 1 : length;
  std::vector<double> cs = c.table({length, bins}, "DFT cosine"), sn = c.table({length, bins}, "DFT sine");
  for (int64_t i = 0; i < length; ++i)
    for (int64_t k = 0; k < bins; ++k) {
      double a = 2 * M_PI * double((i * k) % length) / double(length);
      cs[size_t(i * bins + k)] = std::cos(a);
      sn[size_t(i * bins + k)] = std::sin(a);
    }
  Value* C = const_of(c, dt, {length, bins}, cs);
  Value* S = const_of(c, dt, {length, bins}, sn);
  // forward: e^{-i a}: re' = re C + im S, im' = im C - re S; inverse: e^{+i a} and / L.
  double sign = inverse ? -1.0 : 1.0;
  Value* out_re = c.emit(Op::MatMul, {re, C});
  Value* out_im = c.emit(Op::Mul, {c.emit(Op::MatMul, {re, S}), scalar_of(c, dt, -sign)});
  if (im) {
    out_re = c.emit(Op::Add, {out_re, c.emit(Op::Mul, {c.emit(Op::MatMul, {im, S}), scalar_of(c, dt, sign)})});
    out_im = c.emit(Op::Add, {out_im, c.emit(Op::MatMul, {im, C})});
  }
  if (inverse) {
    out_re = c.emit(Op::Div, {out_re, scalar_of(c, dt, double(length))});
    out_im = c.emit(Op::Div, {out_im, scalar_of(c, dt, double(length))});
  }
  auto back = [&](Value* v) {
    v = c.emit(Op::Permute, {v}, {{"perm", inv}});
    return c.emit(Op::Unsqueeze, {v}, {{"axes", std::vector<int64_t>{rank - 1}}});
  };
  return c.emit(Op::Concat, {back(out_re), back(out_im)}, {{"axis", int64_t(rank - 1)}});
}

void dft(NodeCtx& c) {
  Value* x = c.input(0);
  int rank = x->type.rank();
  if (rank < 2) c.fail("input must have rank >= 2 ([..., signal, 1|2])");
  int64_t axis = 1;
  if (c.opset() >= 20) axis = c.has_input(2) ? c.require_ints(2, "axis").at(0) : -2;
  else axis = c.attr_int("axis", 1);
  if (axis < -rank || axis >= rank) c.fail(str("axis ", axis, " is out of range for rank ", rank));
  if (axis < 0) axis += rank;
  bool inverse = c.attr_int("inverse", 0) != 0, onesided = c.attr_int("onesided", 0) != 0;
  if (inverse && onesided) c.unsupported("an inverse one-sided DFT");
  int64_t length = c.has_input(1) ? c.require_ints(1, "dft_length").at(0) : static_dim(c, x, int(axis), "DFT input");
  c.set_output(0, dft_along(c, x, int(axis), length, onesided, inverse));
}

// STFT: frames of signal [batch, len, 1|2] every frame_step, times the window, DFT per frame.
void stft(NodeCtx& c) {
  Value* x = c.input(0);
  if (x->type.rank() != 3) c.fail("signal must be [batch, length, 1|2]");
  int64_t step = c.require_ints(1, "frame_step").at(0);
  if (step <= 0) c.fail(str("frame_step must be positive, got ", step));
  int64_t len = static_dim(c, x, 1, "STFT signal");
  Value* win = c.has_input(2) ? c.input(2) : nullptr;
  int64_t fl;
  if (c.has_input(3)) fl = c.require_ints(3, "frame_length").at(0);
  else if (win) fl = static_dim(c, win, 0, "STFT window");
  else c.fail("needs a window or a frame_length");
  if (win && (win->type.rank() != 1 || static_dim(c, win, 0, "STFT window") != fl))
    c.fail(str("window must be 1-D of frame_length ", fl));
  if (fl <= 0 || fl > len) c.fail(str("frame_length ", fl, " must be in [1, signal length ", len, "]"));
  int64_t frames = 1 + (len - fl) / step;
  std::vector<double> idx;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t i = 0; i < fl; ++i) idx.push_back(double(f * step + i));
  Value* y = c.emit(Op::Gather, {x, const_of(c, DType::I64, {frames, fl}, idx)}, {{"axis", int64_t(1)}});
  if (win) y = c.emit(Op::Mul, {y, c.reshape(c.cast(win, x->type.dtype), {SymInt(fl), SymInt(1)})});
  c.set_output(0, dft_along(c, y, 2, fl, c.attr_int("onesided", 1) != 0, false));
}

}  // namespace

void register_signal_ops(OpRegistry& r) {
  r["HannWindow"] = [](NodeCtx& c) { window(c, 0.5, 0.5, 0.0); };
  r["HammingWindow"] = [](NodeCtx& c) { window(c, 25.0 / 46.0, 21.0 / 46.0, 0.0); };
  r["BlackmanWindow"] = [](NodeCtx& c) { window(c, 0.42, 0.5, 0.08); };
  r["DFT"] = dft;
  r["STFT"] = stft;
}

}  // namespace kiln::onnx_import
