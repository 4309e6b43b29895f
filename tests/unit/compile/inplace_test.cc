// In-place reuse in the memory planner: the Loop IR legality check, the planner's merging of
// in-place chains, and compiled graphs whose intermediates are overwritten in place, compared
// with the interpreter at odd sizes (and a case where in-place would be wrong and is refused).
#include <gtest/gtest.h>

#include <regex>

#include "lower/inplace.h"
#include "lower/memory_plan.h"
#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

using namespace kiln::lower;

LoopKernel two_param_kernel(Index load_index, Index store_index) {
  LoopKernel k;
  k.name = "k";
  k.params = {{"x", DType::F32, false, SymInt(12)}, {"y", DType::F32, true, SymInt(12)}};
  std::vector<Stmt> inner;
  inner.push_back(Stmt::let("t0", Scalar::apply(Op::Exp, DType::F32, {}, {Scalar::load(DType::F32, 0, load_index)})));
  inner.push_back(Stmt::store(1, store_index, Scalar::ref(DType::F32, "t0")));
  std::vector<Stmt> outer;
  outer.push_back(Stmt::for_loop("i1", SymInt(4), std::move(inner)));
  k.body.push_back(Stmt::for_loop("i0", SymInt(3), std::move(outer)));
  return k;
}

TEST(InPlace, LegalOnlyWhenEveryAccessUsesTheSameIndexAndReadsComeFirst) {
  SymInt i0 = SymInt::symbol("i0"), i1 = SymInt::symbol("i1");
  EXPECT_TRUE(can_write_in_place(two_param_kernel(i0 * 4 + i1, i0 * 4 + i1), 0, 1));
  EXPECT_FALSE(can_write_in_place(two_param_kernel(i1 * 3 + i0, i0 * 4 + i1), 0, 1));  // transposed read
  EXPECT_FALSE(can_write_in_place(two_param_kernel(i0 * 4 + i1, i0 * 4 + i1), 1, 0));  // wrong direction
  // A second read of x after y was stored (another output computed later) would see y's value.
  LoopKernel late = two_param_kernel(i0 * 4 + i1, i0 * 4 + i1);
  late.params.push_back({"z", DType::F32, true, SymInt(12)});
  late.body[0].body[0].body.push_back(Stmt::store(2, i0 * 4 + i1, Scalar::load(DType::F32, 0, i0 * 4 + i1)));
  EXPECT_FALSE(can_write_in_place(late, 0, 1));
  EXPECT_TRUE(can_write_in_place(late, 0, 2)) << "z is stored last, after every read of x";
}

TEST(InPlace, PlannerGivesAChainOneOffsetAndReportsPeakVsNaive) {
  // a (steps 0..1) -> b in place (1..2) -> c in place (2..3); d overlaps all of them.
  std::vector<BufferRequest> reqs = {{"a", 1000, 0, 1}, {"b", 1000, 1, 2, 0}, {"c", 1000, 2, 3, 1}, {"d", 500, 0, 3}};
  MemoryPlan plan = plan_memory(reqs);
  EXPECT_EQ(plan.offsets[0], plan.offsets[1]);
  EXPECT_EQ(plan.offsets[1], plan.offsets[2]);
  EXPECT_NE(plan.offsets[3], plan.offsets[0]);
  EXPECT_EQ(plan.in_place, 2);
  EXPECT_EQ(plan.arena_bytes, 1024 + 512);
  EXPECT_EQ(plan.naive_bytes, 3 * 1024 + 512);
  EXPECT_NE(plan.to_string(reqs).find("(in place of a)"), std::string::npos);
  // Without in-place, b overlaps a at step 1 and c overlaps b at step 2: two slots of 1000.
  for (auto& r : reqs) r.in_place_of = -1;
  EXPECT_EQ(plan_memory(reqs).arena_bytes, 2 * 1024 + 512);
}

int in_place_count(const Executable& exe) {
  std::smatch m;
  std::string text = exe.explain();
  if (!std::regex_search(text, m, std::regex("; (\\d+) written in place"))) return -1;
  return std::stoi(m[1]);
}

TEST(InPlace, UnfusedChainOverwritesItsDyingIntermediatesAndMatchesTheInterpreter) {
  Graph g("chain");
  Value* x = g.add_input("x", f32({37, 29}));
  Value* y = g.add(Op::Exp, {g.add(Op::Mul, {x, g.scalar(DType::F32, 0.25)})});
  y = g.add(Op::Sigmoid, {g.add(Op::Neg, {y})});
  g.set_outputs({g.add(Op::Add, {y, x})});
  CompileOptions opt = test_options();
  opt.fuse = false;  // one kernel per op: every intermediate is an arena buffer
  auto exe = compile_and_check(g, {HostTensor::random(DType::F32, {37, 29}, 41)}, "unfused chain", opt);
  // mul -> a; exp a -> b, neg b -> c, sigmoid c -> d each overwrite their dying input; add writes
  // the graph output (never in the arena).
  EXPECT_EQ(in_place_count(*exe), 3) << exe->explain().substr(0, 4000);
  EXPECT_NE(exe->source().find("float* p1 = "), std::string::npos) << "in-place params must drop __restrict";
}

TEST(InPlace, TransposedReadIsNotOverwrittenInPlace) {
  Graph g("transpose");
  Value* x = g.add_input("x", f32({19, 19}));
  Value* e = g.add(Op::Exp, {x});
  Value* t = g.add(Op::Permute, {e}, {{"perm", std::vector<int64_t>{1, 0}}});
  Value* s = g.add(Op::Neg, {g.add(Op::Mul, {t, g.scalar(DType::F32, 2.0)})});
  g.set_outputs({g.add(Op::Add, {s, x})});
  CompileOptions opt = test_options();
  opt.fuse = false;
  auto exe = compile_and_check(g, {HostTensor::random(DType::F32, {19, 19}, 42)}, "transposed", opt);
  // exp -> e; mul reads e transposed: not in place; neg overwrites mul's result: in place.
  EXPECT_EQ(in_place_count(*exe), 1) << exe->explain().substr(0, 4000);
}

}  // namespace
}  // namespace kiln::testing
