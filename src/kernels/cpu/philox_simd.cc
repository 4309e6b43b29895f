// Philox4x32-10 over sixteen consecutive counters (philox_simd.h): four 64-bit lanes per AVX2
// register, each holding one 32-bit word, so _mm256_mul_epu32 gives the full 32x32-bit products;
// the key is the same for every lane (one seed per row), so the round keys are broadcast scalars.
#include "kernels/cpu/philox_simd.h"

#include <immintrin.h>

#include "kiln/sampling.h"

namespace kiln::eager::detail {
namespace {

constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u, kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

__attribute__((target("avx2"))) void philox_16_avx2(uint64_t first_block, uint64_t step, uint64_t seed, uint32_t* words) {
  const __m256i low32 = _mm256_set1_epi64x(0xffffffffll);
  const __m256i mul0 = _mm256_set1_epi64x(kMul0), mul1 = _mm256_set1_epi64x(kMul1);
  const __m256i s_lo = _mm256_set1_epi64x(int64_t(uint32_t(step))), s_hi = _mm256_set1_epi64x(int64_t(step >> 32));
  for (int group = 0; group < 4; ++group) {  // four blocks per register
    const uint64_t b = first_block + uint64_t(4 * group);
    const __m256i blocks = _mm256_set_epi64x(int64_t(b + 3), int64_t(b + 2), int64_t(b + 1), int64_t(b));
    __m256i c0 = _mm256_and_si256(blocks, low32), c1 = _mm256_srli_epi64(blocks, 32), c2 = s_lo, c3 = s_hi;
    uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      if (round > 0) k0 += kWeyl0, k1 += kWeyl1;
      const __m256i p0 = _mm256_mul_epu32(mul0, c0), p1 = _mm256_mul_epu32(mul1, c2);
      const __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), c1), _mm256_set1_epi64x(k0));
      const __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), c3), _mm256_set1_epi64x(k1));
      c0 = n0, c1 = _mm256_and_si256(p1, low32), c2 = n2, c3 = _mm256_and_si256(p0, low32);
    }
    alignas(32) uint64_t w[4][4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(w[0]), c0);
    _mm256_store_si256(reinterpret_cast<__m256i*>(w[1]), c1);
    _mm256_store_si256(reinterpret_cast<__m256i*>(w[2]), c2);
    _mm256_store_si256(reinterpret_cast<__m256i*>(w[3]), c3);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) words[16 * group + 4 * i + j] = uint32_t(w[j][i]);
  }
}

}  // namespace

void philox_16_blocks(uint64_t first_block, uint64_t step, uint64_t seed, uint32_t words[64]) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) {
    philox_16_avx2(first_block, step, seed, words);
    return;
  }
  for (int i = 0; i < 16; ++i) {
    const PhiloxCounter out = sample_block(seed, step, first_block + uint64_t(i));
    for (int j = 0; j < 4; ++j) words[4 * i + j] = out[size_t(j)];
  }
}

}  // namespace kiln::eager::detail
