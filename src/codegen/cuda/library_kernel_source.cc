// The CUDA text of the library kernels (see library_kernels.h): templates over a dtype tag, and one
// extern "C" wrapper per kernel a graph needs. Each kernel's parameter layout is the plan_* function
// of the same op in library_kernels.cc. Semantics mirror the reference interpreter op for op
// (src/interp): NaN handling of max and argmax, topk's order, padding taps of conv, pool windows.
#include <string>

#include "codegen/cuda/library_kernels.h"
#include "kiln/error.h"

namespace kiln::codegen::cuda {

namespace {

const char* kLibraryTemplates = R"KILN(
// ---- library kernels (src/codegen/cuda/library_kernel_source.cc) ----
struct KilnLibArgs {
  const void* in[8];
  void* out[2];
  int64_t p[40];
  double f[2];
  int* status;
  void* scratch;
};
#define KILN_LIB_LOOP(t, n) \
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < (n); t += int64_t(gridDim.x) * blockDim.x)

// Dtype tags: S is the stored type, C the type values are computed in, A the accumulator of sums.
#define KILN_LIB_PLAIN(tag, s, c, a, is_fp) \
  struct tag { typedef s S; typedef c C; typedef a A; static const bool fp = is_fp; \
    __device__ static C ld(const S* p, int64_t i) { return C(p[i]); } \
    __device__ static void st(S* p, int64_t i, C v) { p[i] = S(v); } };
KILN_LIB_PLAIN(kl_f32, float, float, float, true)
KILN_LIB_PLAIN(kl_f64, double, double, double, true)
KILN_LIB_PLAIN(kl_i8, int8_t, int8_t, int8_t, false)
KILN_LIB_PLAIN(kl_i16, int16_t, int16_t, int16_t, false)
KILN_LIB_PLAIN(kl_i32, int32_t, int32_t, int32_t, false)
KILN_LIB_PLAIN(kl_i64, int64_t, int64_t, int64_t, false)
KILN_LIB_PLAIN(kl_u8, uint8_t, uint8_t, uint8_t, false)
KILN_LIB_PLAIN(kl_u16, uint16_t, uint16_t, uint16_t, false)
KILN_LIB_PLAIN(kl_u32, uint32_t, uint32_t, uint32_t, false)
KILN_LIB_PLAIN(kl_u64, uint64_t, uint64_t, uint64_t, false)
KILN_LIB_PLAIN(kl_b1, uint8_t, uint8_t, uint8_t, false)
KILN_LIB_PLAIN(kl_b2, uint16_t, uint16_t, uint16_t, false)
KILN_LIB_PLAIN(kl_b4, uint32_t, uint32_t, uint32_t, false)
KILN_LIB_PLAIN(kl_b8, uint64_t, uint64_t, uint64_t, false)
#undef KILN_LIB_PLAIN
struct kl_f16 { typedef uint16_t S; typedef float C; typedef float A; static const bool fp = true;
  __device__ static C ld(const S* p, int64_t i) { return kiln_h2f(p[i]); }
  __device__ static void st(S* p, int64_t i, C v) { p[i] = kiln_f2h(v); } };
struct kl_bf16 { typedef uint16_t S; typedef float C; typedef float A; static const bool fp = true;
  __device__ static C ld(const S* p, int64_t i) { return kiln_b2f(p[i]); }
  __device__ static void st(S* p, int64_t i, C v) { p[i] = kiln_f2b(v); } };

template <class T> __device__ inline typename T::C kl_lowest() {
  return T::fp ? typename T::C(-kstd::numeric_limits<float>::infinity()) : kstd::numeric_limits<typename T::C>::lowest();
}
// Integer sums wrap (as the reference's two's-complement adds); float sums are plain.
template <class T> __device__ inline typename T::A kl_add(typename T::A a, typename T::A b) {
  if (T::fp) return a + b;
  return typename T::A((unsigned long long)(a) + (unsigned long long)(b));
}
// An index of dtype I into a dim of n, wrapped once if negative; -1 (status set) when out of range.
template <class I> __device__ inline int64_t kl_index(const typename I::S* idx, int64_t at, int64_t n, int* status) {
  int64_t i = int64_t(idx[at]);
  if (i < 0) i += n;
  if (i < 0 || i >= n) {
    atomicOr(status, 2);
    return -1;
  }
  return i;
}

// gather: p = outer, n, count of indices, inner.
template <class T, class I> __device__ void kl_gather(const KilnLibArgs& a) {
  const typename T::S* x = (const typename T::S*)a.in[0];
  const typename I::S* idx = (const typename I::S*)a.in[1];
  typename T::S* y = (typename T::S*)a.out[0];
  const int64_t outer = a.p[0], n = a.p[1], count = a.p[2], inner = a.p[3], total = outer * count * inner;
  KILN_LIB_LOOP(t, total > count ? total : count) {
    if (t < count && total == 0) kl_index<I>(idx, t, n, a.status);  // checked even when nothing is copied
    if (t >= total) continue;
    const int64_t k = t % inner, r = t / inner, j = r % count, o = r / count;
    const int64_t i = kl_index<I>(idx, j, n, a.status);
    y[t] = i < 0 ? typename T::S(0) : x[(o * n + i) * inner + k];
  }
}

// gather_elements: p = rank, axis, numel, out dims p[3..10], x strides p[11..18], axis length p[19].
template <class T, class I> __device__ void kl_gather_elements(const KilnLibArgs& a) {
  const typename T::S* x = (const typename T::S*)a.in[0];
  const typename I::S* idx = (const typename I::S*)a.in[1];
  typename T::S* y = (typename T::S*)a.out[0];
  const int rank = int(a.p[0]), axis = int(a.p[1]);
  KILN_LIB_LOOP(t, a.p[2]) {
    int64_t rest = t, offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t c = rest % a.p[3 + d];
      rest /= a.p[3 + d];
      if (d != axis) offset += c * a.p[11 + d];
    }
    const int64_t i = kl_index<I>(idx, t, a.p[19], a.status);
    y[t] = i < 0 ? typename T::S(0) : x[offset + i * a.p[11 + axis]];
  }
}

