// Reference kernels for the ops added for the ONNX frontend: cumsum, topk, conv_transpose2d,
// resize. Plain loops in double (int64 for integer cumsum), written to be checked by reading.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "interp/ref_kernels.h"
#include "interp/resize_taps.h"
#include "kiln/error.h"

namespace kiln::interp {

void ref_CumSum(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  int axis = normalize_axis(a.attrs.get_int("axis"), x.rank());
  bool exclusive = a.attrs.get_int("exclusive") != 0, reverse = a.attrs.get_int("reverse") != 0;
  int64_t outer, dim, inner;
  split_at_axis(x.shape(), axis, outer, dim, inner);
  bool fp = is_float(x.dtype());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double accd = 0;
      int64_t acci = 0;
      for (int64_t s = 0; s < dim; ++s) {
        int64_t k = reverse ? dim - 1 - s : s;
        int64_t idx = (o * dim + k) * inner + i;
        if (exclusive) {
          if (fp) out.set_f64(idx, accd); else out.set_i64(idx, acci);
        }
        if (fp) accd += x.get_f64(idx); else acci = wrapping_add(acci, x.get_i64(idx));
        if (!exclusive) {
          if (fp) out.set_f64(idx, accd); else out.set_i64(idx, acci);
        }
      }
    }
}

void ref_TopK(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  HostTensor& values = a.out[0];
  HostTensor& indices = a.out[1];
  int axis = normalize_axis(a.attrs.get_int("axis"), x.rank());
  int64_t k = a.attrs.get_int("k");
  bool largest = a.attrs.get_int("largest") != 0;
  int64_t outer, dim, inner;
  split_at_axis(x.shape(), axis, outer, dim, inner);
  KILN_CHECK(k <= dim, "topk k = ", k, " is larger than the dim (", dim, ")");
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const std::vector<int64_t> order = sorted_positions(x, o * dim * inner + i, inner, dim, largest);
      for (int64_t s = 0; s < k; ++s) {
        int64_t dst = (o * k + s) * inner + i;
        copy_element(x, (o * dim + order[size_t(s)]) * inner + i, values, dst);
        indices.set_i64(dst, order[size_t(s)]);
      }
    }
}

void ref_ConvTranspose2d(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  const HostTensor& w = a.in[1];
  HostTensor& out = a.out[0];
  const auto& s = a.attrs.get_ints("strides");
  const auto& p = a.attrs.get_ints("pads");
  const auto& d = a.attrs.get_ints("dilations");
  int64_t groups = a.attrs.get_int("groups");
  int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  int64_t Og = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
  int64_t O = out.shape()[1], OH = out.shape()[2], OW = out.shape()[3];
  int64_t Cg = C / groups;
  std::vector<double> acc(size_t(out.numel()), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      int64_t g = c / Cg;
      for (int64_t ih = 0; ih < H; ++ih)
        for (int64_t iw = 0; iw < W; ++iw) {
          double xv = x.get_f64(((n * C + c) * H + ih) * W + iw);
          for (int64_t oc = 0; oc < Og; ++oc)
            for (int64_t kh = 0; kh < KH; ++kh) {
              int64_t oh = ih * s[0] - p[0] + kh * d[0];
              if (oh < 0 || oh >= OH) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t ow = iw * s[1] - p[1] + kw * d[1];
                if (ow < 0 || ow >= OW) continue;
                int64_t o = g * Og + oc;
                acc[size_t(((n * O + o) * OH + oh) * OW + ow)] += xv * w.get_f64(((c * Og + oc) * KH + kh) * KW + kw);
              }
            }
        }
    }
  for (int64_t i = 0; i < out.numel(); ++i) {
    double v = acc[size_t(i)];
    if (a.in.size() > 2) v += a.in[2].get_f64((i / (OH * OW)) % O);
    out.set_f64(i, v);
  }
}

// Separable: resizes one axis at a time (what ONNX's reference does for n-linear and cubic).
void ref_Resize(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  ResizeParams p{a.attrs.get_string("mode"), a.attrs.get_string("coord_mode"), a.attrs.get_string("nearest_mode"),
                 a.attrs.get_float("cubic_coeff_a"), a.attrs.get_float("extrapolation_value"),
                 a.attrs.get_int("exclude_outside") != 0};
  std::vector<double> scales = a.attrs.get_floats("scales");
  std::vector<double> roi = a.attrs.get_floats("roi");
  int rank = x.rank();
  // An empty input has no value to sample (a symbolic dim bound to 0 under fixed `sizes`).
  for (int axis = 0; axis < rank && out.numel() > 0; ++axis)
    KILN_CHECK(x.shape()[size_t(axis)] > 0, "resize: input x of shape ", dims_to_string(x.shape()), " has no elements on dim ",
               axis, " but the output ", dims_to_string(out.shape()), " does: nothing to sample");
  std::vector<int64_t> shape = x.shape();
  std::vector<double> cur = x.to_doubles();
  std::vector<int64_t> idx;
  std::vector<double> wts;
  for (int axis = 0; axis < rank; ++axis) {
    int64_t in_len = shape[size_t(axis)], out_len = out.shape()[size_t(axis)];
    bool crop = p.coord == "tf_crop_and_resize";
    if (in_len == out_len && scales[size_t(axis)] == 1.0 && !crop) continue;
    int64_t outer, dim, inner;
    split_at_axis(shape, axis, outer, dim, inner);
    std::vector<double> next(size_t(outer * out_len * inner));
    double rs = crop ? roi[size_t(axis)] : 0, re = crop ? roi[size_t(axis + rank)] : 1;
    for (int64_t xo = 0; xo < out_len; ++xo) {
      double xs = source_coord(p, double(xo), in_len, out_len, scales[size_t(axis)], rs, re);
      bool outside = crop && (xs < 0 || xs > double(in_len - 1));
      if (!outside) resize_taps(p, xs, in_len, idx, wts);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          double v = p.extrapolation;
          if (!outside) {
            v = 0;
            for (size_t t = 0; t < idx.size(); ++t) v += wts[t] * cur[size_t((o * dim + idx[t]) * inner + i)];
          }
          next[size_t((o * out_len + xo) * inner + i)] = v;
        }
    }
    shape[size_t(axis)] = out_len;
    cur = std::move(next);
  }
  KILN_ASSERT(int64_t(cur.size()) == out.numel());
  bool integral = !is_float(out.dtype());
  for (int64_t i = 0; i < out.numel(); ++i) out.set_f64(i, integral ? std::nearbyint(cur[size_t(i)]) : cur[size_t(i)]);
}

}  // namespace kiln::interp
