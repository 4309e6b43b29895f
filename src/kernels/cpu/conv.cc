// Eager conv2d for f32 as tiles of an implicit GEMM: each OpenMP thread unfolds a tile of output
// positions (im2col) into its own buffer and multiplies it by the weights with single-threaded
// OpenBLAS sgemm; 1x1 stride-1 convs multiply the input directly; convs with one input channel per
// group (depthwise) run a direct loop. Why: conv dominates vision models and the reference loop is
// ~100x slower than a GEMM; the eager baseline and the compiled executable's conv library step
// both run this (ONNX 1-D convs arrive here lifted to 2-D).
#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/gemm.h"

namespace kiln::eager::detail {

namespace {

struct ConvGeometry {
  int64_t batch, channels, height, width;         // x [N, C, H, W]
  int64_t out_channels, group_channels, kh, kw;   // w [O, C/groups, kH, kW]
  int64_t out_h, out_w, groups, group_out;        // y [N, O, OH, OW]; group_out = O / groups
  int64_t stride_h, stride_w, pad_top, pad_left, dil_h, dil_w;
  int64_t reduction() const { return group_channels * kh * kw; }  // GEMM k
  int64_t positions() const { return out_h * out_w; }             // GEMM n per image
};

ConvGeometry geometry_of(const KernelArgs& args) {
  const auto& x = args.in[0].shape();
  const auto& w = args.in[1].shape();
  const auto& y = args.out[0].shape();
  const auto& s = args.attrs.get_ints("strides");
  const auto& p = args.attrs.get_ints("pads");
  const auto& d = args.attrs.get_ints("dilations");
  int64_t groups = args.attrs.get_int("groups");
  return ConvGeometry{x[0], x[1], x[2], x[3], w[0], w[1], w[2], w[3], y[2], y[3], groups, w[0] / groups,
                      s[0], s[1], p[0], p[1], d[0], d[1]};
}

// The output columns [lo, hi) whose input column o * stride + offset lies inside [0, extent).
void inside_range(int64_t outputs, int64_t stride, int64_t offset, int64_t extent, int64_t& lo, int64_t& hi) {
  lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  hi = extent - 1 - offset < 0 ? 0 : (extent - 1 - offset) / stride + 1;
  lo = std::min(lo, outputs);
  hi = std::clamp(hi, lo, outputs);
}

// Unfolds output positions [p0, p1) of one image's group into col[reduction][p1 - p0]: row
// (c, ky, kx) holds the input value each position multiplies by w[., c, ky, kx] (zero in padding).
void im2col_tile(const ConvGeometry& g, const float* image, int64_t p0, int64_t p1, float* col) {
  const int64_t tile = p1 - p0;
  for (int64_t c = 0; c < g.group_channels; ++c) {
    const float* plane = image + c * g.height * g.width;
    for (int64_t ky = 0; ky < g.kh; ++ky)
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        float* row = col + ((c * g.kh + ky) * g.kw + kx) * tile;
        const int64_t x_offset = kx * g.dil_w - g.pad_left;
        int64_t lo, hi;
        inside_range(g.out_w, g.stride_w, x_offset, g.width, lo, hi);
        for (int64_t p = p0; p < p1;) {
          const int64_t oy = p / g.out_w, ox_begin = p % g.out_w;
          const int64_t ox_end = std::min(g.out_w, ox_begin + (p1 - p));
          float* dst = row + (p - p0);  // dst[ox - ox_begin] is position (oy, ox)
          const int64_t iy = oy * g.stride_h - g.pad_top + ky * g.dil_h;
          if (iy < 0 || iy >= g.height) {
            std::fill(dst, dst + (ox_end - ox_begin), 0.0f);
          } else {
            const float* src = plane + iy * g.width;  // position ox reads src[ox * stride_w + x_offset]
            const int64_t a = std::clamp(lo, ox_begin, ox_end), b = std::clamp(hi, a, ox_end);
            std::fill(dst, dst + (a - ox_begin), 0.0f);
            if (g.stride_w == 1) std::copy(src + a + x_offset, src + b + x_offset, dst + (a - ox_begin));
            else
              for (int64_t ox = a; ox < b; ++ox) dst[ox - ox_begin] = src[ox * g.stride_w + x_offset];
            std::fill(dst + (b - ox_begin), dst + (ox_end - ox_begin), 0.0f);
          }
          p += ox_end - ox_begin;
        }
      }
  }
}

// One input channel per group (depthwise, or C = 1): out[o] = bias + sum over (ky, kx) of
// w[o, 0, ky, kx] * shifted input plane o / group_out, accumulated a kernel tap at a time so the
// inner loop is a unit-stride axpy when stride_w = 1.
void depthwise(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y) {
  const int64_t planes = g.batch * g.out_channels, plane_size = g.positions();
  parallel_ranges(planes, plane_size * g.kh * g.kw, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t n = plane / g.out_channels, o = plane % g.out_channels;
      const float* in = x + (n * g.channels + o / g.group_out) * g.height * g.width;
      const float* taps = w + o * g.kh * g.kw;
      float* out = y + plane * plane_size;
      std::fill(out, out + plane_size, bias ? bias[o] : 0.0f);
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const int64_t x_offset = kx * g.dil_w - g.pad_left;
        int64_t lo, hi;
        inside_range(g.out_w, g.stride_w, x_offset, g.width, lo, hi);
        for (int64_t ky = 0; ky < g.kh; ++ky) {
          const float tap = taps[ky * g.kw + kx];
          for (int64_t oy = 0; oy < g.out_h; ++oy) {
            const int64_t iy = oy * g.stride_h - g.pad_top + ky * g.dil_h;
            if (iy < 0 || iy >= g.height) continue;
            const float* src = in + iy * g.width;
            float* dst = out + oy * g.out_w;
            if (g.stride_w == 1) {
#pragma omp simd
              for (int64_t ox = lo; ox < hi; ++ox) dst[ox] += tap * src[ox + x_offset];
            } else {
              for (int64_t ox = lo; ox < hi; ++ox) dst[ox] += tap * src[ox * g.stride_w + x_offset];
            }
          }
        }
      }
    }
  });
}

