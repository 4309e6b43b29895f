// The 8- and 4-bit dtypes and u64 on the host: bit patterns derived by hand from each format's
// definition (bias, mantissa width, which codes are NaN/inf), round to nearest even at ties,
// overflow and underflow, FNUZ's lack of -0, the 4-bit integers' wrapping, and text round trips.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/graph.h"
#include "kiln/host_tensor.h"

using namespace kiln;

namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Case {
  float value;
  uint8_t code;
};

void expect_codes(DType t, std::initializer_list<Case> cases) {
  for (const Case& c : cases)
    EXPECT_EQ(int(f32_to_narrow_bits(t, c.value)), int(c.code)) << dtype_name(t) << " of " << c.value;
}

TEST(NarrowDType, E4M3FNEncodesByTheFormatDefinition) {
  // bias 7, 3 mantissa bits; S.1111.111 is NaN, so the largest value is 1.75 * 2^8 = 448.
  expect_codes(DType::F8E4M3FN,
               {{1.0f, 0x38}, {-1.0f, 0xb8}, {448.0f, 0x7e}, {-448.0f, 0xfe}, {0.0f, 0x00}, {-0.0f, 0x80},
                {std::ldexp(1.0f, -6), 0x08},  // smallest normal
                {std::ldexp(1.0f, -9), 0x01},  // smallest subnormal
                {std::ldexp(1.0f, -10), 0x00}, // half of it: a tie, to the even 0
                {std::ldexp(3.0f, -11), 0x01}, // 1.5x the half: up
                {-std::ldexp(1.0f, -10), 0x80},
                {1.0625f, 0x38},  // halfway 1.0 / 1.125: even mantissa 000
                {1.1875f, 0x3a},  // halfway 1.125 / 1.25: even mantissa 010
                {464.0f, 0x7e},   // halfway 448 / 480: even (480 would be the NaN code)
                {465.0f, 0x7f},   // rounds past the largest value: NaN without saturation
                {kInf, 0x7f}, {-kInf, 0xff}, {kNaN, 0x7f}, {-kNaN, 0xff}});
}

TEST(NarrowDType, E4M3FNUZHasOneNaNAndNoNegativeZero) {
  // bias 8; 0x80 is the only NaN, so 0x7f = 1.875 * 2^7 = 240 is the largest value.
  expect_codes(DType::F8E4M3FNUZ,
               {{1.0f, 0x40}, {-1.0f, 0xc0}, {240.0f, 0x7f}, {-240.0f, 0xff}, {-0.0f, 0x00},
                {std::ldexp(1.0f, -10), 0x01}, {-std::ldexp(1.0f, -12), 0x00}, {248.0f, 0x80},
                {kInf, 0x80}, {-kInf, 0x80}, {kNaN, 0x80}});
}

TEST(NarrowDType, E5M2IsIEEELike) {
  // bias 15, 2 mantissa bits, exponent 31 holds inf (mantissa 0) and NaN.
  expect_codes(DType::F8E5M2,
               {{1.0f, 0x3c}, {57344.0f, 0x7b}, {61439.0f, 0x7b},
                {61440.0f, 0x7c},  // halfway 57344 / 65536: to even, past the largest: inf
                {std::ldexp(1.0f, -16), 0x01}, {-0.0f, 0x80}, {kInf, 0x7c}, {-kInf, 0xfc}, {kNaN, 0x7e}});
  EXPECT_TRUE(std::isinf(narrow_bits_to_f32(DType::F8E5M2, 0x7c)));
  EXPECT_TRUE(std::isnan(narrow_bits_to_f32(DType::F8E5M2, 0x7d)));
}

TEST(NarrowDType, E5M2FNUZ) {
  // bias 16: 0x7f = 1.75 * 2^15 = 57344, smallest subnormal 2^-17.
  expect_codes(DType::F8E5M2FNUZ, {{1.0f, 0x40}, {57344.0f, 0x7f}, {std::ldexp(1.0f, -17), 0x01},
                                   {-0.0f, 0x00}, {65536.0f, 0x80}, {kNaN, 0x80}});
}

TEST(NarrowDType, E2M1SaturatesAndHasNoNaN) {
  // bias 1, 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6.
  expect_codes(DType::F4E2M1, {{0.5f, 0x1}, {1.5f, 0x3}, {-1.5f, 0xb}, {6.0f, 0x7}, {3.0f, 0x5},
                               {5.0f, 0x6},   // halfway 4 / 6: even
                               {2.5f, 0x4},   // halfway 2 / 3: even
                               {0.25f, 0x0},  // halfway 0 / 0.5: even
                               {0.75f, 0x2},  // halfway 0.5 / 1: even
                               {100.0f, 0x7}, {-kInf, 0xf}, {-0.0f, 0x8}, {kNaN, 0x0}});
}