// concat: p = outer, out_row, operands, chunk offset, chunk row, row lengths p[5..12], offsets p[13..20].
template <class T> __device__ void kl_concat(const KilnLibArgs& a) {
  typename T::S* y = (typename T::S*)a.out[0];
  const int64_t out_row = a.p[1], operands = a.p[2], chunk_offset = a.p[3], chunk_row = a.p[4];
  KILN_LIB_LOOP(t, a.p[0] * chunk_row) {
    const int64_t r = t / chunk_row, c = t % chunk_row;
    int j = 0;
    while (j + 1 < operands && c >= a.p[13 + j + 1]) ++j;
    const typename T::S* x = (const typename T::S*)a.in[j];
    y[r * out_row + chunk_offset + c] = x[r * a.p[5 + j] + (c - a.p[13 + j])];
  }
}

// pad: p = rank, numel, out dims p[2..9], x dims p[10..17], begin pads p[18..25], mode, fill bits.
template <class T> __device__ void kl_pad(const KilnLibArgs& a) {
  const typename T::S* x = (const typename T::S*)a.in[0];
  typename T::S* y = (typename T::S*)a.out[0];
  const int rank = int(a.p[0]);
  const int64_t mode = a.p[26];
  const typename T::S fill = typename T::S((unsigned long long)(a.p[27]));
  KILN_LIB_LOOP(t, a.p[1]) {
    int64_t rest = t, offset = 0, stride = 1;
    bool inside = true;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t dim = a.p[10 + d];
      int64_t src = rest % a.p[2 + d] - a.p[18 + d];
      rest /= a.p[2 + d];
      if (src < 0 || src >= dim) {
        if (mode == 1) {
          src = src < 0 ? 0 : dim - 1;
        } else if (mode == 2) {
          if (src < 0) src = -src;
          if (src >= dim) src = 2 * (dim - 1) - src;
        } else {
          inside = false;
        }
      }
      offset += src * stride;
      stride *= dim;
    }
    y[t] = inside ? x[offset] : fill;
  }
}

// tril / triu: p = numel, rows, cols, k, keep_lower.
template <class T> __device__ void kl_triangle(const KilnLibArgs& a) {
  const typename T::S* x = (const typename T::S*)a.in[0];
  typename T::S* y = (typename T::S*)a.out[0];
  const int64_t rows = a.p[1], cols = a.p[2], k = a.p[3];
  KILN_LIB_LOOP(t, a.p[0]) {
    const int64_t col = t % cols, row = (t / cols) % rows;
    const bool keep = a.p[4] ? col - row <= k : col - row >= k;
    y[t] = keep ? x[t] : typename T::S(0);
  }
}

// argmax / argmin: p = outer, len, inner, want_max. The first extreme wins; a NaN is the extreme.
template <class T> __device__ void kl_argreduce(const KilnLibArgs& a) {
  const typename T::S* x = (const typename T::S*)a.in[0];
  int64_t* y = (int64_t*)a.out[0];
  const int64_t len = a.p[1], inner = a.p[2];
  const bool want_max = a.p[3] != 0;
  KILN_LIB_LOOP(t, a.p[0] * inner) {
    const typename T::S* row = x + (t / inner) * len * inner + t % inner;
    typename T::C best = T::ld(row, 0);
    int64_t at = 0;
    for (int64_t k = 1; k < len && best == best; ++k) {
      const typename T::C v = T::ld(row, k * inner);
      if (v != v || (want_max ? v > best : v < best)) best = v, at = k;
    }
    y[t] = at;
  }
}

// cumsum: p = outer, len, inner, exclusive, reverse. Floats add in double, as the reference.
template <class T> __device__ void kl_cumsum(const KilnLibArgs& a) {
  const typename T::S* x = (const typename T::S*)a.in[0];
  typename T::S* y = (typename T::S*)a.out[0];
  const int64_t len = a.p[1], inner = a.p[2];
  const bool exclusive = a.p[3] != 0, reverse = a.p[4] != 0;
  KILN_LIB_LOOP(t, a.p[0] * inner) {
    const int64_t base = (t / inner) * len * inner + t % inner;
    double fsum = 0;
    typename T::A isum = 0;
    for (int64_t s = 0; s < len; ++s) {
      const int64_t at = base + (reverse ? len - 1 - s : s) * inner;
      const typename T::C v = T::ld(x, at);
      if (exclusive) T::st(y, at, T::fp ? typename T::C(fsum) : typename T::C(isum));
      if (T::fp) fsum += double(v);
      else isum = kl_add<T>(isum, typename T::A(v));
      if (!exclusive) T::st(y, at, T::fp ? typename T::C(fsum) : typename T::C(isum));
    }
  }
}

