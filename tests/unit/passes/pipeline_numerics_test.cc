// The full default pipeline over every op sample (tests/common/op_samples.h): the interpreter's
// results before and after agree, bit for bit unless a decomposition ran. The same samples with
// their inputs made constants must fold to exactly the interpreter's results.
#include <gtest/gtest.h>

#include <cmath>

#include "common/op_samples.h"
#include "kiln/interp.h"
#include "kiln/passes.h"
#include "passes/pass.h"

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

// A deliberately wrong rewrite, to prove the harness above catches one: "x + y -> x - y".
class SwapAddForSubPass : public passes::Pass {
 public:
  std::string_view name() const override { return "broken-add-to-sub"; }
  bool run(Graph& g) override {
    bool changed = false;
    for (Node* n : g.node_list()) {
      if (n->op != Op::Add) continue;
      g.set_insertion_point(n);
      Value* sub = g.add(Op::Sub, n->inputs);
      g.replace_all_uses(n->output(), sub);
      g.erase_node(n);
      changed = true;
    }
    g.set_insertion_point(nullptr);
    return changed;
  }
};

// A subtly wrong one: "x + 0 -> x" is not exact in IEEE arithmetic (-0 + 0 is +0).
class DropAddZeroPass : public passes::Pass {
 public:
  std::string_view name() const override { return "broken-add-zero"; }
  bool run(Graph& g) override {
    bool changed = false;
    for (Node* n : g.node_list()) {
      if (n->op != Op::Add || n->inputs[1]->producer == nullptr ||
          n->inputs[1]->producer->op != Op::Constant)
        continue;
      g.replace_all_uses(n->output(), n->inputs[0]);
      g.erase_node(n);
      changed = true;
    }
    return changed;
  }
};

TEST(PipelineNumerics, TheHarnessCatchesABrokenRewrite) {
  int caught = 0;
  for (const OpSample& s : op_samples_for(Op::Add)) {
    SCOPED_TRACE(s.label);
    std::unique_ptr<Graph> original = build_sample_graph(s);
    std::unique_ptr<Graph> broken = original->clone();
    SwapAddForSubPass pass;
    ASSERT_TRUE(pass.run(*broken));
    verify(*broken);  // still a valid graph: only the numerics can tell
    std::vector<HostTensor> inputs = sample_inputs(s, 7);
    std::string diff = compare(interp::run(*original, inputs), interp::run(*broken, inputs), true);
    caught += diff.empty() ? 0 : 1;
  }
  EXPECT_GT(caught, 0);
  EXPECT_EQ(caught, int(op_samples_for(Op::Add).size()));
}

TEST(PipelineNumerics, TheHarnessCatchesANegativeZeroRewrite) {
  Graph g("add_zero");
  Value* x = g.add_input("x", TensorType{DType::F32, {3}, Device::CPU});
  g.set_outputs({g.add(Op::Add, {x, g.scalar(DType::F32, 0.0)})});
  std::unique_ptr<Graph> broken = g.clone();
  DropAddZeroPass pass;
  ASSERT_TRUE(pass.run(*broken));
  HostTensor in = HostTensor::zeros(DType::F32, {3});
  in.set_f64(0, -0.0), in.set_f64(1, 1.5), in.set_f64(2, -2.25);
  // Values agree (-0 == +0), so only the bit-exact comparison sees the wrong sign.
  EXPECT_FALSE(compare(interp::run(g, {in}), interp::run(*broken, {in}), true).empty());
  // And the real pipeline does not make this rewrite without fast-math.
  std::unique_ptr<Graph> optimized = g.clone();
  optimize(*optimized, test_options());
  EXPECT_TRUE(compare(interp::run(g, {in}), interp::run(*optimized, {in}), true).empty());
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
