// ONNX vision ops decomposed into Kiln primitives: GridSample (gathers of the interpolation taps),
// AffineGrid (a matmul with a constant coordinate grid), Col2Im (a grouped transposed convolution
// with one-hot kernels; per-axis 0/1 matrices for other ranks), LpPool (a depthwise convolution of
// |x|^p, or per-axis window matrices beyond 2-D), RoiAlign (per-axis tap matrices, or gathered taps
// for max) and Upsample (Resize). Why: each
// is exact in existing ops, so no new op rows, kernels or backend work are needed.
#include <algorithm>
#include <cmath>

#include "frontend/onnx/build_helpers.h"

namespace kiln::onnx_import {

// Resolved window of one spatial axis of a pool, following the ONNX reference (op_pool_common.py).
struct PoolAxis {
  int64_t in, k, s, d, pb, pe, out, shift;  // shift: begin pad plus the reference's ceil-mode extra
};

// The resolved window of each spatial axis of a pool node over x (static shape), 1 to 3 axes.
std::vector<PoolAxis> pool_axes(NodeCtx& c, Value* x);

namespace {

// ---- GridSample ----

struct Tap {
  Value* idx;     // i64 [N, P], in bounds
  Value* weight;  // f64 [N, P] (nullptr: 1)
};

// Float reflection of v into [lo, hi] the way the ONNX reference does (bounce off the near edge).
Value* reflect(NodeCtx& c, Value* v, double lo, double hi) {
  auto k = [&](double x) { return scalar_of(c, DType::F64, x); };
  double rng = hi - lo;
  if (rng <= 0) return c.emit(Op::Full, {}, {{"shape", v->type.shape}, {"value", lo}, {"dtype", DType::F64}});
  auto fold = [&](Value* dx, bool below) {  // dx >= 0: distance past the edge
    Value* n = c.emit(Op::Floor, {c.emit(Op::Div, {dx, k(rng)})});
    Value* r = c.emit(Op::Sub, {dx, c.emit(Op::Mul, {n, k(rng)})});
    Value* odd = c.emit(Op::Ne, {c.emit(Op::Mod, {n, k(2)}), k(0)});
    Value* from_lo = c.emit(Op::Add, {k(lo), r}), *from_hi = c.emit(Op::Sub, {k(hi), r});
    return below ? c.emit(Op::Where, {odd, from_hi, from_lo}) : c.emit(Op::Where, {odd, from_lo, from_hi});
  };
  Value* lo_side = fold(c.emit(Op::Sub, {k(lo), v}), true);
  Value* hi_side = fold(c.emit(Op::Sub, {v, k(hi)}), false);
  Value* out = c.emit(Op::Where, {c.emit(Op::Lt, {v, k(lo)}), lo_side, v});
  return c.emit(Op::Where, {c.emit(Op::Gt, {v, k(hi)}), hi_side, out});
}

void grid_sample(NodeCtx& c) {
  Value* X = c.input(0);
  Value* grid = c.input(1);
  auto xs = static_shape_of(c, X, "X");
  auto gs = static_shape_of(c, grid, "grid");
  int S = int(xs.size()) - 2;
  if (S < 1) c.fail("X must be [N, C, spatial...]");
  if (int(gs.size()) != S + 2 || gs[0] != xs[0] || gs.back() != S)
    c.fail(str("grid must be [N, out spatial (", S, " dims)..., ", S, "]"));
  std::string mode = c.attr_string("mode", c.opset() >= 20 ? "linear" : "bilinear");
  if (mode == "bilinear") mode = "linear";
  if (mode == "bicubic") mode = "cubic";
  if (mode != "linear" && mode != "nearest" && mode != "cubic") c.fail("mode must be linear, nearest or cubic, got '" + mode + "'");
  std::string pad = c.attr_string("padding_mode", "zeros");
  if (pad != "zeros" && pad != "border" && pad != "reflection") c.fail("padding_mode must be zeros, border or reflection, got '" + pad + "'");
  bool align = c.attr_int("align_corners", 0) != 0;
  int64_t N = xs[0], C = xs[1], P = 1;
  for (int i = 1; i <= S; ++i) P *= gs[size_t(i)];
  auto k = [&](double x) { return scalar_of(c, DType::F64, x); };
  Value* g = c.reshape(c.cast(grid, DType::F64), {N, P, S});

  // Per spatial dim: its taps (index and weight).
  std::vector<std::vector<Tap>> taps(static_cast<size_t>(S));
  std::vector<int64_t> stride(size_t(S), 1);
  for (int d = S - 1; d > 0; --d) stride[size_t(d - 1)] = stride[size_t(d)] * xs[size_t(2 + d)];
  for (int d = 0; d < S; ++d) {
    double L = double(xs[size_t(2 + d)]);
    double lo = align ? 0.0 : -0.5, hi = align ? L - 1 : L - 0.5;
    Value* v = c.reshape(slice_axis(c, g, 2, S - 1 - d, S - d), {N, P});  // grid holds (x, y[, z])
    v = align ? c.emit(Op::Mul, {c.emit(Op::Add, {v, k(1)}), k((L - 1) / 2)})
              : c.emit(Op::Div, {c.emit(Op::Sub, {c.emit(Op::Mul, {c.emit(Op::Add, {v, k(1)}), k(L)}), k(1)}), k(2)});
    v = c.cast(c.cast(v, grid->type.dtype), DType::F64);  // the reference rounds the coordinate to the grid's type
    if (mode == "nearest") v = c.emit(Op::Round, {v});
    if (pad == "border") v = c.emit(Op::Clamp, {v}, {{"min", 0.0}, {"max", L - 1}});
    if (pad == "reflection") v = reflect(c, v, lo, hi);
    // Map an integral tap position to an in-bounds index (and a 0/1 weight for zeros padding).
    auto place = [&](Value* pos, Value* w) {
      Value* idx;
      if (pad == "reflection") {
        idx = c.cast(reflect(c, pos, lo, hi), DType::I64);
      } else {
        if (pad == "zeros") {
          Value* in = c.emit(Op::And, {c.emit(Op::Ge, {pos, k(0)}), c.emit(Op::Le, {pos, k(L - 1)})});
          Value* z = c.cast(in, DType::F64);
          w = w ? c.emit(Op::Mul, {w, z}) : z;
        }
        idx = c.cast(c.emit(Op::Clamp, {pos}, {{"min", 0.0}, {"max", L - 1}}), DType::I64);
      }
      taps[size_t(d)].push_back(Tap{idx, w});
    };
    if (mode == "nearest") {
      place(c.emit(Op::Floor, {v}), nullptr);  // already integral: floor only drops the float noise
      continue;
    }
    Value* base = c.emit(Op::Floor, {v});
    Value* t = c.emit(Op::Sub, {v, base});
    auto at = [&](double o) { return c.emit(Op::Add, {base, k(o)}); };
    if (mode == "linear") {
      place(at(0), c.emit(Op::Sub, {k(1), t}));
      place(at(1), t);
    } else {
      const double A = -0.75;  // Keys' cubic, as in the ONNX reference
      auto far = [&](Value* x) {  // |x| in [1, 2]
        return c.emit(Op::Sub, {c.emit(Op::Mul, {c.emit(Op::Add, {c.emit(Op::Mul, {c.emit(Op::Sub, {c.emit(Op::Mul, {x, k(A)}), k(5 * A)}), x}), k(8 * A)}), x}), k(4 * A)});
      };
      auto near = [&](Value* x) {  // |x| in [0, 1]
        return c.emit(Op::Add, {c.emit(Op::Mul, {c.emit(Op::Mul, {c.emit(Op::Sub, {c.emit(Op::Mul, {x, k(A + 2)}), k(A + 3)}), x}), x}), k(1)});
      };
      place(at(-1), far(c.emit(Op::Add, {t, k(1)})));
      place(at(0), near(t));
      place(at(1), near(c.emit(Op::Sub, {k(1), t})));
      place(at(2), far(c.emit(Op::Sub, {k(2), t})));
    }
  }
  int64_t Ltot = numel_of_dims(std::vector<int64_t>(xs.begin() + 2, xs.end()));
  Value* xf = c.cast(c.reshape(X, {N, C, Ltot}), DType::F64);
  Value* acc = nullptr;
  std::vector<size_t> pick(size_t(S), 0);
  while (true) {
    Value *lin = nullptr, *w = nullptr;
    for (int d = 0; d < S; ++d) {
      const Tap& tp = taps[size_t(d)][pick[size_t(d)]];
      Value* term = stride[size_t(d)] == 1 ? tp.idx : c.emit(Op::Mul, {tp.idx, scalar_of(c, DType::I64, double(stride[size_t(d)]))});
      lin = lin ? c.emit(Op::Add, {lin, term}) : term;
      if (tp.weight) w = w ? c.emit(Op::Mul, {w, tp.weight}) : tp.weight;
    }
    Value* ix = c.emit(Op::Expand, {c.reshape(lin, {N, 1, P})}, {{"shape", Shape{SymInt(N), SymInt(C), SymInt(P)}}});
    Value* val = c.emit(Op::GatherElements, {xf, ix}, {{"axis", int64_t(2)}});
    if (w) val = c.emit(Op::Mul, {val, c.reshape(w, {N, 1, P})});
    acc = acc ? c.emit(Op::Add, {acc, val}) : val;
    int d = S - 1;
    while (d >= 0 && ++pick[size_t(d)] == taps[size_t(d)].size()) pick[size_t(d--)] = 0;
    if (d < 0) break;
  }
  std::vector<int64_t> ys{N, C};
  ys.insert(ys.end(), gs.begin() + 1, gs.end() - 1);
  c.set_output(0, c.cast(c.reshape(acc, dims(ys)), X->type.dtype));
}

// ---- AffineGrid: grid[n, spatial..., :] = theta[n] @ [x, y(, z), 1] over a normalised grid ----

void affine_grid(NodeCtx& c) {
  Value* theta = c.input(0);
  auto size = c.require_ints(1, "size");
  bool align = c.attr_int("align_corners", 0) != 0;
  if (size.size() != 4 && size.size() != 5) c.fail("size must be [N, C, H, W] or [N, C, D, H, W]");
  int S = int(size.size()) - 2;
  auto ts = static_shape_of(c, theta, "theta");
  if (ts != std::vector<int64_t>{size[0], S, S + 1}) c.fail(str("theta must be [N, ", S, ", ", S + 1, "]"));
  auto coords = [&](int64_t n) {
    std::vector<double> v;
    for (int64_t i = 0; i < n; ++i)
      v.push_back(align ? (n == 1 ? -1.0 : -1.0 + 2.0 * double(i) / double(n - 1)) : (2.0 * double(i) + 1.0) / double(n) - 1.0);
    return v;
  };
  std::vector<int64_t> sp(size.begin() + 2, size.end());
  int64_t P = numel_of_dims(sp);
  std::vector<double> base;  // [P, S + 1] rows (x, y[, z], 1); x runs along the last dim
  std::vector<std::vector<double>> axis_c;
  for (int64_t d : sp) axis_c.push_back(coords(d));
  for (int64_t p = 0; p < P; ++p) {
    std::vector<double> row(static_cast<size_t>(S));
    int64_t rem = p;
    for (int d = S - 1; d >= 0; --d) {
      row[size_t(S - 1 - d)] = axis_c[size_t(d)][size_t(rem % sp[size_t(d)])];
      rem /= sp[size_t(d)];
    }
    base.insert(base.end(), row.begin(), row.end());
    base.push_back(1.0);
  }
  Value* b = const_of(c, theta->type.dtype, {P, S + 1}, base);
  Value* tt = c.emit(Op::Permute, {theta}, {{"perm", std::vector<int64_t>{0, 2, 1}}});  // [N, S+1, S]
  Value* g = c.emit(Op::MatMul, {b, tt});                                                // [N, P, S]
  std::vector<int64_t> out{size[0]};
  out.insert(out.end(), sp.begin(), sp.end());
  out.push_back(S);
  c.set_output(0, c.reshape(g, dims(out)));
}

// ---- Col2Im: sum the blocks back into the image = conv_transpose2d with one-hot kernels ----

// Why: Col2Im of any image rank. Each tap of a block lands at blk * stride + tap * dilation - pad
// along every axis independently, so splitting the channels into (C, taps...) and the columns into
// blocks..., each axis' (tap, blk) pair is summed into the image by one constant 0/1 matrix.
void col2im_separable(NodeCtx& c, Value* x, const std::vector<int64_t>& image, const std::vector<int64_t>& block) {
  size_t S = image.size();
  if (S == 0) c.fail("image_shape must have at least one dim");
  for (size_t i = 0; i < S; ++i)
    if (image[i] < 1 || block[i] < 1) c.fail("image_shape and block_shape entries must be positive");
  auto xs = static_shape_of(c, x, "input");
  if (xs.size() != 3) c.fail("input must be [N, C * prod(block_shape), L]");
  auto dil = c.attr_ints("dilations", std::vector<int64_t>(S, 1)), strides = c.attr_ints("strides", std::vector<int64_t>(S, 1));
  auto pads = c.attr_ints("pads", std::vector<int64_t>(2 * S, 0));
  if (dil.size() != S || strides.size() != S || pads.size() != 2 * S)
    c.fail(str("dilations, strides and pads must match the ", S, " image dims"));
  int64_t K = numel_of_dims(block);
  if (K <= 0 || xs[1] % K != 0) c.fail(str("input dim 1 (", xs[1], ") must be a multiple of prod(block_shape) = ", K));
  std::vector<int64_t> nb;
  for (size_t i = 0; i < S; ++i) {
    if (dil[i] < 1 || strides[i] < 1) c.fail("dilations and strides must be positive");
    int64_t span = dil[i] * (block[i] - 1) + 1;
    int64_t n = (image[i] + pads[i] + pads[i + S] - span) / strides[i] + 1;
    if (n <= 0) c.fail(str("image dim ", i, " is smaller than a block"));
    nb.push_back(n);
  }
  if (numel_of_dims(nb) != xs[2]) c.fail(str("input has ", xs[2], " blocks, the image holds ", numel_of_dims(nb)));
  std::vector<int64_t> split{xs[0], xs[1] / K}, perm{0, 1}, paired{xs[0], xs[1] / K};
  split.insert(split.end(), block.begin(), block.end());
  split.insert(split.end(), nb.begin(), nb.end());
  for (size_t i = 0; i < S; ++i) {
    perm.push_back(int64_t(2 + i));
    perm.push_back(int64_t(2 + S + i));
    paired.push_back(block[i] * nb[i]);
  }
  Value* y = c.reshape(c.emit(Op::Permute, {c.reshape(x, dims(split))}, {{"perm", perm}}), dims(paired));
  for (size_t i = 0; i < S; ++i) {
    std::vector<double> m = c.table({image[i], block[i], nb[i]}, "Col2Im placement");
    for (int64_t j = 0; j < block[i]; ++j)
      for (int64_t b = 0; b < nb[i]; ++b) {
        int64_t pos = b * strides[i] + j * dil[i] - pads[i];
        if (pos >= 0 && pos < image[i]) m[size_t(pos * block[i] * nb[i] + j * nb[i] + b)] = 1.0;
      }
    y = apply_axis_matrix(c, y, int(2 + i), image[i], m);
  }
  c.set_output(0, y);
}

void col2im(NodeCtx& c) {
  Value* x = c.input(0);
  auto image = c.require_ints(1, "image_shape");
  auto block = c.require_ints(2, "block_shape");
  if (image.size() != block.size()) c.fail(str("image_shape has ", image.size(), " dims, block_shape ", block.size()));
  if (image.size() != 2) {
    col2im_separable(c, x, image, block);
    return;
  }
  auto xs = static_shape_of(c, x, "input");
  if (xs.size() != 3) c.fail("input must be [N, C * prod(block_shape), L]");
  auto dil = c.attr_ints("dilations", {1, 1}), str_ = c.attr_ints("strides", {1, 1}), pads = c.attr_ints("pads", {0, 0, 0, 0});
  if (dil.size() != 2 || str_.size() != 2 || pads.size() != 4) c.fail("dilations, strides and pads must match the 2 image dims");
  int64_t K = block[0] * block[1];
  if (K <= 0 || xs[1] % K != 0) c.fail(str("input dim 1 (", xs[1], ") must be a multiple of prod(block_shape) = ", K));
  int64_t C = xs[1] / K;
  std::vector<int64_t> nb, out_pad;
  for (int i = 0; i < 2; ++i) {
    int64_t span = dil[size_t(i)] * (block[size_t(i)] - 1) + 1;
    int64_t n = (image[size_t(i)] + pads[size_t(i)] + pads[size_t(i + 2)] - span) / str_[size_t(i)] + 1;
    if (n <= 0) c.fail(str("image dim ", i, " is smaller than a block"));
    nb.push_back(n);
    out_pad.push_back(image[size_t(i)] - ((n - 1) * str_[size_t(i)] - pads[size_t(i)] - pads[size_t(i + 2)] + span));
  }
  if (nb[0] * nb[1] != xs[2]) c.fail(str("input has ", xs[2], " blocks, the image holds ", nb[0] * nb[1]));
  std::vector<double> w = c.table({C, K, K}, "Col2Im tap");  // [C*K, 1, kh, kw]: channel c*K + j puts its value at tap j
  for (int64_t ch = 0; ch < C; ++ch)
    for (int64_t j = 0; j < K; ++j) w[size_t((ch * K + j) * K + j)] = 1.0;
  Value* wt = const_of(c, x->type.dtype, {C * K, 1, block[0], block[1]}, w);
  Value* y = c.reshape(x, {xs[0], xs[1], nb[0], nb[1]});
  c.set_output(0, c.emit(Op::ConvTranspose2d, {y, wt}, {{"strides", str_}, {"pads", pads}, {"dilations", dil},
                                                        {"output_padding", out_pad}, {"groups", C}}));
}

// ---- LpPool: (sum over the window of |x|^p)^(1/p), the sum a depthwise conv with ones ----

// Why: LpPool beyond 2-D. The window sum of |x|^p is separable (zero padding adds nothing), so it
// is one constant 0/1 [out, in] matrix per spatial axis marking that window's in-image taps.
void lp_pool_separable(NodeCtx& c, Value* x) {
  double p = double(c.attr_int("p", 2));
  if (p <= 0) c.fail("p must be positive");
  auto axes = pool_axes(c, x);
  DType dt = x->type.dtype;
  Value* y = c.emit(Op::Pow, {c.emit(Op::Abs, {x}), scalar_of(c, dt, p)});
  for (size_t i = 0; i < axes.size(); ++i) {
    const PoolAxis& a = axes[i];
    std::vector<double> m = c.table({a.out, a.in}, "window");
    for (int64_t o = 0; o < a.out; ++o)
      for (int64_t j = 0; j < a.k; ++j) {
        int64_t q = o * a.s + j * a.d - a.pb;
        if (q >= 0 && q < a.in) m[size_t(o * a.in + q)] = 1.0;
      }
    y = apply_axis_matrix(c, y, int(i) + 2, a.out, m);
  }
  c.set_output(0, c.emit(Op::Pow, {y, scalar_of(c, dt, 1.0 / p)}));
}

void lp_pool(NodeCtx& c) {
  Value* x = c.input(0);
  auto xs = static_shape_of(c, x, "input");
  if (c.attr_int("ceil_mode", 0) != 0) c.unsupported("LpPool with ceil_mode");
  if (xs.size() > 4) {
    lp_pool_separable(c, x);
    return;
  }
  Window w = window_params(c, x, c.attr_ints("kernel_shape"));
  double p = double(c.attr_int("p", 2));
  if (p <= 0) c.fail("p must be positive");
  x = lift(c, x, w.lifted);
  int64_t C = xs[1];
  DType dt = x->type.dtype;
  Value* a = c.emit(Op::Abs, {x});
  Value* powed = p == 1 ? a : p == 2 ? c.emit(Op::Mul, {a, a}) : c.emit(Op::Pow, {a, scalar_of(c, dt, p)});
  Value* ones = c.emit(Op::Full, {}, {{"shape", Shape{SymInt(C), SymInt(1), SymInt(w.kernel[0]), SymInt(w.kernel[1])}},
                                      {"value", 1.0}, {"dtype", dt}});
  Value* sum = c.emit(Op::Conv2d, {powed, ones},
                      {{"strides", w.strides}, {"pads", w.pads}, {"dilations", w.dilations}, {"groups", C}});
  Value* y = p == 1 ? sum : p == 2 ? c.emit(Op::Sqrt, {sum}) : c.emit(Op::Pow, {sum, scalar_of(c, dt, 1.0 / p)});
  c.set_output(0, unlift(c, y, w.lifted));
}

// ---- RoiAlign: bilinear samples on a fixed grid per bin, averaged or maxed ----

// One axis of RoiAlign's sample grid: for every ROI and sample (bin p, sub-sample g, row-major),
// the two neighbouring pixel rows and their weights, zeroed when the sample is off the map.
struct RoiTaps {
  Value *low, *high, *w_low, *w_high;  // [R, P * G]: i64 indices, f64 weights
};

RoiTaps roi_axis(NodeCtx& c, Value* rois, int col, int64_t L, int64_t P, int64_t G, double scale, bool half_pixel) {
  auto k = [&](double v) { return scalar_of(c, DType::F64, v); };
  double offset = half_pixel ? 0.5 : 0.0;
  auto corner = [&](int at) {
    return c.emit(Op::Sub, {c.emit(Op::Mul, {slice_axis(c, rois, 1, at, at + 1), k(scale)}), k(offset)});  // [R, 1]
  };
  Value* start = corner(col);
  Value* size = c.emit(Op::Sub, {corner(col + 2), start});
  if (!half_pixel) size = c.emit(Op::Maximum, {size, k(1)});
  Value* bin = c.emit(Op::Div, {size, k(double(P))});
  std::vector<double> frac;  // p + (g + 0.5) / G
  for (int64_t p = 0; p < P; ++p)
    for (int64_t g = 0; g < G; ++g) frac.push_back(double(p) + (double(g) + 0.5) / double(G));
  Value* pos = c.emit(Op::Add, {start, c.emit(Op::Mul, {bin, const_of(c, DType::F64, {1, P * G}, frac)})});
  Value* on_map = c.cast(c.emit(Op::And, {c.emit(Op::Ge, {pos, k(-1)}), c.emit(Op::Le, {pos, k(double(L))})}), DType::F64);
  Value* y = c.emit(Op::Maximum, {pos, k(0)});
  Value* low = c.emit(Op::Floor, {y});
  Value* edge = c.emit(Op::Ge, {low, k(double(L - 1))});
  low = c.emit(Op::Where, {edge, k(double(L - 1)), low});
  Value* high = c.emit(Op::Where, {edge, low, c.emit(Op::Add, {low, k(1)})});
  y = c.emit(Op::Where, {edge, low, y});
  Value* frac_part = c.emit(Op::Sub, {y, low});
  Value* w_low = c.emit(Op::Mul, {c.emit(Op::Sub, {k(1), frac_part}), on_map});
  Value* w_high = c.emit(Op::Mul, {frac_part, on_map});
  return {c.cast(low, DType::I64), c.cast(high, DType::I64), w_low, w_high};
}

// [R, P, L]: the summed weight each bin's samples give each pixel row (a one-hot per tap).
Value* roi_axis_matrix(NodeCtx& c, const RoiTaps& t, int64_t R, int64_t P, int64_t G, int64_t L) {
  std::vector<double> iota;
  for (int64_t i = 0; i < L; ++i) iota.push_back(double(i));
  Value* rows = const_of(c, DType::I64, {1, 1, L}, iota);
  auto spread = [&](Value* idx, Value* w) {
    Value* hit = c.cast(c.emit(Op::Eq, {c.reshape(idx, {R, P * G, 1}), rows}), DType::F64);
    return c.emit(Op::Mul, {hit, c.reshape(w, {R, P * G, 1})});
  };
  Value* m = c.emit(Op::Add, {spread(t.low, t.w_low), spread(t.high, t.w_high)});  // [R, P*G, L]
  return c.emit(Op::ReduceSum, {c.reshape(m, {R, P, G, L})}, {{"axes", std::vector<int64_t>{2}}});
}

void roi_align(NodeCtx& c) {
  Value* X = c.input(0);
  auto xs = static_shape_of(c, X, "X");
  auto rs = static_shape_of(c, c.input(1), "rois");
  if (xs.size() != 4) c.fail("X must be [N, C, H, W]");
  if (rs.size() != 2 || rs[1] != 4) c.fail("rois must be [num_rois, 4]");
  auto bs = static_shape_of(c, c.input(2), "batch_indices");
  if (bs != std::vector<int64_t>{rs[0]}) c.fail("batch_indices must be [num_rois]");
  int64_t R = rs[0], C = xs[1], H = xs[2], W = xs[3];
  int64_t PH = c.attr_int("output_height", 1), PW = c.attr_int("output_width", 1), G = c.attr_int("sampling_ratio", 0);
  if (PH < 1 || PW < 1) c.fail("output_height and output_width must be positive");
  if (G < 0) c.fail("sampling_ratio must be non-negative");
  if (G == 0) c.unsupported("RoiAlign with sampling_ratio 0 (the sample count would depend on each ROI's size)");
  std::string mode = c.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") c.fail("mode must be avg or max, got '" + mode + "'");
  std::string coord = c.attr_string("coordinate_transformation_mode", c.opset() >= 16 ? "half_pixel" : "output_half_pixel");
  if (coord != "half_pixel" && coord != "output_half_pixel") c.fail("unknown coordinate_transformation_mode '" + coord + "'");
  double scale = c.attr_float("spatial_scale", 1.0);
  Value* rois = c.cast(c.input(1), DType::F64);
  RoiTaps ty = roi_axis(c, rois, 1, H, PH, G, scale, coord == "half_pixel");
  RoiTaps tx = roi_axis(c, rois, 0, W, PW, G, scale, coord == "half_pixel");
  Value* xr = c.emit(Op::Gather, {c.cast(X, DType::F64), c.cast(c.input(2), DType::I64)}, {{"axis", int64_t(0)}});  // [R, C, H, W]
  Value* y;
  if (mode == "avg") {
    Value* ay = c.reshape(roi_axis_matrix(c, ty, R, PH, G, H), {R, 1, PH, H});
    Value* ax = c.emit(Op::Permute, {roi_axis_matrix(c, tx, R, PW, G, W)}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
    y = c.emit(Op::MatMul, {c.emit(Op::MatMul, {ay, xr}), c.reshape(ax, {R, 1, W, PW})});
    y = c.emit(Op::Div, {y, scalar_of(c, DType::F64, double(G * G))});
  } else {
    // max over samples of max over the four corners of weight * pixel, as the reference does.
    int64_t S = PH * G * PW * G;
    Value* flat = c.reshape(xr, {R, C, H * W});
    Value* best = nullptr;
    for (auto [iy, wy] : {std::pair{ty.low, ty.w_low}, std::pair{ty.high, ty.w_high}})
      for (auto [ix, wx] : {std::pair{tx.low, tx.w_low}, std::pair{tx.high, tx.w_high}}) {
        Value* idx = c.emit(Op::Add, {c.emit(Op::Mul, {c.reshape(iy, {R, PH * G, 1}), scalar_of(c, DType::I64, double(W))}),
                                      c.reshape(ix, {R, 1, PW * G})});
        Value* w = c.emit(Op::Mul, {c.reshape(wy, {R, PH * G, 1}), c.reshape(wx, {R, 1, PW * G})});
        Value* at = c.emit(Op::Expand, {c.reshape(idx, {R, 1, S})}, {{"shape", Shape{SymInt(R), SymInt(C), SymInt(S)}}});
        Value* v = c.emit(Op::Mul, {c.emit(Op::GatherElements, {flat, at}, {{"axis", int64_t(2)}}), c.reshape(w, {R, 1, S})});
        best = best ? c.emit(Op::Maximum, {best, v}) : v;
      }
    y = c.emit(Op::ReduceMax, {c.reshape(best, {R, C, PH, G, PW, G})}, {{"axes", std::vector<int64_t>{3, 5}}});
  }
  c.set_output(0, c.cast(y, X->type.dtype));
}

// ---- Upsample (deprecated): Resize with per-dim scales and the asymmetric/floor convention ----

void upsample(NodeCtx& c) {
  Value* x = c.input(0);
  std::vector<double> scales = c.opset() >= 9 ? c.require_known(1, "scales").to_doubles() : c.attr_floats("scales");
  auto xs = static_shape_of(c, x, "input");
  if (scales.size() != xs.size()) c.fail(str("scales has ", scales.size(), " entries for rank ", xs.size()));
  std::string mode = c.attr_string("mode", "nearest");
  if (mode == "bilinear") mode = "linear";
  if (mode != "nearest" && mode != "linear") c.fail("mode must be nearest or linear, got '" + mode + "'");
  Shape out;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (scales[i] < 1) c.fail(str("scale ", i, " is below 1"));
    out.push_back(SymInt(int64_t(std::floor(double(xs[i]) * scales[i]))));
  }
  c.set_output(0, c.emit(Op::Resize, {x}, {{"sizes", out}, {"scales", scales}, {"mode", mode}, {"coord_mode", std::string("asymmetric")},
                                           {"nearest_mode", std::string("floor")}}));
}

}  // namespace

// A box window is separable: max (or, with the same per-axis counts, mean) over (d, h, w) equals
// the reduction over d of the reduction over (h, w). Runs as max_pool2d/avg_pool2d on
// [N, C*D, H, W] and then on [N, C, D, Ho*Wo] with a (kd, 1) window.
void pool3d(NodeCtx& c, bool is_max) {
  Value* x = c.input(0);
  auto xs = static_shape_of(c, x, "input");
  auto kernel = c.attr_ints("kernel_shape");
  auto strides = c.attr_ints("strides", {1, 1, 1});
  auto dil = c.attr_ints("dilations", {1, 1, 1});
  auto pads = c.attr_ints("pads", {0, 0, 0, 0, 0, 0});
  if (kernel.size() != 3 || strides.size() != 3 || dil.size() != 3 || pads.size() != 6)
    c.fail("kernel_shape, strides, dilations and pads must have 3 (pads 6) entries for a 3-D pool");
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") c.unsupported("3-D pooling with auto_pad " + auto_pad);
  if (auto_pad == "VALID") pads.assign(6, 0);
  int64_t ceil = c.attr_int("ceil_mode", 0);
  Attrs hw{{"kernel", std::vector<int64_t>{kernel[1], kernel[2]}}, {"strides", std::vector<int64_t>{strides[1], strides[2]}},
           {"pads", std::vector<int64_t>{pads[1], pads[2], pads[4], pads[5]}}, {"ceil_mode", ceil}};
  Attrs d{{"kernel", std::vector<int64_t>{kernel[0], 1}}, {"strides", std::vector<int64_t>{strides[0], 1}},
          {"pads", std::vector<int64_t>{pads[0], 0, pads[3], 0}}, {"ceil_mode", ceil}};
  if (is_max) {
    hw.set("dilations", std::vector<int64_t>{dil[1], dil[2]});
    d.set("dilations", std::vector<int64_t>{dil[0], 1});
  } else {
    for (int64_t v : dil)
      if (v != 1) c.unsupported("AveragePool with dilations");
    int64_t cip = c.attr_int("count_include_pad", 0);
    if (cip != 0 && ceil != 0) c.unsupported("3-D AveragePool with count_include_pad and ceil_mode");
    hw.set("count_include_pad", cip);
    d.set("count_include_pad", cip);
  }
  Op op = is_max ? Op::MaxPool2d : Op::AvgPool2d;
  Value* y = c.emit(op, {c.reshape(x, {xs[0], xs[1] * xs[2], xs[3], xs[4]})}, hw);
  auto ys = static_shape_of(c, y, "pooled");
  y = c.emit(op, {c.reshape(y, {xs[0], xs[1], xs[2], ys[2] * ys[3]})}, d);
  c.set_output(0, c.reshape(y, {xs[0], xs[1], static_dim(c, y, 2, "pooled"), ys[2], ys[3]}));
}

// Why: a separable per-axis linear map (pool weights, resize filters) is one matmul with a constant
// [out, in] matrix on x reshaped to [pre, in, post]; m is row-major [out, in].
Value* apply_axis_matrix(NodeCtx& c, Value* x, int axis, int64_t out, const std::vector<double>& m) {
  auto xs = static_shape_of(c, x, "input");
  int64_t in = xs[size_t(axis)], pre = 1, post = 1;
  for (int i = 0; i < axis; ++i) pre *= xs[size_t(i)];
  for (size_t i = size_t(axis) + 1; i < xs.size(); ++i) post *= xs[i];
  Value* w = const_of(c, x->type.dtype, {out, in}, m);
  Value* y = c.emit(Op::MatMul, {w, c.reshape(x, {pre, in, post})});
  xs[size_t(axis)] = out;
  return c.reshape(y, dims(xs));
}

// Why: AveragePool with dilations and MaxPool's Indices both need the reference's exact windows
// (auto_pad, ceil_mode, and its quirk of putting half the ceil-mode extra padding at the start).
std::vector<PoolAxis> pool_axes(NodeCtx& c, Value* x) {
  auto xs = static_shape_of(c, x, "input");
  int S = int(xs.size()) - 2;
  if (S < 1 || S > 3) c.fail("input must be [N, C, spatial...] with 1 to 3 spatial dims");
  WindowAttrs w = window_attrs(c, x, c.attr_ints("kernel_shape"));
  bool ceil = c.attr_int("ceil_mode", 0) != 0;
  std::vector<PoolAxis> axes;
  for (int i = 0; i < S; ++i) {
    size_t u = size_t(i);
    PoolAxis a{xs[u + 2], w.kernel[u], w.strides[u], w.dilations[u], w.pads[u], w.pads[u + size_t(S)], 0, 0};
    if (a.k < 1 || a.s < 1 || a.d < 1 || a.pb < 0 || a.pe < 0) c.fail("kernel_shape, strides and dilations must be positive, pads non-negative");
    int64_t span = a.d * (a.k - 1) + 1;
    int64_t num = a.in + a.pb + a.pe - span;
    if (num < 0) c.fail(str("the window (", span, ") is larger than padded spatial dim ", i));
    a.out = num / a.s + 1;
    if (ceil && num % a.s != 0) {
      a.out += 1;
      if ((a.out - 1) * a.s >= a.in + a.pb) a.out -= 1;  // the last window must start inside the image
    }
    int64_t extra = (a.out - 1) * a.s + span - a.in - a.pb - a.pe;
    a.shift = a.pb + (extra > 0 ? extra / 2 : 0);
    axes.push_back(a);
  }
  return axes;
}

// Why: the dilated mean is separable (taps and counts are product sets), so it is one constant
// [out, in] matrix per spatial axis holding 1/count at each in-bounds tap.
void avg_pool_dilated(NodeCtx& c) {
  Value* x = c.input(0);
  auto axes = pool_axes(c, x);
  bool cip = c.attr_int("count_include_pad", 0) != 0;
  Value* y = c.cast(x, DType::F64);
  for (size_t i = 0; i < axes.size(); ++i) {
    const PoolAxis& a = axes[i];
    std::vector<double> m = c.table({a.out, a.in}, "window");
    for (int64_t o = 0; o < a.out; ++o) {
      std::vector<int64_t> hits;
      int64_t kept = 0;
      for (int64_t j = 0; j < a.k; ++j) {
        int64_t p = a.s * o + j * a.d;  // position in the padded axis
        if (p >= a.in + a.pb + a.pe) continue;
        ++kept;
        int64_t q = p - a.shift;
        if (q >= 0 && q < a.in) hits.push_back(q);
      }
      double n = double(cip ? kept : int64_t(hits.size()));
      for (int64_t q : hits) m[size_t(o * a.in + q)] += 1.0 / n;
    }
    y = apply_axis_matrix(c, y, int(i) + 2, a.out, m);
  }
  c.set_output(0, c.cast(y, x->type.dtype));
}

// Why: MaxPool's Indices = the flat input index of each window's first max. The windows' taps are
// gathered as [N, C, windows, taps] (out-of-image taps repeat the window's first in-image tap, so
// they never change the answer), ArgMax picks the tap and a constant table maps it to the index.
Value* max_pool_indices(NodeCtx& c) {
  Value* x = c.input(0);
  auto xs = static_shape_of(c, x, "input");
  auto axes = pool_axes(c, x);
  int64_t order = c.attr_int("storage_order", 0);
  if (order != 0 && order != 1) c.fail(str("storage_order must be 0 or 1, got ", order));
  size_t S = axes.size();
  std::vector<int64_t> in_stride(S, 1), out_stride(S, 1);  // row-major gather strides, index strides
  for (size_t i = S - 1; i > 0; --i) in_stride[i - 1] = in_stride[i] * axes[i].in;
  for (size_t i = 1; i < S; ++i) out_stride[i] = order == 0 ? 1 : out_stride[i - 1] * axes[i - 1].in;
  if (order == 0) out_stride = in_stride;
  int64_t O = 1, K = 1, P = 1;
  for (const auto& a : axes) O *= a.out, K *= a.k, P *= a.in;
  std::vector<double> taps(size_t(O * K)), table(size_t(O * K)), base(static_cast<size_t>(O));
  std::vector<int64_t> o(S, 0);
  for (int64_t w = 0; w < O; ++w) {
    std::vector<int64_t> j(S, 0);
    int64_t first = -1, first_out = -1;
    for (int64_t t = 0; t < K; ++t) {
      int64_t flat = 0, idx = 0;
      bool in = true;
      for (size_t i = 0; i < S; ++i) {
        int64_t p = o[i] * axes[i].s - axes[i].pb + j[i] * axes[i].d;  // the reference's windows: no ceil shift
        in = in && p >= 0 && p < axes[i].in;
        flat += p * in_stride[i];
        idx += p * out_stride[i];
      }
      if (in && first < 0) first = flat, first_out = idx;
      taps[size_t(w * K + t)] = in ? double(flat) : -1.0;
      table[size_t(w * K + t)] = in ? double(idx) : -1.0;
      for (size_t i = S; i-- > 0;) {
        if (++j[i] < axes[i].k) break;
        j[i] = 0;
      }
    }
    if (first < 0) c.unsupported("MaxPool Indices for a window entirely in the padding");
    for (int64_t t = 0; t < K; ++t)
      if (taps[size_t(w * K + t)] < 0) taps[size_t(w * K + t)] = double(first), table[size_t(w * K + t)] = double(first_out);
    base[size_t(w)] = double(w * K);
    for (size_t i = S; i-- > 0;) {
      if (++o[i] < axes[i].out) break;
      o[i] = 0;
    }
  }
  int64_t N = xs[0], C = xs[1];
  Value* g = c.emit(Op::Gather, {c.reshape(x, {N, C, P}), const_of(c, DType::I64, {O, K}, taps)}, {{"axis", int64_t(2)}});
  Value* a = c.emit(Op::ArgMax, {g}, {{"axis", int64_t(3)}, {"keepdim", int64_t(1)}});  // [N, C, O, 1]
  a = c.emit(Op::Add, {a, const_of(c, DType::I64, {O, 1}, base)});
  Value* idx = c.emit(Op::Gather, {const_of(c, DType::I64, {O * K}, table), a}, {{"axis", int64_t(0)}});
  std::vector<double> nc(size_t(N * C));
  for (int64_t i = 0; i < N * C; ++i) nc[size_t(i)] = double(i * P);
  idx = c.emit(Op::Add, {idx, const_of(c, DType::I64, {N, C, 1, 1}, nc)});
  std::vector<int64_t> ys{N, C};
  for (const auto& ax : axes) ys.push_back(ax.out);
  return c.reshape(idx, dims(ys));
}

// y uses the batch's mean and (biased) variance over every dim but 1; the running statistics
// come out as input * momentum + batch * (1 - momentum).
void batch_norm_training(NodeCtx& c) {
  Value* x = c.input(0);
  int rank = x->type.rank();
  if (rank < 2) c.fail("input must be [N, C, ...]");
  DType dt = x->type.dtype;
  std::vector<int64_t> axes{0};
  for (int i = 2; i < rank; ++i) axes.push_back(i);
  double eps = c.attr_float("epsilon", 1e-5), momentum = c.attr_float("momentum", 0.9);
  Shape bshape(size_t(rank), SymInt(1));
  bshape[1] = x->type.shape[1];
  auto chan = [&](Value* v) { return c.reshape(v, bshape); };
  Value* mean = c.emit(Op::ReduceMean, {x}, {{"axes", axes}, {"keepdim", int64_t(1)}});
  Value* dev = c.emit(Op::Sub, {x, mean});
  Value* var = c.emit(Op::ReduceMean, {c.emit(Op::Mul, {dev, dev})}, {{"axes", axes}, {"keepdim", int64_t(1)}});
  Value* y = c.emit(Op::Mul, {dev, c.emit(Op::Rsqrt, {c.emit(Op::Add, {var, scalar_of(c, dt, eps)})})});
  y = c.emit(Op::Add, {c.emit(Op::Mul, {y, chan(c.input(1))}), chan(c.input(2))});
  c.set_output(0, y);
  auto running = [&](int in, Value* batch) {
    Value* r = c.emit(Op::Mul, {c.input(in), scalar_of(c, dt, momentum)});
    return c.emit(Op::Add, {r, c.emit(Op::Mul, {c.reshape(batch, {bshape[1]}), scalar_of(c, dt, 1 - momentum)})});
  };
  if (c.wants_output(1)) c.set_output(1, running(3, mean));
  if (c.wants_output(2)) c.set_output(2, running(4, var));
}

void register_vision_ops(OpRegistry& r) {
  r["GridSample"] = grid_sample;
  r["AffineGrid"] = affine_grid;
  r["Col2Im"] = col2im;
  r["LpPool"] = lp_pool;
  r["Upsample"] = upsample;
  r["RoiAlign"] = roi_align;
}

}  // namespace kiln::onnx_import