// Whether (va, ia) comes before (vb, ib) in topk's order: larger (smaller) first, NaN the largest,
// ties by lower index.
template <class C> __device__ inline bool kl_before(C va, int64_t ia, C vb, int64_t ib, bool largest) {
  const bool na = va != va, nb = vb != vb;
  if (na || nb) return na && nb ? ia < ib : (largest ? na : nb);
  if (va != vb) return largest ? va > vb : va < vb;
  return ia < ib;
}

// topk: p = outer, len, inner, k, largest. Each line picks its k first elements in order, one
// after another (k passes over the line): correct for any k; the fast top-k is its own issue.
template <class T> __device__ void kl_topk(const KilnLibArgs& a) {
  const typename T::S* x = (const typename T::S*)a.in[0];
  typename T::S* values = (typename T::S*)a.out[0];
  int64_t* indices = (int64_t*)a.out[1];
  const int64_t len = a.p[1], inner = a.p[2], k = a.p[3];
  const bool largest = a.p[4] != 0;
  KILN_LIB_LOOP(t, a.p[0] * inner) {
    const int64_t o = t / inner, in = t % inner;
    const typename T::S* row = x + o * len * inner + in;
    typename T::C prev_v = 0;
    int64_t prev_i = -1;
    for (int64_t s = 0; s < k; ++s) {
      int64_t best = -1;
      typename T::C best_v = 0;
      for (int64_t j = 0; j < len; ++j) {
        const typename T::C v = T::ld(row, j * inner);
        if (prev_i >= 0 && !kl_before(prev_v, prev_i, v, j, largest)) continue;  // already taken
        if (best < 0 || kl_before(v, j, best_v, best, largest)) best = j, best_v = v;
      }
      const int64_t dst = (o * k + s) * inner + in;
      values[dst] = row[best * inner];
      indices[dst] = best;
      prev_v = best_v, prev_i = best;
    }
  }
}

// max_pool2d: p = NC, H, W, OH, OW, kh, kw, sh, sw, pad top, left, bottom, right, dh, dw. Padding is
// never a candidate; a NaN in the window is the result.
template <class T> __device__ void kl_maxpool(const KilnLibArgs& a) {
  const typename T::S* x = (const typename T::S*)a.in[0];
  typename T::S* y = (typename T::S*)a.out[0];
  const int64_t H = a.p[1], W = a.p[2], OH = a.p[3], OW = a.p[4];
  KILN_LIB_LOOP(t, a.p[0] * OH * OW) {
    const int64_t ox = t % OW, oy = (t / OW) % OH, nc = t / (OW * OH);
    typename T::C best = kl_lowest<T>();
    for (int64_t ky = 0; ky < a.p[5]; ++ky) {
      const int64_t iy = oy * a.p[7] - a.p[9] + ky * a.p[13];
      if (iy < 0 || iy >= H) continue;
      for (int64_t kx = 0; kx < a.p[6]; ++kx) {
        const int64_t ix = ox * a.p[8] - a.p[10] + kx * a.p[14];
        if (ix < 0 || ix >= W) continue;
        const typename T::C v = T::ld(x, (nc * H + iy) * W + ix);
        if ((v != v || v > best) && best == best) best = v;
      }
    }
    T::st(y, t, best);
  }
}

// avg_pool2d: the same p, count_include_pad at p[15]: the divisor counts the window's positions
// inside the input, or inside the padded input (a ceil_mode window past it is clipped).
template <class T> __device__ void kl_avgpool(const KilnLibArgs& a) {
  const typename T::S* x = (const typename T::S*)a.in[0];
  typename T::S* y = (typename T::S*)a.out[0];
  const int64_t H = a.p[1], W = a.p[2], OH = a.p[3], OW = a.p[4], pt = a.p[9], pl = a.p[10];
  KILN_LIB_LOOP(t, a.p[0] * OH * OW) {
    const int64_t ox = t % OW, oy = (t / OW) % OH, nc = t / (OW * OH);
    typename T::A sum = 0;
    int64_t inside_input = 0, inside_padded = 0;
    for (int64_t ky = 0; ky < a.p[5]; ++ky) {
      const int64_t iy = oy * a.p[7] - pt + ky;
      if (iy < -pt || iy >= H + a.p[11]) continue;
      for (int64_t kx = 0; kx < a.p[6]; ++kx) {
        const int64_t ix = ox * a.p[8] - pl + kx;
        if (ix < -pl || ix >= W + a.p[12]) continue;
        ++inside_padded;
        if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
        ++inside_input;
        sum += typename T::A(T::ld(x, (nc * H + iy) * W + ix));
      }
    }
    T::st(y, t, typename T::C(sum / typename T::A(a.p[15] ? inside_padded : inside_input)));
  }
}

