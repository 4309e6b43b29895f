// kiln::Target and compile_for (include/kiln/target.h): the one way in for every tool. Why: the
// CLI, the benchmarks and kiln dump rely on it to optimise with the target's own pipeline and
// compile with the target's compiler; these tests pin what each target's pipeline does.
#include <gtest/gtest.h>

#include "unit/compile/compile_test_util.h"
#include "kiln/error.h"
#include "kiln/interp.h"
#include "kiln/target.h"

namespace kiln::testing {
namespace {

Shape dims(std::initializer_list<int64_t> d) {
  Shape s;
  for (int64_t v : d) s.push_back(SymInt(v));
  return s;
}

// softmax(x) * gelu(x) + the two halves of a split, at odd sizes.
std::unique_ptr<Graph> mixed_graph() {
  auto g = std::make_unique<Graph>("mixed");
  Value* x = g->add_input("x", TensorType{DType::F32, dims({3, 10}), Device::CPU});
  std::vector<Value*> halves = g->add_node(Op::Split, {x}, {{"axis", int64_t(1)}, {"sizes", std::vector<int64_t>{5, 5}}});
  Value* s = g->add(Op::Softmax, {halves[0]});
  Value* y = g->add(Op::Add, {g->add(Op::Mul, {s, g->add(Op::Gelu, {halves[1]})}), halves[1]});
  g->set_outputs({y});
  return g;
}

TEST(Target, CompileForOnTheCpuMatchesTheInterpreterAndReportsTheOptimizer) {
  std::unique_ptr<Graph> g = mixed_graph();
  OptimizeReport report;
  CompileForOptions how;
  how.report = &report;
  auto exe = compile_for(*g, cpu_target(), test_options(), how);
  ASSERT_NE(report.optimized, nullptr);
  EXPECT_GT(report.pass_stats.runs.size(), 0u);
  for (const auto& n : report.optimized->nodes()) {
    EXPECT_NE(n->op, Op::Softmax) << "the CPU decomposes softmax";
    EXPECT_NE(n->op, Op::Split) << "cpu-split-to-slices: the halves are slices the kernels read through";
  }
  ASSERT_EQ(cpu_target().optimize_options().target_passes.size(), 1u);
  EXPECT_EQ(cpu_target().optimize_options().target_passes[0].name, "cpu-split-to-slices");
  EXPECT_EQ(exe->stats().library_calls, 0) << "no copy of the split's pieces";
  for (uint64_t seed : {1u, 2u}) {
    std::vector<HostTensor> in = {HostTensor::random(DType::F32, {3, 10}, seed, -3, 3)};
    EXPECT_EQ(compare_tensors(exe->run(in).at(0), interp::run(*g, in).at(0)), "");
  }
  // Without the optimizer the graph reaches the compiler as given.
  OptimizeReport raw;
  how.optimize = false;
  how.report = &raw;
  compile_for(*g, cpu_target(), test_options(), how);
  EXPECT_EQ(print_graph(*raw.optimized), print_graph(*g));
  EXPECT_TRUE(raw.pass_stats.runs.empty());
}

TEST(Target, TheCudaPipelineKeepsItsNativeOpsAndEndsWithItsGraphPreparation) {
  std::unique_ptr<Target> cuda = cuda_target();
  EXPECT_EQ(cuda->kind(), TargetKind::Cuda);
  EXPECT_EQ(cuda->name(), "cuda");
  OptimizeOptions o = cuda->optimize_options();
  EXPECT_EQ(o.target.native_ops, (std::set<Op>{Op::Attention, Op::Gelu, Op::Silu}));
  // The graph preparation, then folding the constants it wrote (weight layouts).
  ASSERT_EQ(o.target_passes.size(), 2u);
  EXPECT_EQ(o.target_passes[0].name, "cuda-prepare-graph");
  EXPECT_EQ(o.target_passes[1].name, "cuda-fold-constants");
  std::unique_ptr<Graph> g = mixed_graph();
  PassStats stats = optimize(*g, o);
  bool ran = false;
  for (const PassRun& r : stats.runs) ran |= r.pass == "cuda-prepare-graph" && r.stage == "target" && r.changed;
  EXPECT_TRUE(ran) << stats.to_string();
  int gelu = 0;
  for (const auto& n : g->nodes()) {
    EXPECT_NE(n->op, Op::Split) << "split becomes slices for the GPU";
    EXPECT_NE(n->op, Op::Softmax);
    gelu += n->op == Op::Gelu;
  }
  EXPECT_EQ(gelu, 1) << "gelu stays whole for the CUDA prelude";
  // The rewrite keeps what the graph computes.
  std::vector<HostTensor> in = {HostTensor::random(DType::F32, {3, 10}, 7, -3, 3)};
  EXPECT_EQ(compare_tensors(interp::run(*g, in).at(0), interp::run(*mixed_graph(), in).at(0)), "");
  CudaCompileOptions no_fused;
  no_fused.fused_attention = false;
  EXPECT_EQ(cuda_target(no_fused)->optimize_options().target.native_ops, (std::set<Op>{Op::Gelu, Op::Silu}));
  CudaCompileOptions own_depthwise;
  own_depthwise.depthwise_kernel = true;  // Kiln's depthwise kernels: channels-last where it pays
  const OptimizeOptions with_own = cuda_target(own_depthwise)->optimize_options();
  ASSERT_EQ(with_own.target_passes.size(), 3u);
  EXPECT_EQ(with_own.target_passes[1].name, "cuda-channels-last");
}

TEST(Target, ATargetPassRunsInsideThePassManager) {
  OptimizeOptions o;
  o.verify_each = true;
  int runs = 0;
  o.target_passes.push_back({"count-nodes", "a test", [&runs](Graph&) { return ++runs, false; }});
  std::unique_ptr<Graph> g = mixed_graph();
  PassStats stats = optimize(*g, o);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(stats.runs.at(stats.runs.size() - 2).pass, "count-nodes");  // then dce
  EXPECT_EQ(stats.runs.back().stage, "target");
  // A failing target pass is named like any other.
  o.target_passes[0] = {"fail", "a test", [](Graph&) -> bool { throw Error("no"); }};
  try {
    optimize(*g, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pass 'fail' (stage 'target')"), std::string::npos) << e.what();
  }
}

TEST(Target, NamesAndErrors) {
  EXPECT_EQ(&target_named("cpu"), &cpu_target());
  EXPECT_EQ(cpu_target().unavailable_reason(), "");
  EXPECT_NE(cpu_target().description().find("cpu: "), std::string::npos);
  try {
    target_named("tpu");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'tpu'"), std::string::npos) << e.what();
  }
  if (!cuda_target()->unavailable_reason().empty()) {
    try {
      target_named("cuda");
      FAIL() << "expected an error without a GPU";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--device cuda: "), std::string::npos) << e.what();
    }
    std::unique_ptr<Graph> g = mixed_graph();
    EXPECT_THROW(compile_for(*g, *cuda_target()), Error);
  }
}

}  // namespace
}  // namespace kiln::testing
