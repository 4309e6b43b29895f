// Reference kernels for contractions and pooling: matmul, conv2d, max/avg/global pooling, written
// as the textbook loops with float64 accumulation. Why: these are the ops generated and library
// kernels most often get subtly wrong (padding, dilation, groups, ceil_mode), so the oracle spells
// every index out.
#include <cmath>
#include <limits>

#include "interp/ref_kernels.h"
#include "kiln/error.h"

namespace kiln::interp {

// numpy matmul: a 1-D a is [1, K] and a 1-D b is [K, 1] (the inserted dim is dropped from the
// result); leading dims broadcast. Floats accumulate in double, ints in int64.
void ref_MatMul(const KernelArgs& a) {
  const HostTensor& lhs = a.in[0];
  const HostTensor& rhs = a.in[1];
  HostTensor& out = a.out[0];
  bool lhs_vec = lhs.rank() == 1, rhs_vec = rhs.rank() == 1;
  std::vector<int64_t> sa = lhs.shape(), sb = rhs.shape();
  if (lhs_vec) sa.insert(sa.begin(), 1);
  if (rhs_vec) sb.push_back(1);
  int64_t M = sa[sa.size() - 2], K = sa[sa.size() - 1], N = sb[sb.size() - 1];
  KILN_CHECK(sb[sb.size() - 2] == K, "matmul contraction dims differ: ", K, " vs ", sb[sb.size() - 2]);
  std::vector<int64_t> batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  size_t out_batch_rank = size_t(out.rank()) - (lhs_vec ? 0 : 1) - (rhs_vec ? 0 : 1);
  std::vector<int64_t> batch_out(out.shape().begin(), out.shape().begin() + long(out_batch_rank));
  BroadcastIndex batch_of_a(batch_a, batch_out), batch_of_b(batch_b, batch_out);
  int64_t batches = numel_of(batch_out);
  bool floats = computes_in_double(out.dtype());
  for (int64_t bt = 0; bt < batches; ++bt) {
    int64_t a_base = batch_of_a(bt) * M * K, b_base = batch_of_b(bt) * K * N;
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        int64_t o = (bt * M + m) * N + n;
        if (floats) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc += lhs.get_f64(a_base + m * K + k) * rhs.get_f64(b_base + k * N + n);
          out.set_f64(o, acc);
        } else {
          int64_t acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc = wrapping_add(acc, wrapping_mul(lhs.get_i64(a_base + m * K + k), rhs.get_i64(b_base + k * N + n)));
          out.set_i64(o, acc);
        }
      }
    }
  }
}

// out[n, o, y, x] = bias[o] + sum over (c in o's group, ky, kx) of
//   in[n, c, y*sy - pad_top + ky*dy, x*sx - pad_left + kx*dx] * w[o, c - group_start, ky, kx]
// with out-of-bounds input positions reading zero. Layout "NHWC": in and out are indexed
// [n, y, x, c] instead (the same sums).
void ref_Conv2d(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  const HostTensor& w = a.in[1];
  const HostTensor* bias = a.in.size() > 2 ? &a.in[2] : nullptr;
  HostTensor& out = a.out[0];
  const auto& strides = a.attrs.get_ints("strides");
  const auto& pads = a.attrs.get_ints("pads");
  const auto& dil = a.attrs.get_ints("dilations");
  int64_t groups = a.attrs.get_int("groups");
  const bool nhwc = a.attrs.get_string("layout") == "NHWC";
  int64_t N = x.shape()[0], C = x.shape()[nhwc ? 3 : 1], H = x.shape()[nhwc ? 1 : 2], W = x.shape()[nhwc ? 2 : 3];
  int64_t O = w.shape()[0], Cg = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
  int64_t OH = out.shape()[nhwc ? 1 : 2], OW = out.shape()[nhwc ? 2 : 3];
  auto x_at = [&](int64_t n, int64_t c, int64_t y, int64_t xx) {
    return nhwc ? ((n * H + y) * W + xx) * C + c : ((n * C + c) * H + y) * W + xx;
  };
  auto out_at = [&](int64_t n, int64_t o, int64_t y, int64_t xx) {
    return nhwc ? ((n * OH + y) * OW + xx) * O + o : ((n * O + o) * OH + y) * OW + xx;
  };
  KILN_CHECK(C == Cg * groups && O % groups == 0, "conv2d channels do not divide into ", groups, " groups");
  int64_t out_per_group = O / groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      int64_t group_start = (o / out_per_group) * Cg;
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          double acc = bias ? bias->get_f64(o) : 0.0;
          // Padding is zeros that are multiplied like any input (ONNX pads, then convolves): a
          // tap over padding adds 0 * w, which is NaN for an infinite or NaN weight.
          for (int64_t cg = 0; cg < Cg; ++cg)
            for (int64_t ky = 0; ky < KH; ++ky) {
              int64_t iy = oy * strides[0] - pads[0] + ky * dil[0];
              for (int64_t kx = 0; kx < KW; ++kx) {
                int64_t ix = ox * strides[1] - pads[1] + kx * dil[1];
                double wv = w.get_f64(((o * Cg + cg) * KH + ky) * KW + kx);
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) {
                  if (!std::isfinite(wv)) acc += 0.0 * wv;
                  continue;
                }
                acc += x.get_f64(x_at(n, group_start + cg, iy, ix)) * wv;
              }
            }
          out.set_f64(out_at(n, o, oy, ox), acc);
        }
    }
}