// global_avg_pool: p = NC, spatial. One thread per (n, c).
template <class T> __device__ void kl_global_avgpool(const KilnLibArgs& a) {
  const typename T::S* x = (const typename T::S*)a.in[0];
  typename T::S* y = (typename T::S*)a.out[0];
  const int64_t spatial = a.p[1];
  KILN_LIB_LOOP(t, a.p[0]) {
    typename T::A sum = 0;
    for (int64_t s = 0; s < spatial; ++s) sum += typename T::A(T::ld(x, t * spatial + s));
    T::st(y, t, typename T::C(sum / typename T::A(spatial)));
  }
}

// conv2d: p = N, C, H, W, O, Cg, KH, KW, OH, OW, sh, sw, pad top, pad left, dh, dw, groups,
// has_bias. One thread per output. A tap over padding adds 0 * w: NaN for a non-finite weight.
template <class T> __device__ void kl_conv2d(const KilnLibArgs& a) {
  const typename T::S* x = (const typename T::S*)a.in[0];
  const typename T::S* w = (const typename T::S*)a.in[1];
  const typename T::S* bias = (const typename T::S*)a.in[2];
  typename T::S* y = (typename T::S*)a.out[0];
  const int64_t C = a.p[1], H = a.p[2], W = a.p[3], O = a.p[4], Cg = a.p[5], KH = a.p[6], KW = a.p[7];
  const int64_t OH = a.p[8], OW = a.p[9], per_group = O / a.p[16];
  KILN_LIB_LOOP(t, a.p[0] * O * OH * OW) {
    const int64_t ox = t % OW, oy = (t / OW) % OH, o = (t / (OW * OH)) % O, n = t / (OW * OH * O);
    const int64_t c0 = (o / per_group) * Cg;
    typename T::A acc = a.p[17] ? typename T::A(T::ld(bias, o)) : typename T::A(0);
    for (int64_t cg = 0; cg < Cg; ++cg) {
      const typename T::S* xc = x + ((n * C + c0 + cg) * H) * W;
      const typename T::S* wc = w + (o * Cg + cg) * KH * KW;
      for (int64_t ky = 0; ky < KH; ++ky) {
        const int64_t iy = oy * a.p[10] - a.p[12] + ky * a.p[14];
        for (int64_t kx = 0; kx < KW; ++kx) {
          const int64_t ix = ox * a.p[11] - a.p[13] + kx * a.p[15];
          const typename T::A wv = typename T::A(T::ld(wc, ky * KW + kx));
          if (iy < 0 || iy >= H || ix < 0 || ix >= W) {
            if (wv - wv != 0) acc += 0 * wv;
            continue;
          }
          acc += typename T::A(T::ld(xc, iy * W + ix)) * wv;
        }
      }
    }
    T::st(y, t, typename T::C(acc));
  }
}

