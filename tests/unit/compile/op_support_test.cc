// The per-target op tables (src/runtime/op_support_<target>.def) against the op table and against
// what the CPU compiler does with every op's samples. Why: a table nobody checks drifts; this test
// fails when an op is added to ops.def without a decision for each target, and when the CPU row
// says one thing while the compiler does another.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "common/op_samples.h"
#include "kiln/error.h"
#include "kiln/passes.h"
#include "kiln/target.h"
#include "runtime/executable.h"

namespace kiln::testing {
namespace {

TEST(OpSupport, EveryOpHasADecisionForEveryTarget) {
  for (TargetKind kind : kAllTargets) {
    for (int i = 0; i < kNumOps; ++i) {
      const Op op = Op(i);
      const OpSupport& s = op_support(kind, op);
      EXPECT_NE(s.note, "no decision in this target's op table")
          << "op '" << op_name(op) << "' has no row in src/runtime/op_support_" << target_kind_name(kind)
          << ".def: add TARGET_OP(" << op_name(op) << ", Kernel|Decompose|Library|Host|Unsupported, \"why\")";
      if (s.decision == OpDecision::Decompose) {
        EXPECT_NE(op_info(op).decompose, nullptr)
            << target_kind_name(kind) << ": '" << op_name(op) << "' is marked decompose but ops.def has no decomposition";
      }
      if (s.decision == OpDecision::Unsupported) {
        EXPECT_FALSE(s.note.empty()) << target_kind_name(kind) << ": '" << op_name(op) << "' is unsupported without a reason";
      }
    }
  }
}

TEST(OpSupport, NativeOpsComeFromTheTables) {
  // The CPU decomposes every high-level op but gelu (one prelude call: 1 + erf cancels).
  EXPECT_EQ(native_ops(TargetKind::Cpu), (std::set<Op>{Op::Gelu}));
  EXPECT_EQ(native_ops(TargetKind::Cuda), (std::set<Op>{Op::Gelu, Op::Silu, Op::Attention}));
  EXPECT_EQ(cpu_target().optimize_options().target.native_ops, native_ops(TargetKind::Cpu));
  EXPECT_EQ(cuda_native_ops(), native_ops(TargetKind::Cuda));
}

// What the CPU compiler did with a sample's op: the optimizer with the CPU's pipeline, then the
// compile driver's front half (decompose for fusion, schedule, Loop IR).
OpDecision observed_on_cpu(const OpSample& s, std::string* detail) {
  std::unique_ptr<Graph> g = build_sample_graph(s);
  optimize(*g, cpu_target().optimize_options());
  auto low = runtime::lower_for_target(*g, CompileOptions{}, "kiln_t_");
  const Node* survivor = nullptr;
  for (const Node* n : low->graph->node_list())
    if (n->op == s.op) survivor = n;
  if (!survivor) {
    // A target pass's rewrite into index views (split -> slices, cpu-split-to-slices) is the
    // Kernel decision: the generated kernels read the pieces through index maps.
    OptimizeOptions without_target_passes = cpu_target().optimize_options();
    without_target_passes.target_passes.clear();
    std::unique_ptr<Graph> plain = build_sample_graph(s);
    optimize(*plain, without_target_passes);
    bool survives = false;
    for (const Node* n : plain->node_list()) survives = survives || n->op == s.op;
    *detail = survives ? "rewritten by a target pass" : "rewritten away";
    return survives ? OpDecision::Kernel : OpDecision::Decompose;
  }
  const OpInfo& info = survivor->info();
  if (survivor->op == Op::Constant || info.has(kSubgraph) || info.has(kContainer) || survivor->has_string_values()) {
    *detail = "host";
    return OpDecision::Host;
  }
  for (const runtime::Step& step : low->steps)
    if (step.library && step.node == survivor) {
      *detail = "library step";
      return OpDecision::Library;
    }
  *detail = "in a generated kernel or a view";
  return OpDecision::Kernel;
}

TEST(OpSupport, CpuRowsMatchWhatTheCompilerDoes) {
  std::map<Op, std::set<OpDecision>> seen;
  std::map<Op, std::string> examples;
  for (const OpSample& s : op_samples()) {
    std::string detail;
    OpDecision d;
    try {
      d = observed_on_cpu(s, &detail);
    } catch (const Error& e) {
      ADD_FAILURE() << s.label << ": " << e.what();
      continue;
    }
    seen[s.op].insert(d);
    examples[s.op] += str(" ", s.label, "=", op_decision_name(d));
  }
  for (int i = 0; i < kNumOps; ++i) {
    const Op op = Op(i);
    if (!seen.count(op)) continue;  // the sample sweep itself checks every op has samples
    const OpDecision want = op_support(TargetKind::Cpu, op).decision;
    const std::set<OpDecision>& got = seen[op];
    // Source ops and shape_of fold into constants at these static shapes, whatever the row.
    if ((op_info(op).has(kSource) || op_info(op).has(kShapeOnly)) && got == std::set<OpDecision>{OpDecision::Decompose}) continue;
    EXPECT_TRUE(got.count(want)) << "op '" << op_name(op) << "': src/runtime/op_support_cpu.def says "
                                 << op_decision_name(want) << ", no sample does that:" << examples[op];
    // The fallbacks a row's note names: a kernel op on operands its kernel does not take (bool
    // reductions, dynamic slices, strings) and a decomposition that cannot apply run as library
    // steps or on the host; nothing else may differ from the row.
    for (OpDecision d : got) {
      bool fallback = d == OpDecision::Library || d == OpDecision::Host;
      EXPECT_TRUE(d == want || fallback)
          << "op '" << op_name(op) << "': the row says " << op_decision_name(want) << " but a sample went "
          << op_decision_name(d) << ":" << examples[op];
    }
  }
}

}  // namespace
}  // namespace kiln::testing
