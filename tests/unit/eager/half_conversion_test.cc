// The eager kernels' branch-free 16-bit float conversions must round exactly like kiln's own
// (dtype.cc): every f16 bit pattern, and a wide sweep of f32 values including each halfway point.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "kernels/cpu/cpu_common.h"

namespace kiln {
namespace {

using eager::detail::bf16_bits_to_float;
using eager::detail::float_to_bf16_bits;
using eager::detail::float_to_half_bits;
using eager::detail::half_bits_to_float;

TEST(HalfConversion, EveryHalfWidensExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float want = f16_bits_to_f32(uint16_t(h));
    EXPECT_EQ(std::bit_cast<uint32_t>(half_bits_to_float(uint16_t(h))), std::bit_cast<uint32_t>(want)) << h;
    EXPECT_EQ(std::bit_cast<uint32_t>(bf16_bits_to_float(uint16_t(h))),
              std::bit_cast<uint32_t>(kiln::bf16_bits_to_f32(uint16_t(h)))) << h;
  }
}

// Values at most half the smallest subnormal round to a zero of the same sign. Checked on its own:
// kiln's f64_to_f16_bits / f64_to_bf16_bits get these wrong (they return garbage such as -inf for
// 1e-40), so they are not the oracle there.
uint16_t expected_zero_or(float f, double half_smallest_subnormal, uint16_t kiln_bits) {
  if (std::fabs(double(f)) <= half_smallest_subnormal) return std::signbit(f) ? 0x8000 : 0;
  return kiln_bits;
}

void expect_rounds_like_kiln(float f) {
  ASSERT_EQ(float_to_half_bits(f), expected_zero_or(f, 0x1p-25, f64_to_f16_bits(double(f))))
      << "f16 of " << f << " bits " << std::bit_cast<uint32_t>(f);
  ASSERT_EQ(float_to_bf16_bits(f), expected_zero_or(f, 0x1p-134, f64_to_bf16_bits(double(f))))
      << "bf16 of " << f << " bits " << std::bit_cast<uint32_t>(f);
}

TEST(HalfConversion, FloatsNarrowWithNearestEven) {
  // A sweep across all of f32's bit patterns (both signs, NaN, inf, subnormals).
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 65521) expect_rounds_like_kiln(std::bit_cast<float>(uint32_t(u)));
  // Every value halfway between neighbouring halves, and one float either side of it.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    double lo = f16_bits_to_f32(uint16_t(h)), hi = f16_bits_to_f32(uint16_t(h + 1));
    float mid = float((lo + hi) / 2);  // exact: halves have 11 significant bits
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)})
      for (float s : {f, -f}) expect_rounds_like_kiln(s);
  }
  for (float f : {65504.0f, 65519.99f, 65520.0f, 1e10f, 5.96e-8f, 2.98e-8f, 2.9802322e-8f, 0.0f, -0.0f,
                  INFINITY, -INFINITY, NAN, -NAN, 3.4028235e38f})
    expect_rounds_like_kiln(f);
}

}  // namespace
}  // namespace kiln
