// The comparison contract every test family uses (tests/common/compare.h) must fail
// on the wrong answers a broken kernel gives. Why: with a fixed absolute floor an all-zeros softmax
// over a wide row passed in every dtype (each element is far below the floor).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

TEST(CompareContract, AnAllZerosSoftmaxOverAWideRowFailsInEveryFloatDtype) {
  const int64_t n = 70001;
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    HostTensor want = HostTensor::empty(t, {1, n}), zeros = HostTensor::empty(t, {1, n}), close = HostTensor::empty(t, {1, n});
    for (int64_t i = 0; i < n; ++i) {
      double v = (1.0 + 0.5 * std::sin(double(i))) / double(n);  // a softmax-like row summing to ~1
      want.set_f64(i, v);
      zeros.set_f64(i, 0.0);
      close.set_f64(i, v * (1 + tolerance(t) / 4));  // a kernel that rounds differently
    }
    EXPECT_NE(compare_tensors(zeros, want), "") << dtype_name(t);
    EXPECT_EQ(compare_tensors(close, want), "") << dtype_name(t);
  }
}

TEST(CompareContract, NanPositionsSignsOfInfinityAndIntegersAreExact) {
  HostTensor want = HostTensor::empty(DType::F32, {4});
  want.set_f64(0, std::numeric_limits<double>::quiet_NaN());
  want.set_f64(1, std::numeric_limits<double>::infinity());
  want.set_f64(2, -1.5);
  want.set_f64(3, 2.0);
  HostTensor got = HostTensor::empty(DType::F32, {4});
  for (int64_t i = 0; i < 4; ++i) got.set_f64(i, want.get_f64(i));
  EXPECT_EQ(compare_tensors(got, want), "");
  got.set_f64(1, -std::numeric_limits<double>::infinity());
  EXPECT_NE(compare_tensors(got, want), "") << "the sign of an infinity";
  got.set_f64(1, std::numeric_limits<double>::infinity());
  got.set_f64(0, 0.0);
  EXPECT_NE(compare_tensors(got, want), "") << "a NaN where the reference has one";
  got.set_f64(0, std::numeric_limits<double>::quiet_NaN());
  got.set_f64(3, std::numeric_limits<double>::quiet_NaN());
  EXPECT_NE(compare_tensors(got, want), "") << "a NaN where the reference has none";

  HostTensor a = HostTensor::empty(DType::I32, {2}), b = HostTensor::empty(DType::I32, {2});
  a.set_i64(0, 1000000), b.set_i64(0, 1000000);
  a.set_i64(1, 7), b.set_i64(1, 8);
  EXPECT_NE(compare_tensors(a, b), "") << "integers are exact";
}

TEST(CompareContract, UlpsAreUnitsOfTheOutputDtype) {
  EXPECT_EQ(ulp_of(DType::F16, 1.0), std::ldexp(1.0, -10));
  EXPECT_EQ(ulp_of(DType::F16, 1.5), std::ldexp(1.0, -10));
  EXPECT_EQ(ulp_of(DType::F16, 2.0), std::ldexp(1.0, -9));
  EXPECT_EQ(ulp_of(DType::F16, 0.0), std::ldexp(1.0, -24)) << "the smallest subnormal";
  EXPECT_EQ(ulp_of(DType::BF16, -3.0), std::ldexp(1.0, -6));
  EXPECT_EQ(ulp_of(DType::F32, 1.0), std::ldexp(1.0, -23));
  EXPECT_EQ(ulp_of(DType::I32, 1.0), 0);
  HostTensor want = HostTensor::from_doubles(DType::F16, {3}, {1.0, 1000.0, 1e-6});
  HostTensor one_ulp = HostTensor::from_doubles(DType::F16, {3}, {1.0 + std::ldexp(1.0, -10), 1000.5, 1e-6 + std::ldexp(1.0, -24)});
  HostTensor two_ulps = HostTensor::from_doubles(DType::F16, {3}, {1.0 + std::ldexp(1.0, -9), 1000.0, 1e-6});
  EXPECT_EQ(compare_tensors(one_ulp, want, Tolerance{.ulps = 1}), "");
  EXPECT_NE(compare_tensors(two_ulps, want, Tolerance{.ulps = 1}), "");
  EXPECT_NE(compare_tensors(one_ulp, want, Tolerance{}), "") << "all zero: bit-for-bit values";
}

TEST(CompareContract, TheFloorScalesWithTheOutputsLargestMagnitude) {
  HostTensor want = HostTensor::from_doubles(DType::F32, {2}, {100.0, 0.001});
  HostTensor got = HostTensor::from_doubles(DType::F32, {2}, {100.0, 0.05});
  EXPECT_EQ(compare_tensors(got, want, Tolerance{.floor = 1e-3}), "") << "0.049 <= 1e-3 x 100";
  EXPECT_NE(compare_tensors(got, want, Tolerance{.floor = 1e-4}), "");
  EXPECT_NE(compare_tensors(got, want, Tolerance{.rtol = 1e-3}), "") << "relative alone";
  EXPECT_EQ(compare_tensors(got, want, scaled(Tolerance{.floor = 1e-4}, 10)), "");
}

TEST(CompareContract, ShapesAndDtypesMustMatch) {
  HostTensor a = HostTensor::from_doubles(DType::F32, {2}, {1, 2}), b = HostTensor::from_doubles(DType::F32, {1, 2}, {1, 2});
  EXPECT_NE(compare_tensors(a, b), "");
  EXPECT_NE(compare_tensors(a, HostTensor::from_doubles(DType::F64, {2}, {1, 2})), "");
}

}  // namespace
}  // namespace kiln::testing
