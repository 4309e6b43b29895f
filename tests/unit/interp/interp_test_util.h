// Helpers for the interpreter tests: run one op, compare against values the test computed itself
// (rounded to the output dtype), and expect errors by message. Why: keeps each test down to its
// inputs and its independently written expectation.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/compare.h"
#include "kiln/error.h"
#include "kiln/graph.h"
#include "kiln/host_tensor.h"
#include "kiln/interp.h"

namespace kiln::test {

inline const std::vector<DType> kFloatDTypes = {DType::F32, DType::F64, DType::F16, DType::BF16};
inline const std::vector<DType> kIntDTypes = {DType::I8, DType::I16, DType::I32, DType::I64, DType::U8};

inline HostTensor run1(Op op, const Attrs& attrs, const std::vector<HostTensor>& in) {
  return interp::run_op(op, attrs, in).at(0);
}

inline HostTensor tensor(DType dt, std::vector<int64_t> shape, std::vector<double> values) {
  return HostTensor::from_doubles(dt, std::move(shape), values);
}

inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

#define EXPECT_ERROR_CONTAINS(stmt, needle)                                     \
  do {                                                                          \
    std::string kiln_msg_ = ::kiln::test::error_of([&] { stmt; });              \
    EXPECT_NE(kiln_msg_.find(needle), std::string::npos) << "message: " << kiln_msg_; \
  } while (0)

using Tolerance = kiln::testing::Tolerance;  // the one comparison contract (tests/common/compare.h)

// Tolerance for one rounding of the result to dtype (plus a little slack for libm differences):
// a unit in the last place for the 16-bit floats.
inline Tolerance rounding_tolerance(DType dt) {
  switch (dt) {
    case DType::F64: return {.rtol = 1e-12, .atol = 1e-12};
    case DType::F32: return {.rtol = 1e-6, .atol = 1e-6};
    case DType::F16: case DType::BF16: return {.ulps = 1};
    default: return {};
  }
}

// Round a double to dtype the way set_f64 does, without using the interpreter.
inline double round_to(DType dt, double v) {
  HostTensor t = HostTensor::scalar(dt, v);
  return t.get_f64(0);
}

// Narrow an int64 to an integer dtype with two's-complement wrap-around (what integer kernels do).
inline int64_t wrap_to(DType dt, int64_t v) {
  HostTensor t = HostTensor::empty(dt, {});
  t.set_i64(0, v);
  return t.get_i64(0);
}

// Compares `actual` with `expected` (rounded to the dtype first) under the comparison contract.
inline void expect_close(const HostTensor& actual, const std::vector<double>& expected,
                         Tolerance tol, const std::string& what = "") {
  ASSERT_EQ(actual.numel(), int64_t(expected.size())) << what;
  HostTensor want = HostTensor::from_doubles(actual.dtype(), actual.shape(), expected);
  EXPECT_EQ(kiln::testing::compare_tensors(actual, want, tol), "") << what << " (" << dtype_name(actual.dtype()) << ")";
}
inline void expect_close(const HostTensor& actual, const std::vector<double>& expected,
                         const std::string& what = "") {
  expect_close(actual, expected, rounding_tolerance(actual.dtype()), what);
}

inline void expect_ints(const HostTensor& actual, const std::vector<int64_t>& expected,
                        const std::string& what = "") {
  ASSERT_EQ(actual.numel(), int64_t(expected.size())) << what;
  for (int64_t i = 0; i < actual.numel(); ++i)
    EXPECT_EQ(actual.get_i64(i), expected[size_t(i)]) << what << " element " << i;
}

// Row-major coordinates; the test-side twin of the interpreter's helper, written independently.
inline std::vector<int64_t> coords_of(int64_t index, const std::vector<int64_t>& shape) {
  std::vector<int64_t> c(shape.size());
  for (int d = int(shape.size()) - 1; d >= 0; --d) {
    c[size_t(d)] = index % shape[size_t(d)];
    index /= shape[size_t(d)];
  }
  return c;
}

// Element of `t` read at output coordinates under numpy broadcasting: align right, and a size-1
// dim reads coordinate 0 (coordinate modulo the dim).
inline int64_t broadcast_source(const HostTensor& t, const std::vector<int64_t>& out_coords) {
  size_t offset = out_coords.size() - size_t(t.rank());
  int64_t index = 0;
  for (size_t d = 0; d < size_t(t.rank()); ++d)
    index = index * t.shape()[d] + out_coords[offset + d] % t.shape()[d];
  return index;
}

inline std::string label(DType dt, const std::vector<int64_t>& shape) {
  return std::string(dtype_name(dt)) + dims_to_string(shape);
}

}  // namespace kiln::test
