// The full default pipeline over every op sample (tests/common/op_samples.h): the interpreter's
// results before and after agree, bit for bit unless a decomposition ran. The same samples with
// their inputs made constants must fold to exactly the interpreter's results.
#include <gtest/gtest.h>

#include <cmath>

#include "common/op_samples.h"
#include "kiln/interp.h"
#include "kiln/passes.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// Decomposed ops round after every primitive instead of once: allow a few ulps of the dtype.
double decomposition_tolerance(DType t) {
  switch (t) {
    case DType::F64: return 1e-12;
    case DType::F32: return 2e-5;
    case DType::F16: return 2e-2;
    case DType::BF16: return 8e-2;
    default: return 0;
  }
}

std::string compare(const std::vector<HostTensor>& before, const std::vector<HostTensor>& after,
                    bool exact) {
  if (before.size() != after.size()) return "output counts differ";
  for (size_t i = 0; i < before.size(); ++i) {
    const HostTensor &a = before[i], &b = after[i];
    if (a.dtype() != b.dtype() || a.shape() != b.shape())
      return str("output ", i, " type: ", a.to_string(), " vs ", b.to_string());
    if (exact) {
      if (!a.bit_equal(b)) return str("output ", i, " not bit-identical: ", a.to_string(), " vs ", b.to_string());
      continue;
    }
    double tol = decomposition_tolerance(a.dtype());
    for (int64_t k = 0; k < a.numel(); ++k) {
      double x = a.get_f64(k), y = b.get_f64(k);
      if ((std::isnan(x) && std::isnan(y)) || x == y) continue;
      if (!(std::abs(x - y) <= tol * (1 + std::abs(x))))
        return str("output ", i, " element ", k, ": ", x, " vs ", y, " (tolerance ", tol, ")");
    }
  }
  return "";
}

OptimizeOptions test_options() {
  OptimizeOptions o;
  o.verify_each = true;
  return o;
}

bool decomposed(const PassStats& stats) {
  for (const PassRun& r : stats.runs)
    if (r.pass == "decomposition" && r.changed) return true;
  return false;
}

TEST(PipelineNumerics, EveryOpSampleKeepsItsResults) {
  int checked = 0, exact = 0;
  for (const OpSample& s : op_samples()) {
    SCOPED_TRACE(s.label);
    std::unique_ptr<Graph> original = build_sample_graph(s);
    std::unique_ptr<Graph> optimized = original->clone();
    PassStats stats;
    try {
      stats = optimize(*optimized, test_options());
    } catch (const Error& e) {
      ADD_FAILURE() << s.label << ": " << e.what();
      continue;
    }
    std::vector<HostTensor> inputs = sample_inputs(s, 7);
    std::vector<HostTensor> before = interp::run(*original, inputs);
    std::vector<HostTensor> after = interp::run(*optimized, inputs);
    bool must_be_exact = !decomposed(stats);
    std::string diff = compare(before, after, must_be_exact);
    EXPECT_TRUE(diff.empty()) << s.label << ": " << diff << "\nafter:\n" << print_graph(*optimized);
    ++checked;
    exact += must_be_exact ? 1 : 0;
  }
  EXPECT_GT(checked, 100);
  EXPECT_GT(exact, 50);
}

// Replaces every graph input by a constant holding the sample's input, so each node folds.
std::unique_ptr<Graph> with_constant_inputs(const OpSample& s, const std::vector<HostTensor>& inputs) {
  auto g = std::make_unique<Graph>("folded");
  std::vector<Value*> operands;
  for (const HostTensor& t : inputs) operands.push_back(g->constant(t));
  g->set_outputs(g->add_node(s.op, operands, s.attrs));
  return g;
}

TEST(PipelineNumerics, ConstantSamplesFoldToTheInterpretersResult) {
  int folded = 0;
  for (const OpSample& s : op_samples()) {
    SCOPED_TRACE(s.label);
    if (has_trait(s.op, kSideEffect)) continue;
    std::vector<HostTensor> inputs = sample_inputs(s, 11);
    std::unique_ptr<Graph> g = with_constant_inputs(s, inputs);
    std::vector<HostTensor> expected = interp::run(*g, {});
    OptimizeOptions o = test_options();
    o.pass_list = {"constant-folding", "dce"};
    optimize(*g, o);
    bool all_constant = true;
    for (const auto& n : g->nodes()) all_constant &= n->op == Op::Constant;
    folded += all_constant ? 1 : 0;
    std::string diff = compare(expected, interp::run(*g, {}), /*exact=*/true);
    EXPECT_TRUE(diff.empty()) << s.label << ": " << diff;
  }
  EXPECT_GT(folded, 100);
}

}  // namespace
