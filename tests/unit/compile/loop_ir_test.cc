// Loop IR printer and verifier, dim merging, and the memory planner, without running a compiler.
#include <gtest/gtest.h>

#include "lower/fusion.h"
#include "lower/lower_group.h"
#include "lower/memory_plan.h"
#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

using namespace kiln::lower;

TEST(LoopIr, VerifierRejectsUndefinedNamesAndInputStores) {
  LoopKernel k;
  k.name = "k";
  k.params = {{"x", DType::F32, false, SymInt(4)}, {"y", DType::F32, true, SymInt(4)}};
  std::vector<Stmt> body;
  body.push_back(Stmt::store(1, SymInt::symbol("i0"), Scalar::load(DType::F32, 0, SymInt::symbol("i0"))));
  k.body.push_back(Stmt::for_loop("i0", SymInt(4), std::move(body)));
  EXPECT_NO_THROW(verify_kernel(k));
  EXPECT_NE(print_kernel(k).find("p1[i0] = p0[i0]"), std::string::npos) << print_kernel(k);

  LoopKernel bad = k;
  bad.body[0].body[0].param = 0;
  EXPECT_THROW(verify_kernel(bad), Error);  // store to an input
  LoopKernel unbound = k;
  unbound.body[0].body[0].index = SymInt::symbol("j");
  EXPECT_THROW(verify_kernel(unbound), Error);  // index uses an unknown variable
  LoopKernel undefined = k;
  undefined.body[0].body[0].value = Scalar::ref(DType::F32, "t9");
  EXPECT_THROW(verify_kernel(undefined), Error);
}

Schedule schedule_of(const Graph& g) {
  ScheduleOptions o;
  o.can_generate = [](const Node& n) { return n.info().has(kElementwise) || n.info().has(kReduction); };
  return schedule(g, o);
}

TEST(LoopIr, ContiguousDimsMergeIntoOneVectorLoop) {
  Graph g("merge");
  Value* x = g.add_input("x", f32({6, 7, 8}));
  g.set_outputs({g.add(Op::Exp, {x})});
  Schedule s = schedule_of(g);
  ASSERT_EQ(s.groups.size(), 1u);
  LoweredKernel k = lower_group(s, s.groups[0], LowerContext{"k", {}, 16});
  ASSERT_EQ(k.kernel.body.size(), 1u);
  const Stmt& loop = k.kernel.body[0];
  EXPECT_EQ(loop.extent, SymInt(336));
  EXPECT_TRUE(loop.parallel && loop.vectorize) << print_kernel(k.kernel);
}

TEST(LoopIr, BroadcastStopsMergingAtTheBroadcastDim) {
  Graph g("bcast");
  Value* x = g.add_input("x", f32({SymInt::symbol("N"), 16}));
  Value* b = g.add_input("b", f32({16}));
  g.set_outputs({g.add(Op::Add, {x, b})});
  Schedule s = schedule_of(g);
  LoweredKernel k = lower_group(s, s.groups[0], LowerContext{"k", {"N"}, 16});
  std::string text = print_kernel(k.kernel);
  EXPECT_NE(text.find("for i0 in 0..s0 parallel"), std::string::npos) << text;
  EXPECT_NE(text.find("for i1 in 0..16 vector"), std::string::npos) << text;
}

TEST(LoopIr, SoftmaxIsOneKernelWithThreePasses) {
  Graph g("softmax");
  Value* x = g.add_input("x", f32({4, 9}));
  Value* m = g.add(Op::ReduceMax, {x}, {{"axes", std::vector<int64_t>{1}}, {"keepdim", int64_t(1)}});
  Value* e = g.add(Op::Exp, {g.add(Op::Sub, {x, m})});
  Value* sum = g.add(Op::ReduceSum, {e}, {{"axes", std::vector<int64_t>{1}}, {"keepdim", int64_t(1)}});
  g.set_outputs({g.add(Op::Div, {e, sum})});
  Schedule s = schedule_of(g);
  ASSERT_EQ(s.groups.size(), 1u) << s.explain();
  LoweredKernel k = lower_group(s, s.groups[0], LowerContext{"k", {}, 16});
  const Stmt& rows = k.kernel.body.at(0);
  int inner_loops = 0;
  for (const Stmt& st : rows.body) inner_loops += st.kind == Stmt::kFor;
  EXPECT_EQ(inner_loops, 3) << print_kernel(k.kernel);  // max, sum, write
  EXPECT_EQ(k.param_values.size(), 2u);
}

TEST(MemoryPlan, DisjointLifetimesShareBytes) {
  std::vector<BufferRequest> reqs = {{"a", 1000, 0, 1}, {"b", 1000, 1, 2}, {"c", 1000, 2, 3}, {"d", 500, 3, 4}};
  MemoryPlan p = plan_memory(reqs);
  EXPECT_EQ(p.naive_bytes, 1024 + 1024 + 1024 + 512);
  EXPECT_EQ(p.arena_bytes, 2048);  // a and c share; b and d share
  for (size_t i = 0; i < reqs.size(); ++i)
    for (size_t j = i + 1; j < reqs.size(); ++j) {
      bool live_together = !(reqs[i].last_step < reqs[j].first_step || reqs[j].last_step < reqs[i].first_step);
      bool overlap = p.offsets[i] < p.offsets[j] + reqs[j].bytes && p.offsets[j] < p.offsets[i] + reqs[i].bytes;
      EXPECT_FALSE(live_together && overlap) << reqs[i].label << " and " << reqs[j].label;
    }
}

}  // namespace
}  // namespace kiln::testing
