// The default pipeline over ONNX's backend node tests (the .venv's onnx package data): every
// model Kiln imports and interprets gives the same outputs after optimization, bit for bit
// unless a decomposition ran. Skips with a message when the ONNX frontend or the data is absent.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

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

bool close_enough(const HostTensor& a, const HostTensor& b, bool exact, std::string& why) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
    why = a.to_string() + " vs " + b.to_string();
    return false;
  }
  if (exact) {
    if (a.bit_equal(b)) return true;
    why = "not bit-identical: " + a.to_string() + " vs " + b.to_string();
    return false;
  }
  double tol = a.dtype() == DType::F32 ? 2e-5 : a.dtype() == DType::F64 ? 1e-12 : 5e-2;
  for (int64_t k = 0; k < a.numel(); ++k) {
    double x = a.get_f64(k), y = b.get_f64(k);
    if ((std::isnan(x) && std::isnan(y)) || x == y) continue;
    if (!(std::abs(x - y) <= tol * (1 + std::abs(x)))) {
      why = str("element ", k, ": ", x, " vs ", y);
      return false;
    }
  }
  return true;
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
