// The AVX-512 max pool over nChw16c (see max_pool_block16.h). Compiled for AVX-512 function by
// function (target attributes), called only where max_pool_block16_available() says the CPU has it.
#include "kernels/cpu/max_pool_block16.h"

#include <immintrin.h>

#include <limits>

namespace kiln::eager::onednn {

namespace {

#define KILN_AVX512 __attribute__((target("avx512f")))

KILN_AVX512 inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
KILN_AVX512 inline __m512 load16(const uint16_t* p) {  // bf16 -> f32: the bits moved up
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}
KILN_AVX512 inline void store16(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
KILN_AVX512 inline void store16(uint16_t* p, __m512 v) {  // exact: every lane is an input or -inf
  const __m256i narrow = _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow);
}

template <typename T>
KILN_AVX512 void rows(const PoolSpec& p, const Geometry& gx, const Geometry& gy, const T* x, T* y, int64_t begin,
                      int64_t end) {
  constexpr int B = 16;
  const int64_t blocks = (p.y[1] + B - 1) / B, OH = p.y[2], OW = p.y[3];
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t row = begin; row < end; ++row) {
    const int64_t oy = row % OH, nb = row / OH, n = nb / blocks, cb = nb % blocks;
    const T* xplane = x + n * gx.stride[0] + cb * gx.stride[1];
    T* yrow = y + n * gy.stride[0] + cb * gy.stride[1] + oy * gy.stride[2];
    const int64_t y0 = oy * p.strides[0] - p.pads[0];
    int64_t ky0, ky1;
    pool_taps_inside(y0, p.kernel[0], p.dilations[0], p.x[2], ky0, ky1);
    for (int64_t ox = 0; ox < OW; ++ox) {
      const int64_t x0 = ox * p.strides[1] - p.pads[1];
      int64_t kx0, kx1;
      pool_taps_inside(x0, p.kernel[1], p.dilations[1], p.x[3], kx0, kx1);
      __m512 acc = lowest;
      for (int64_t ky = ky0; ky < ky1; ++ky) {
        const T* src_row = xplane + (y0 + ky * p.dilations[0]) * gx.stride[2];
        for (int64_t kx = kx0; kx < kx1; ++kx) {
          const __m512 e = load16(src_row + (x0 + kx * p.dilations[1]) * B);
          const __mmask16 take = _mm512_cmp_ps_mask(e, acc, _CMP_GT_OQ) | _mm512_cmp_ps_mask(e, e, _CMP_UNORD_Q);
          acc = _mm512_mask_mov_ps(acc, take, e);
        }
      }
      store16(yrow + ox * gy.stride[3], acc);
    }
  }
}

}  // namespace

bool max_pool_block16_available() {
  static const bool have = __builtin_cpu_supports("avx512f");
  return have;
}

void max_pool_block16_rows(const PoolSpec& p, const Geometry& gx, const Geometry& gy, const float* x, float* y,
                           int64_t begin, int64_t end) {
  rows(p, gx, gy, x, y, begin, end);
}

void max_pool_block16_rows(const PoolSpec& p, const Geometry& gx, const Geometry& gy, const uint16_t* x,
                           uint16_t* y, int64_t begin, int64_t end) {
  rows(p, gx, gy, x, y, begin, end);
}

}  // namespace kiln::eager::onednn