// dwconv2d (depthwise: Cg = 1, O = C = groups): conv2d's p[0..17], then the tile plan_conv chose:
// p[18] output rows per band (a multiple of KILN_DW_ROWS; 0: no tile fits, see below), p[19] planes per
// block, p[20] the staged row width, p[21] the staged rows per plane, p[22] bands per plane.
// A block stages a band of its planes' input rows, zero-padded, into shared memory (in the
// accumulator type), then each thread computes KILN_DW_ROWS outputs of one column: with unit stride and
// dilation it slides a window of KILN_DW_ROWS + KH - 1 staged values down the column, so each value is
// read once per kx and not once per tap (register tiling). Consecutive threads take consecutive
// columns (no bank conflicts). Sums start from the bias; the sliding window adds taps column by
// column (kx outer: rounding may differ from conv2d's row-major order); a tap over padding adds
// 0 * w (0, or NaN for a non-finite weight, as conv2d). Without a tile (planes too wide for shared
// memory), a block takes one plane at a time, its threads the plane's outputs, inputs read from L1.
// One kx of a column of KILN_DW_ROWS outputs: acc[r] += v[r + ky] * w[ky * w_step] over ky, the
// window v of KILN_DW_ROWS + KH - 1 inputs in registers (both depthwise kernels slide it).
template <class A, int KH> __device__ inline void kl_dwconv2d_window(const A* v, const A* w, int w_step, A* acc) {
#pragma unroll
  for (int ky = 0; ky < KH; ++ky) {
    const A wv = w[ky * w_step];
#pragma unroll
    for (int r = 0; r < KILN_DW_ROWS; ++r) acc[r] += v[r + ky] * wv;
  }
}
template <class T, int KH> __device__ void kl_dwconv2d_column(const typename T::A* col, int Wp, int KW, int dw,
                                                              const typename T::A* wq, typename T::A* acc) {
  typedef typename T::A A;
  for (int kx = 0; kx < KW; ++kx) {
    A v[KILN_DW_ROWS + KH - 1];
#pragma unroll
    for (int j = 0; j < KILN_DW_ROWS + KH - 1; ++j) v[j] = col[j * Wp + kx * dw];
    kl_dwconv2d_window<typename T::A, KH>(v, wq + kx, KW, acc);
  }
}
template <class T> __device__ void kl_dwconv2d(const KilnLibArgs& a) {
  typedef typename T::A A;
  const typename T::S* x = (const typename T::S*)a.in[0];
  const typename T::S* w = (const typename T::S*)a.in[1];
  const typename T::S* bias = (const typename T::S*)a.in[2];
  typename T::S* y = (typename T::S*)a.out[0];
  const int64_t C = a.p[1], NC = a.p[0] * a.p[1];
  const int H = int(a.p[2]), W = int(a.p[3]), KH = int(a.p[6]), KW = int(a.p[7]), OH = int(a.p[8]), OW = int(a.p[9]);
  const int sh = int(a.p[10]), sw = int(a.p[11]), pt = int(a.p[12]), pl = int(a.p[13]), dh = int(a.p[14]), dw = int(a.p[15]);
  const int TH = int(a.p[18]);
  if (TH == 0) {  // untiled
    const int points = OH * OW;
    for (int64_t plane = blockIdx.x; plane < NC; plane += gridDim.x) {
      const int64_t c = plane % C;
      const typename T::S* xc = x + plane * int64_t(H) * W;
      const typename T::S* wc = w + c * KH * KW;
      typename T::S* yc = y + plane * points;
      const A b0 = a.p[17] ? A(T::ld(bias, c)) : A(0);
      for (int p = int(threadIdx.x); p < points; p += int(blockDim.x)) {
        const int oy = p / OW, ox = p - oy * OW;
        A acc = b0;
        for (int ky = 0; ky < KH; ++ky) {
          const int iy = oy * sh - pt + ky * dh;
          for (int kx = 0; kx < KW; ++kx) {
            const int ix = ox * sw - pl + kx * dw;
            const A wv = A(T::ld(wc, ky * KW + kx));
            if (iy >= 0 && iy < H && ix >= 0 && ix < W) acc += A(T::ld(xc, iy * W + ix)) * wv;
            else if (wv - wv != 0) acc += 0 * wv;
          }
        }
        T::st(yc, p, typename T::C(acc));
      }
    }
    return;
  }
  __shared__ __align__(16) unsigned char smem[KILN_DW_SMEM_BYTES];
  A* staged = (A*)smem;
  const int P = int(a.p[19]), Wp = int(a.p[20]), rows = int(a.p[21]), bands = int(a.p[22]), taps = KH * KW;
  const int per_plane = rows * Wp;
  A* weights = staged + P * per_plane;
  const int strips = TH / KILN_DW_ROWS;
  const int64_t tiles = (NC + P - 1) / P * bands;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t plane0 = tile / bands * P;
    const int band = int(tile % bands);
    const int planes = int(NC - plane0 < P ? NC - plane0 : P);
    const int oy0 = band * TH, iy0 = oy0 * sh - pt;
    __syncthreads();  // the previous tile's reads are done
    for (int e = int(threadIdx.x); e < planes * per_plane; e += int(blockDim.x)) {
      const int q = e / per_plane, r = e - q * per_plane, row = r / Wp, col = r - row * Wp;
      const int iy = iy0 + row, ix = col - pl;
      staged[e] = iy >= 0 && iy < H && ix >= 0 && ix < W ? A(T::ld(x, (plane0 + q) * H * W + int64_t(iy) * W + ix)) : A(0);
    }
    for (int e = int(threadIdx.x); e < planes * taps; e += int(blockDim.x)) {
      const int q = e / taps;
      weights[e] = A(T::ld(w, (plane0 + q) % C * taps + (e - q * taps)));
    }
    __syncthreads();
    const int items = planes * strips * OW;
    for (int it = int(threadIdx.x); it < items; it += int(blockDim.x)) {
      const int q = it / (strips * OW), r = it - q * strips * OW, strip = r / OW, ox = r - strip * OW;
      const int64_t plane = plane0 + q;
      const A b0 = a.p[17] ? A(T::ld(bias, plane % C)) : A(0);
      A acc[KILN_DW_ROWS];
#pragma unroll
      for (int k = 0; k < KILN_DW_ROWS; ++k) acc[k] = b0;
      const A* col = staged + q * per_plane + strip * KILN_DW_ROWS * sh * Wp + ox * sw;
      const A* wq = weights + q * taps;
      if (sh == 1 && dh == 1 && KH == 7) kl_dwconv2d_column<T, 7>(col, Wp, KW, dw, wq, acc);
      else if (sh == 1 && dh == 1 && KH == 5) kl_dwconv2d_column<T, 5>(col, Wp, KW, dw, wq, acc);
      else if (sh == 1 && dh == 1 && KH == 3) kl_dwconv2d_column<T, 3>(col, Wp, KW, dw, wq, acc);
      else
        for (int ky = 0; ky < KH; ++ky)
          for (int kx = 0; kx < KW; ++kx) {
            const A wv = wq[ky * KW + kx];
#pragma unroll
            for (int k = 0; k < KILN_DW_ROWS; ++k) acc[k] += col[(k * sh + ky * dh) * Wp + kx * dw] * wv;
          }
      typename T::S* yo = y + plane * OH * OW + ox;
#pragma unroll
      for (int k = 0; k < KILN_DW_ROWS; ++k) {
        const int oy = oy0 + strip * KILN_DW_ROWS + k;
        if (oy < OH) T::st(yo, int64_t(oy) * OW, typename T::C(acc[k]));
      }
    }
  }
}

