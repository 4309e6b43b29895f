// Shared helpers of the compiled-path tests: a cache directory that survives between test runs
// (so reruns skip the compiler) and comparison against the reference interpreter.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "kiln/compile.h"
#include "kiln/interp.h"

namespace kiln::testing {

inline std::string test_cache_dir() {
  if (const char* d = std::getenv("KILN_TEST_CACHE_DIR"); d && *d) return d;
  return (std::filesystem::temp_directory_path() / "kiln-test-cache").string();
}

inline CompileOptions test_options() {
  CompileOptions o;
  o.cache_dir = test_cache_dir();
  o.num_threads = 2;
  o.parallel_threshold = 64;  // small tests still exercise the parallel loops
  return o;
}

// Relative and absolute tolerance for results of dtype d computed in its compute type.
inline double tolerance(DType d) {
  switch (d) {
    case DType::F64: return 1e-9;
    case DType::F32: return 2e-4;
    case DType::F16: return 2e-2;
    case DType::BF16: return 4e-2;
    default: return 0;
  }
}

// Empty when equal within tolerance; else a message naming the first bad element. Integers and
// bools exactly; NaN where the reference has NaN and infinities with their sign; other floats within
// |got - want| <= tol * |want| + tol * max|want| — the absolute floor scales with the output's
// magnitude, so an all-zeros softmax over a wide row (every element far below 1) fails, where a
// floor of `tol` alone would pass it.
inline std::string compare_tensors(const HostTensor& got, const HostTensor& want) {
  if (got.dtype() != want.dtype()) return str("dtype ", dtype_name(got.dtype()), " vs ", dtype_name(want.dtype()));
  if (got.shape() != want.shape()) return str("shape ", dims_to_string(got.shape()), " vs ", dims_to_string(want.shape()));
  const double tol = tolerance(want.dtype());
  double magnitude = 0;
  if (is_float(want.dtype()))
    for (int64_t i = 0; i < want.numel(); ++i)
      if (double w = std::fabs(want.get_f64(i)); std::isfinite(w)) magnitude = std::max(magnitude, w);
  const double floor = tol * magnitude;
  for (int64_t i = 0; i < want.numel(); ++i) {
    if (!is_float(want.dtype())) {
      if (got.get_i64(i) != want.get_i64(i))
        return str("element ", i, ": got ", got.get_i64(i), ", want ", want.get_i64(i));
      continue;
    }
    double g = got.get_f64(i), w = want.get_f64(i);
    if (std::isnan(w) || std::isnan(g)) {
      if (std::isnan(w) != std::isnan(g)) return str("element ", i, ": got ", g, ", want ", w);
      continue;
    }
    if (std::isinf(w) || std::isinf(g)) {
      if (g != w) return str("element ", i, ": got ", g, ", want ", w);
      continue;
    }
    if (std::fabs(g - w) > tol * std::fabs(w) + floor)
      return str("element ", i, ": got ", g, ", want ", w, " (tolerance ", tol, " relative + ", floor,
                 " absolute: ", tol, " x the output's largest magnitude ", magnitude, ")");
  }
  return "";
}

// Runs g compiled and in the interpreter on `inputs`; fails the test on any difference.
inline void expect_matches_interpreter(const Graph& g, const std::vector<HostTensor>& inputs,
                                       const Executable& exe, const std::string& label) {
  std::vector<HostTensor> want = interp::run(g, inputs);
  std::vector<HostTensor> got = const_cast<Executable&>(exe).run(inputs);
  ASSERT_EQ(got.size(), want.size()) << label;
  for (size_t i = 0; i < want.size(); ++i) {
    std::string diff = compare_tensors(got[i], want[i]);
    EXPECT_EQ(diff, "") << label << ", output " << i << "\n" << exe.explain().substr(0, 6000);
  }
}

inline std::shared_ptr<Executable> compile_and_check(const Graph& g, const std::vector<HostTensor>& inputs,
                                                     const std::string& label,
                                                     CompileOptions opt = test_options()) {
  auto exe = compile(g, opt);
  expect_matches_interpreter(g, inputs, *exe, label);
  return exe;
}

inline TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s), Device::CPU}; }
inline TensorType typed(DType d, Shape s) { return TensorType{d, std::move(s), Device::CPU}; }

}  // namespace kiln::testing