TEST(NarrowDType, E8M0RoundsUpToAPowerOfTwo) {
  expect_codes(DType::F8E8M0, {{1.0f, 0x7f}, {0.124f, 0x7c}, {3.0f, 0x81}, {0.0f, 0x00},
                               {std::ldexp(1.0f, 127), 0xfe}, {std::ldexp(1.5f, 127), 0xff}, {kNaN, 0xff},
                               {kInf, 0xff}, {std::ldexp(1.0f, -140), 0x00}});
  EXPECT_EQ(narrow_bits_to_f32(DType::F8E8M0, 0x00), std::ldexp(1.0f, -127));
  EXPECT_EQ(narrow_bits_to_f32(DType::F8E8M0, 0x80), 2.0f);
  EXPECT_TRUE(std::isnan(narrow_bits_to_f32(DType::F8E8M0, 0xff)));
}

TEST(NarrowDType, EveryCodeDecodesAndEncodesBack) {
  for (DType t : {DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ, DType::F4E2M1,
                  DType::F8E8M0}) {
    int codes = t == DType::F4E2M1 ? 16 : 256;
    for (int c = 0; c < codes; ++c) {
      float v = narrow_bits_to_f32(t, uint8_t(c));
      if (std::isnan(v)) continue;
      EXPECT_EQ(int(f32_to_narrow_bits(t, v)), c) << dtype_name(t) << " code " << c << " = " << v;
      if (v > 0 && !std::isinf(v)) {
        EXPECT_LE(double(v), narrow_float_max(t)) << dtype_name(t);
      }
    }
  }
  EXPECT_EQ(narrow_float_max(DType::F8E4M3FN), 448.0);
  EXPECT_EQ(narrow_float_max(DType::F8E4M3FNUZ), 240.0);
  EXPECT_EQ(narrow_float_max(DType::F8E5M2), 57344.0);
  EXPECT_EQ(narrow_float_max(DType::F4E2M1), 6.0);
}

TEST(NarrowDType, HostTensorsConvertWrapAndHoldU64) {
  HostTensor i4 = HostTensor::from_doubles(DType::I4, {7}, {-9, -8, 7, 8, 15.9, -2.5, 16});
  std::vector<int64_t> want_i4 = {7, -8, 7, -8, -1, -2, 0};  // truncate, then the low nibble
  for (int64_t i = 0; i < 7; ++i) EXPECT_EQ(i4.get_i64(i), want_i4[size_t(i)]) << i;
  HostTensor u4 = HostTensor::zeros(DType::U4, {3});
  u4.set_i64(0, -1);
  u4.set_i64(1, 17);
  u4.set_i64(2, 15);
  EXPECT_EQ(u4.get_i64(0), 15);
  EXPECT_EQ(u4.get_i64(1), 1);
  EXPECT_EQ(u4.get_i64(2), 15);
  HostTensor u64 = HostTensor::zeros(DType::U64, {1});
  u64.data<uint64_t>()[0] = 18446744073709551615ull;
  EXPECT_EQ(u64.get_f64(0), 18446744073709551616.0);
  HostTensor f8 = HostTensor::from_doubles(DType::F8E4M3FN, {2}, {0.3, 1000});
  EXPECT_EQ(f8.get_f64(0), 0.3125);  // 0.3 = 1.2 * 2^-2 -> 1.25 * 2^-2
  EXPECT_TRUE(std::isnan(f8.get_f64(1)));
}

TEST(NarrowDType, ConstantsRoundTripThroughTextBitExactly) {
  Graph g("narrow");
  std::vector<Value*> outs;
  HostTensor nan_codes = HostTensor::zeros(DType::F8E4M3FN, {2});
  nan_codes.data<uint8_t>()[0] = 0xff;  // -NaN: printed as hex so the sign survives
  nan_codes.data<uint8_t>()[1] = 0x38;
  outs.push_back(g.constant(nan_codes));
  HostTensor big = HostTensor::zeros(DType::U64, {2});
  big.data<uint64_t>()[0] = 1ull << 63;
  big.data<uint64_t>()[1] = 5;
  outs.push_back(g.constant(big));
  outs.push_back(g.constant(HostTensor::from_doubles(DType::F4E2M1, {3}, {-6, 0.5, 3})));
  outs.push_back(g.constant(HostTensor::from_doubles(DType::I4, {3}, {-8, 7, 0})));
  outs.push_back(g.constant(HostTensor::from_doubles(DType::F8E8M0, {2}, {0.25, 1024})));
  g.set_outputs(outs);
  std::string text = print_graph(g);
  EXPECT_NE(text.find("dense<f4e2m1[3]>[-6.0, 0.5, 3.0]"), std::string::npos) << text;
  EXPECT_NE(text.find("dense<i4[3]>[-8, 7, 0]"), std::string::npos) << text;
  EXPECT_NE(text.find("dense<f8e8m0[2]>[0.25, 1024.0]"), std::string::npos) << text;
  EXPECT_NE(text.find("dense<f8e4m3fn[2]>\"0xff38\""), std::string::npos) << text;
  auto parsed = parse_graph(text);
  EXPECT_EQ(print_graph(*parsed), text);
  for (size_t i = 0; i < outs.size(); ++i)
    EXPECT_TRUE(parsed->outputs()[i]->producer->attrs.get_tensor("value").bit_equal(
        outs[i]->producer->attrs.get_tensor("value")))
        << i;
}

}  // namespace