// dwconv2d_nhwc (depthwise, layout "NHWC": x [N, H, W, C], y [N, OH, OW, C]): conv2d's p[0..17].
// A block takes a tile (32 channels, one image, a strip of KILN_DW_ROWS output rows), its lanes
// the channels (coalesced loads and stores), its warps the strip's columns; the tile's weights
// are staged transposed ([tap][channel]) in shared memory. Each thread slides a window of
// KILN_DW_ROWS + KH - 1 inputs down its column as dwconv2d does (kx outer), reading through L1,
// which the block's other warps share. Padding reads 0 (a tap over it adds 0 * w).
template <class T, int KH> __device__ void kl_dwconv2d_nhwc_column(const typename T::S* x, int64_t row0, int iy0, int H,
                                                                   int ix0, int W, int C, int KW, int dw,
                                                                   const typename T::A* wt, typename T::A* acc) {
  typedef typename T::A A;
  for (int kx = 0; kx < KW; ++kx) {
    const int ix = ix0 + kx * dw;
    if (ix < 0 || ix >= W) {  // the whole column is padding: 0 * w
#pragma unroll
      for (int ky = 0; ky < KH; ++ky) {
        const A zero = A(0) * wt[(ky * KW + kx) * 32];
#pragma unroll
        for (int r = 0; r < KILN_DW_ROWS; ++r) acc[r] += zero;
      }
      continue;
    }
    A v[KILN_DW_ROWS + KH - 1];
#pragma unroll
    for (int j = 0; j < KILN_DW_ROWS + KH - 1; ++j) {
      const int iy = iy0 + j;
      v[j] = iy >= 0 && iy < H ? A(T::ld(x, (row0 + iy) * W * int64_t(C) + int64_t(ix) * C)) : A(0);
    }
    kl_dwconv2d_window<typename T::A, KH>(v, wt + kx * 32, KW * 32, acc);
  }
}
template <class T> __device__ void kl_dwconv2d_nhwc(const KilnLibArgs& a) {
  typedef typename T::A A;
  const typename T::S* w = (const typename T::S*)a.in[1];
  const typename T::S* bias = (const typename T::S*)a.in[2];
  typename T::S* y = (typename T::S*)a.out[0];
  const int C = int(a.p[1]);
  const int H = int(a.p[2]), W = int(a.p[3]), KH = int(a.p[6]), KW = int(a.p[7]), OH = int(a.p[8]), OW = int(a.p[9]);
  const int sh = int(a.p[10]), sw = int(a.p[11]), pt = int(a.p[12]), pl = int(a.p[13]), dh = int(a.p[14]), dw = int(a.p[15]);
  const int taps = KH * KW, chunks = (C + 31) / 32, strips = (OH + KILN_DW_ROWS - 1) / KILN_DW_ROWS;
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5, warps = int(blockDim.x) >> 5;
  __shared__ A wt_all[KILN_DWN_MAX_TAPS * 32];
  const int64_t tiles = int64_t(chunks) * strips * a.p[0];
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int chunk = int(tile % chunks), strip = int(tile / chunks % strips);
    const int64_t n = tile / chunks / strips;
    __syncthreads();  // the previous tile's weights are no longer read
    for (int e = int(threadIdx.x); e < taps * 32; e += int(blockDim.x)) {
      const int c = chunk * 32 + (e & 31);
      wt_all[e] = c < C ? A(T::ld(w, int64_t(c) * taps + (e >> 5))) : A(0);
    }
    __syncthreads();
    const int c = chunk * 32 + lane;
    if (c >= C) continue;
    const typename T::S* x = (const typename T::S*)a.in[0] + c;
    const A* wt = wt_all + lane;
    const A b0 = a.p[17] ? A(T::ld(bias, c)) : A(0);
    const int oy0 = strip * KILN_DW_ROWS;
    for (int ox = warp; ox < OW; ox += warps) {
      A acc[KILN_DW_ROWS];
#pragma unroll
      for (int r = 0; r < KILN_DW_ROWS; ++r) acc[r] = b0;
      const int64_t row0 = n * H;
      const int ix0 = ox * sw - pl, iy0 = oy0 * sh - pt;
      if (sh == 1 && dh == 1 && KH == 7) kl_dwconv2d_nhwc_column<T, 7>(x, row0, iy0, H, ix0, W, C, KW, dw, wt, acc);
      else if (sh == 1 && dh == 1 && KH == 5) kl_dwconv2d_nhwc_column<T, 5>(x, row0, iy0, H, ix0, W, C, KW, dw, wt, acc);
      else if (sh == 1 && dh == 1 && KH == 3) kl_dwconv2d_nhwc_column<T, 3>(x, row0, iy0, H, ix0, W, C, KW, dw, wt, acc);
      else
        for (int ky = 0; ky < KH; ++ky)
          for (int kx = 0; kx < KW; ++kx) {
            const A wv = wt[(ky * KW + kx) * 32];
            const int ix = ix0 + kx * dw;
#pragma unroll
            for (int r = 0; r < KILN_DW_ROWS; ++r) {
              const int iy = (oy0 + r) * sh - pt + ky * dh;
              const bool inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
              acc[r] += (inside ? A(T::ld(x, ((row0 + iy) * W + ix) * int64_t(C))) : A(0)) * wv;
            }
          }
#pragma unroll
      for (int r = 0; r < KILN_DW_ROWS; ++r)
        if (oy0 + r < OH) T::st(y, ((n * OH + oy0 + r) * OW + ox) * int64_t(C) + c, typename T::C(acc[r]));
    }
  }
}

