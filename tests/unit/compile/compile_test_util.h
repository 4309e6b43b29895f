// Shared helpers of the compiled-path tests: a cache directory that survives between test runs
// (so reruns skip the compiler) and comparison against the reference interpreter.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "common/compare.h"
#include "common/row_statistics.h"
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

// The tolerance of compiled results: compiled_tolerance(d).rtol (tests/common/compare.h).
inline double tolerance(DType d) { return compiled_tolerance(d).rtol; }

// Runs g compiled and in the interpreter on `inputs`; fails the test on any difference
// (compare_tensors, tests/common/compare.h) and on any row statistic the result breaks.
inline void expect_matches_interpreter(const Graph& g, const std::vector<HostTensor>& inputs,
                                       const Executable& exe, const std::string& label) {
  std::vector<HostTensor> want = interp::run(g, inputs);
  std::vector<HostTensor> got = const_cast<Executable&>(exe).run(inputs);
  ASSERT_EQ(got.size(), want.size()) << label;
  for (size_t i = 0; i < want.size(); ++i) {
    std::string diff = compare_tensors(got[i], want[i]);
    EXPECT_EQ(diff, "") << label << ", output " << i << "\n" << exe.explain().substr(0, 6000);
    EXPECT_EQ(check_row_statistics(g, inputs, i, got[i]), "") << label << ", output " << i;
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