// The GEMM path. Work items are (image, group, tile of output positions, block of output
// channels); each thread unfolds its tile (unless the conv is 1x1 stride 1 with no padding: the
// input plane is already the GEMM operand) and runs one single-threaded sgemm. Channel blocks
// only appear when there are fewer tiles than threads (deep layers with small images); they
// repeat the unfolding, which costs 1/group_out of the GEMM.
void implicit_gemm(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y) {
  use_single_threaded_blas();
  const int64_t k = g.reduction(), positions = g.positions();
  const bool direct = g.kh == 1 && g.kw == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_top == 0 &&
                      g.pad_left == 0 && g.out_h == g.height && g.out_w == g.width;
  // Tiles of about 512 KiB of unfolded input (L2-sized), at least 64 positions wide.
  int64_t tile = direct ? positions : std::max<int64_t>(64, (int64_t(128) << 10) / std::max<int64_t>(k, 1));
  tile = std::min(tile, positions);
  const int64_t tiles = (positions + tile - 1) / tile;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t outer = g.batch * g.groups * tiles;
  const int64_t work = outer * g.group_out * positions * k;
  int64_t blocks = 1;
  if (outer < threads && work >= kGemmParallelMacs)
    blocks = std::min<int64_t>((threads + outer - 1) / outer, std::max<int64_t>(1, g.group_out / 8));
  const int64_t items = outer * blocks;
  const bool parallel = threads > 1 && items > 1 && work >= kGemmParallelMacs;

#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t block = item % blocks, t = (item / blocks) % tiles;
    const int64_t group = (item / blocks / tiles) % g.groups, n = item / blocks / tiles / g.groups;
    const int64_t p0 = t * tile, p1 = std::min(positions, p0 + tile);
    const int64_t o0 = g.group_out * block / blocks, o1 = g.group_out * (block + 1) / blocks;
    if (o0 >= o1) continue;
    const float* image = x + (n * g.channels + group * g.group_channels) * g.height * g.width;
    const float* operand;
    int64_t ld;
    thread_local std::vector<float> col;
    if (direct) {
      operand = image + p0;
      ld = positions;
    } else {
      col.resize(size_t(k * (p1 - p0)));
      im2col_tile(g, image, p0, p1, col.data());
      operand = col.data();
      ld = p1 - p0;
    }
    const int64_t first_out = group * g.group_out + o0;
    float* out = y + (n * g.out_channels + first_out) * positions + p0;
    if (bias)
      for (int64_t o = 0; o < o1 - o0; ++o) std::fill(out + o * positions, out + o * positions + (p1 - p0), bias[first_out + o]);
    gemm_serial(o1 - o0, p1 - p0, k, w + first_out * k, k, operand, ld, bias ? 1.0f : 0.0f, out, positions);
  }
}

Ran run_conv(const KernelArgs& args) {
  if (args.op != Op::Conv2d || args.in[0].dtype() != DType::F32 || args.in[1].dtype() != DType::F32)
    return Ran::kNotHandled;
  if (args.attrs.get_string("layout") != "NCHW") return Ran::kNotHandled;  // channels-last: the reference
  const ConvGeometry g = geometry_of(args);
  if (args.out[0].numel() == 0) return Ran::kNative;
  if (g.reduction() * std::max(g.positions(), g.group_out) > INT32_MAX) return Ran::kNotHandled;  // BLAS dims
  const float* bias = args.in.size() > 2 ? args.in[2].data<float>() : nullptr;
  const float* x = args.in[0].data<float>();
  const float* w = args.in[1].data<float>();
  float* y = args.out[0].data<float>();
  if (g.group_channels == 1) {
    depthwise(g, x, w, bias, y);
    return Ran::kNative;
  }
  implicit_gemm(g, x, w, bias, y);
  return Ran::kOpenBlas;
}

bool conv_supports(Op op, DType dtype) { return op == Op::Conv2d && dtype == DType::F32; }

}  // namespace

const KernelFamily kConvFamily{conv_supports, run_conv};

}  // namespace kiln::eager::detail