// im2col: p = N, C, H, W, KH, KW, OH, OW, sh, sw, pad top, pad left, dh, dw. A block takes one
// row of the [N, C*KH*KW, OH*OW] columns at a time (one image, one window element), its threads
// consecutive output positions: 32-bit index math (a position needs one division; a per-element
// 64-bit decomposition cost ResNet-50's stem 560 us on an H100) and coalesced stores. Zeros (all
// bits clear: +0 in every float type) over padding.
template <class T> __device__ void kl_im2col(const KilnLibArgs& a) {
  const typename T::S* x = (const typename T::S*)a.in[0];
  typename T::S* y = (typename T::S*)a.out[0];
  const int64_t C = a.p[1], KH = a.p[4], KW = a.p[5];
  const int H = int(a.p[2]), W = int(a.p[3]), OW = int(a.p[7]);
  const int points = int(a.p[6] * a.p[7]);
  const int sh = int(a.p[8]), sw = int(a.p[9]), pt = int(a.p[10]), pl = int(a.p[11]), dh = int(a.p[12]), dw = int(a.p[13]);
  const int64_t rows = C * KH * KW;
  for (int64_t line = blockIdx.x; line < a.p[0] * rows; line += gridDim.x) {
    const int64_t row = line % rows, n = line / rows;
    const int kx = int(row % KW), ky = int(row / KW % KH);
    const typename T::S* plane = x + (n * C + row / (KW * KH)) * int64_t(H) * W;
    typename T::S* out = y + line * points;
    for (int p = int(threadIdx.x); p < points; p += int(blockDim.x)) {
      const int oy = p / OW, ox = p - oy * OW;
      const int iy = oy * sh - pt + ky * dh, ix = ox * sw - pl + kx * dw;
      out[p] = iy >= 0 && iy < H && ix >= 0 && ix < W ? plane[iy * W + ix] : typename T::S(0);
    }
  }
}

// conv_transpose2d: the same p with Og (w's dim 1) at p[5]; w is [C, Og, KH, KW]. Each output sums
// the inputs whose taps land on it: oh = ih * sh - pad + kh * dh.
template <class T> __device__ void kl_conv_transpose2d(const KilnLibArgs& a) {
  const typename T::S* x = (const typename T::S*)a.in[0];
  const typename T::S* w = (const typename T::S*)a.in[1];
  const typename T::S* bias = (const typename T::S*)a.in[2];
  typename T::S* y = (typename T::S*)a.out[0];
  const int64_t C = a.p[1], H = a.p[2], W = a.p[3], O = a.p[4], Og = a.p[5], KH = a.p[6], KW = a.p[7];
  const int64_t OH = a.p[8], OW = a.p[9], sh = a.p[10], sw = a.p[11], Cg = C / a.p[16];
  KILN_LIB_LOOP(t, a.p[0] * O * OH * OW) {
    const int64_t ox = t % OW, oy = (t / OW) % OH, o = (t / (OW * OH)) % O, n = t / (OW * OH * O);
    const int64_t g = o / Og, oc = o % Og;
    typename T::A acc = 0;
    for (int64_t c = g * Cg; c < (g + 1) * Cg; ++c)
      for (int64_t kh = 0; kh < KH; ++kh) {
        const int64_t ny = oy + a.p[12] - kh * a.p[14];
        if (ny < 0 || ny % sh != 0 || ny / sh >= H) continue;
        for (int64_t kw = 0; kw < KW; ++kw) {
          const int64_t nx = ox + a.p[13] - kw * a.p[15];
          if (nx < 0 || nx % sw != 0 || nx / sw >= W) continue;
          acc += typename T::A(T::ld(x, ((n * C + c) * H + ny / sh) * W + nx / sw)) *
                 typename T::A(T::ld(w, ((c * Og + oc) * KH + kh) * KW + kw));
        }
      }
    if (a.p[17]) acc += typename T::A(T::ld(bias, o));
    T::st(y, t, typename T::C(acc));
  }
}

// det: p = batch, n. LU with partial pivoting in double on a scratch copy of each matrix.
template <class T> __device__ void kl_det(const KilnLibArgs& a) {
  const typename T::S* x = (const typename T::S*)a.in[0];
  typename T::S* y = (typename T::S*)a.out[0];
  const int64_t n = a.p[1];
  KILN_LIB_LOOP(b, a.p[0]) {
    double* m = (double*)a.scratch + b * n * n;
    for (int64_t i = 0; i < n * n; ++i) m[i] = double(T::ld(x, b * n * n + i));
    double det = 1;
    for (int64_t col = 0; col < n; ++col) {
      int64_t pivot = col;
      for (int64_t r = col + 1; r < n; ++r)
        if (::fabs(m[r * n + col]) > ::fabs(m[pivot * n + col])) pivot = r;
      if (m[pivot * n + col] == 0) {
        det = 0;
        break;
      }
      if (pivot != col) {
        for (int64_t k = 0; k < n; ++k) {
          const double s = m[pivot * n + k];
          m[pivot * n + k] = m[col * n + k];
          m[col * n + k] = s;
        }
        det = -det;
      }
      const double p = m[col * n + col];
      det *= p;
      for (int64_t r = col + 1; r < n; ++r) {
        const double f = m[r * n + col] / p;
        for (int64_t k = col; k < n; ++k) m[r * n + k] -= f * m[col * n + k];
      }
    }
    T::st(y, b, typename T::C(det));
  }
}

