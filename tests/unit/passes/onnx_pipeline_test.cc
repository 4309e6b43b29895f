// The default pipeline over ONNX's backend node tests (the .venv's onnx package data): every
// model Kiln imports and interprets gives the same outputs after optimization, bit for bit
// unless a decomposition ran. Skips with a message when the ONNX frontend or the data is absent.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "common/compare.h"
#include "kiln/interp.h"
#include "kiln/passes.h"
#ifdef KILN_HAVE_ONNX
#include "kiln/onnx.h"
#include "kiln/tensor_io.h"
#endif

namespace fs = std::filesystem;
using namespace kiln;

namespace {

fs::path node_test_dir() {
  fs::path lib = fs::path(KILN_SOURCE_DIR) / ".venv" / "lib";
  if (!fs::exists(lib)) return {};
  for (const auto& py : fs::directory_iterator(lib)) {
    fs::path d = py.path() / "site-packages/onnx/backend/test/data/node";
    if (fs::exists(d)) return d;
  }
  return {};
}

// Bit for bit unless a decomposition ran; then the comparison contract (tests/common/compare.h):
// integers, bools and strings exact, floats at the decompositions' rounding (one rounding per
// primitive instead of one per op), with an absolute part scaled to the output's magnitude.
bool close_enough(const HostTensor& a, const HostTensor& b, bool exact, std::string& why) {
  if (exact) {
    if (a.dtype() == b.dtype() && a.shape() == b.shape() && a.bit_equal(b)) return true;
    why = "not bit-identical: " + a.to_string() + " vs " + b.to_string();
    return false;
  }
  kiln::testing::Tolerance tol;
  switch (b.dtype()) {
    case DType::F64: tol = {.rtol = 1e-12, .floor = 1e-12}; break;
    case DType::F32: tol = {.rtol = 2e-5, .floor = 2e-5}; break;
    case DType::F16: tol = {.rtol = 2e-2, .floor = 2e-2}; break;
    case DType::BF16: tol = {.rtol = 5e-2, .floor = 5e-2}; break;
    default: break;  // integers, bools, strings and the 8-bit floats: exact
  }
  why = kiln::testing::compare_tensors(b, a, tol);  // `a` ran before the pipeline: the reference
  return why.empty();
}

}  // namespace

TEST(OnnxPipeline, NodeTestsKeepTheirOutputs) {
#ifndef KILN_HAVE_ONNX
  GTEST_SKIP() << "built without the ONNX frontend (kiln_frontend_onnx)";
#else
  fs::path root = node_test_dir();
  if (root.empty()) GTEST_SKIP() << "no ONNX backend test data under .venv (scripts/install-deps)";
  int imported = 0, compared = 0, exact = 0;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root)) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  for (const fs::path& dir : dirs) {
    fs::path data = dir / "test_data_set_0";
    if (!fs::exists(dir / "model.onnx") || !fs::exists(data)) continue;
    std::unique_ptr<Graph> original;
    std::vector<HostTensor> inputs;
    try {
      original = import_onnx((dir / "model.onnx").string());
      for (size_t i = 0; i < original->inputs().size(); ++i)
        inputs.push_back(read_tensor_pb((data / str("input_", i, ".pb")).string()));
    } catch (const Error&) {
      continue;  // not importable: the conformance runner reports it
    }
    ++imported;
    int64_t elements = 0;
    for (const auto& t : inputs) elements += t.numel();
    if (elements > (int64_t(1) << 20)) continue;  // keep the sweep fast
    std::vector<HostTensor> before;
    try {
      before = interp::run(*original, inputs);
    } catch (const Error&) {
      continue;  // the interpreter rejects it before optimization: not this test's business
    }
    std::unique_ptr<Graph> optimized = original->clone();
    OptimizeOptions o;
    o.verify_each = true;
    PassStats stats;
    std::vector<HostTensor> after;
    try {
      stats = optimize(*optimized, o);
      after = interp::run(*optimized, inputs);
    } catch (const Error& e) {
      ADD_FAILURE() << dir.filename() << ": " << e.what();
      continue;
    }
    bool decomposed = false;
    for (const PassRun& r : stats.runs) decomposed |= r.pass == "decomposition" && r.changed;
    ASSERT_EQ(before.size(), after.size()) << dir.filename();
    for (size_t i = 0; i < before.size(); ++i) {
      std::string why;
      EXPECT_TRUE(close_enough(before[i], after[i], !decomposed, why))
          << dir.filename() << " output " << i << ": " << why << "\n" << print_graph(*optimized);
    }
    ++compared;
    exact += decomposed ? 0 : 1;
  }
  std::cout << "[ onnx ] " << imported << " node tests imported, " << compared
            << " compared before/after the pipeline (" << exact << " bit-exact)\n";
  EXPECT_GT(compared, 100);
#endif
}
