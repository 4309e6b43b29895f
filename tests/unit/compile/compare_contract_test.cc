// The comparison the compiled and GPU tests use (compare_tensors in compile_test_util.h) must fail
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

}  // namespace
}  // namespace kiln::testing