// resize: p = rank, numel, taps, out dims p[3..10], x dims p[11..18], tap table offsets p[19..26]
// (-1: not resized); the table (in scratch) holds [outside, index, weight, index, weight...] per
// resized axis and output position. Sums over every combination of the resized axes' taps, one
// resized axis at a time.
template <class T> __device__ void kl_resize(const KilnLibArgs& a) {
  const typename T::S* x = (const typename T::S*)a.in[0];
  typename T::S* y = (typename T::S*)a.out[0];
  const double* table = (const double*)a.scratch;
  const int rank = int(a.p[0]);
  const int64_t taps = a.p[2], row = 1 + 2 * taps;
  KILN_LIB_LOOP(t, a.p[1]) {
    int64_t coord[8], src[8];
    const double* rows[8];
    int changed[8], k = 0;
    bool outside = false;
    int64_t rest = t;
    for (int d = rank - 1; d >= 0; --d) {
      coord[d] = rest % a.p[3 + d];
      rest /= a.p[3 + d];
    }
    for (int d = 0; d < rank; ++d) {
      if (a.p[19 + d] < 0) continue;
      rows[k] = table + a.p[19 + d] + coord[d] * row;
      outside |= rows[k][0] != 0;
      changed[k++] = d;
    }
    double v = a.f[0];
    if (!outside) {
      // Axis by axis as the reference sums (the first resized axis innermost, each partial sum in
      // double, no FMA contraction): an integer result half-way between two values rounds alike.
      double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int64_t combos = 1;
      for (int j = 0; j < k; ++j) combos *= taps;
      for (int64_t c = 0; c < combos; ++c) {
        int64_t pick = c;
        int digit[8];
        for (int d = 0; d < rank; ++d) src[d] = coord[d];
        for (int j = 0; j < k; ++j) {
          digit[j] = int(pick % taps);
          pick /= taps;
          src[changed[j]] = int64_t(rows[j][1 + 2 * digit[j]]);
        }
        int64_t offset = 0;
        for (int d = 0; d < rank; ++d) offset = offset * a.p[11 + d] + src[d];
        const double xv = double(T::ld(x, offset));
        if (k == 0) {
          acc[0] = xv;
          continue;
        }
        acc[0] = __dadd_rn(acc[0], __dmul_rn(rows[0][2 + 2 * digit[0]], xv));
        for (int j = 0; j + 1 < k && digit[j] == taps - 1; ++j) {  // level j's sum is complete
          acc[j + 1] = __dadd_rn(acc[j + 1], __dmul_rn(rows[j + 1][2 + 2 * digit[j + 1]], acc[j]));
          acc[j] = 0;
        }
      }
      v = acc[k > 0 ? k - 1 : 0];
    }
    if (!T::fp) v = ::rint(v);
    T::st(y, t, typename T::C(v));
  }
}
)KILN";

// "kiln_lib_gather_b4_i64" -> "kl_gather<kl_b4, kl_i64>".
std::string instantiation(const std::string& name) {
  const std::string prefix = "kiln_lib_";
  KILN_CHECK(name.rfind(prefix, 0) == 0, "not a library kernel: ", name);
  for (const std::string& base : library_kernel_bases()) {
    const std::string head = prefix + base + "_";
    if (name.rfind(head, 0) != 0) continue;
    std::string rest = name.substr(head.size()), args;
    size_t at = 0;
    while (at <= rest.size()) {
      size_t end = rest.find('_', at);
      if (end == std::string::npos) end = rest.size();
      args += (args.empty() ? "kl_" : ", kl_") + rest.substr(at, end - at);
      at = end + 1;
    }
    return str("kl_", base, "<", args, ">");
  }
  throw Error(str("no library kernel template for ", name));
}

}  // namespace

std::string library_kernels_source(const std::set<std::string>& names) {
  if (names.empty()) return "";
  // dwconv2d's tile constants, as plan_depthwise_tile sizes its tiles.
  std::string text = str("#define KILN_DW_ROWS ", kDepthwiseRows, "\n#define KILN_DW_SMEM_BYTES ", kDepthwiseSharedBytes,
                         "\n#define KILN_DWN_MAX_TAPS ", kDepthwiseNhwcMaxTaps, "\n", kLibraryTemplates);
  for (const std::string& name : names)
    text += str("extern \"C\" __global__ void __launch_bounds__(256) ", name, "(const KilnLibArgs a) { ",
                instantiation(name), "(a); }\n");
  return text;
}

}  // namespace kiln::codegen::cuda