// cols[n, (c*KH + ky)*KW + kx, oy*OW + ox] = x[n, c, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw], 0
// where that falls in the padding.
void ref_Im2Col(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  const auto& k = a.attrs.get_ints("kernel");
  const auto& strides = a.attrs.get_ints("strides");
  const auto& pads = a.attrs.get_ints("pads");
  const auto& dil = a.attrs.get_ints("dilations");
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t rows = out.shape()[1], points = out.shape()[2];
  const int64_t OW = points == 0 ? 0 : (W + pads[1] + pads[3] - dil[1] * (k[1] - 1) - 1) / strides[1] + 1;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t ky = 0; ky < k[0]; ++ky)
        for (int64_t kx = 0; kx < k[1]; ++kx) {
          const int64_t row = (c * k[0] + ky) * k[1] + kx;
          for (int64_t p = 0; p < points; ++p) {
            const int64_t iy = p / OW * strides[0] - pads[0] + ky * dil[0];
            const int64_t ix = p % OW * strides[1] - pads[1] + kx * dil[1];
            const bool inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
            out.set_f64((n * rows + row) * points + p, inside ? x.get_f64(((n * C + c) * H + iy) * W + ix) : 0.0);
          }
        }
}

namespace {

struct Window {
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right, dil_h, dil_w;
};

Window window_of(const KernelArgs& a, bool has_dilation) {
  const auto& k = a.attrs.get_ints("kernel");
  const auto& s = a.attrs.get_ints("strides");
  const auto& p = a.attrs.get_ints("pads");
  std::vector<int64_t> d = has_dilation ? a.attrs.get_ints("dilations") : std::vector<int64_t>{1, 1};
  return Window{k[0], k[1], s[0], s[1], p[0], p[1], p[2], p[3], d[0], d[1]};
}

}  // namespace

// Max over the window's positions inside the input: padding is never a candidate. A ceil_mode
// window that runs past the padded input is clipped the same way.
void ref_MaxPool2d(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  Window win = window_of(a, true);
  int64_t NC = x.shape()[0] * x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  int64_t OH = out.shape()[2], OW = out.shape()[3];
  bool floats = computes_in_double(x.dtype());
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t oy = 0; oy < OH; ++oy)
      for (int64_t ox = 0; ox < OW; ++ox) {
        double best_f = -std::numeric_limits<double>::infinity();
        int64_t best_i = std::numeric_limits<int64_t>::lowest();
        bool any = false;
        for (int64_t ky = 0; ky < win.kernel_h; ++ky) {
          int64_t iy = oy * win.stride_h - win.pad_top + ky * win.dil_h;
          if (iy < 0 || iy >= H) continue;
          for (int64_t kx = 0; kx < win.kernel_w; ++kx) {
            int64_t ix = ox * win.stride_w - win.pad_left + kx * win.dil_w;
            if (ix < 0 || ix >= W) continue;
            int64_t idx = (nc * H + iy) * W + ix;
            any = true;
            if (floats) {
              double v = x.get_f64(idx);  // NaN propagates
              if (std::isnan(v) || v > best_f) best_f = std::isnan(best_f) ? best_f : v;
            } else {
              int64_t v = x.get_i64(idx);
              if (v > best_i) best_i = v;
            }
          }
        }
        KILN_ASSERT(any);  // the shape rule keeps every window overlapping the input
        int64_t o = (nc * OH + oy) * OW + ox;
        if (floats) out.set_f64(o, best_f);
        else out.set_i64(o, best_i);
      }
}

// Sum over the window's positions inside the input, divided by the number of those positions
// (count_include_pad=0) or by the number of positions inside the padded input (count_include_pad=1;
// a ceil_mode window running past the padded input is clipped, as in PyTorch).
void ref_AvgPool2d(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  Window win = window_of(a, false);
  bool count_include_pad = a.attrs.get_int("count_include_pad") != 0;
  int64_t NC = x.shape()[0] * x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  int64_t OH = out.shape()[2], OW = out.shape()[3];
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t oy = 0; oy < OH; ++oy)
      for (int64_t ox = 0; ox < OW; ++ox) {
        double sum = 0;
        int64_t inside_input = 0, inside_padded = 0;
        for (int64_t ky = 0; ky < win.kernel_h; ++ky) {
          int64_t iy = oy * win.stride_h - win.pad_top + ky;
          if (iy < -win.pad_top || iy >= H + win.pad_bottom) continue;
          for (int64_t kx = 0; kx < win.kernel_w; ++kx) {
            int64_t ix = ox * win.stride_w - win.pad_left + kx;
            if (ix < -win.pad_left || ix >= W + win.pad_right) continue;
            ++inside_padded;
            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
            ++inside_input;
            sum += x.get_f64((nc * H + iy) * W + ix);
          }
        }
        int64_t count = count_include_pad ? inside_padded : inside_input;
        out.set_f64((nc * OH + oy) * OW + ox, sum / double(count));
      }
}

void ref_GlobalAvgPool(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  int64_t NC = x.shape()[0] * x.shape()[1];
  int64_t spatial = NC == 0 ? 0 : x.numel() / NC;
  for (int64_t nc = 0; nc < NC; ++nc) {
    double sum = 0;
    for (int64_t s = 0; s < spatial; ++s) sum += x.get_f64(nc * spatial + s);
    a.out[0].set_f64(nc, sum / double(spatial));
  }
}

}  // namespace kiln::interp
