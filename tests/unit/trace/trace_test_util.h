// Small helpers shared by the tensor API and tracing tests.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "common/compare.h"
#include "kiln/demo.h"
#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln::trace_test {

// Deterministic uniform tensor in [lo, hi).
inline Tensor random_tensor(std::vector<int64_t> shape, uint64_t seed, DType dtype = DType::F32,
                            double lo = -1, double hi = 1) {
  return Tensor::from_host(HostTensor::random(dtype, std::move(shape), seed, lo, hi));
}

inline Tensor values(DType dtype, std::vector<int64_t> shape, std::vector<double> v) {
  return Tensor::from_host(HostTensor::from_doubles(dtype, std::move(shape), v));
}

// The kiln::Error message fn throws, or "" when it does not throw.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline ::testing::AssertionResult close(const Tensor& expected, const Tensor& actual,
                                        double atol = 1e-5, double rtol = 1e-4) {
  if (expected.dtype() != actual.dtype() || expected.sizes() != actual.sizes())
    return ::testing::AssertionFailure() << "type " << actual.type().to_string() << " != expected "
                                         << expected.type().to_string();
  // The comparison contract (tests/common/compare.h): integers exact, NaN positions, infinities.
  std::string diff = kiln::testing::compare_tensors(actual.host(), expected.host(), {.rtol = rtol, .atol = atol});
  if (diff.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << diff << "\nexpected " << expected.to_string()
                                       << "\nactual   " << actual.to_string();
}

}  // namespace kiln::trace_test
