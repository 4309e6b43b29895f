// The program-level IR (lower/program.h) as the shared lowering builds it and print_program
// writes it. Why: `kiln dump` shows it to users and both targets run it; its steps, their buffers
// and the slots must say what the run does.
#include <gtest/gtest.h>

#include "kiln/graph.h"
#include "lower/program.h"
#include "runtime/executable.h"

namespace kiln::testing {
namespace {

Shape static_shape(const std::vector<int64_t>& dims) {
  Shape s;
  for (int64_t d : dims) s.push_back(SymInt(d));
  return s;
}

TEST(Program, StepsBuffersAndSlotsOfAMatmulBetweenKernels) {
  Graph g("mlp");
  Value* x = g.add_input("x", TensorType{DType::F32, static_shape({3, 5}), Device::CPU});
  Value* w = g.add_input("w", TensorType{DType::F32, static_shape({5, 7}), Device::CPU});
  Value* h = g.add(Op::Relu, {x});
  Value* y = g.add(Op::MatMul, {h, w});
  Value* z = g.add(Op::Exp, {y});
  z->name = "z";
  g.set_outputs({z});
  auto low = runtime::lower_for_target(g, CompileOptions{}, "kiln_p_");
  const lower::Program& p = *low;
  ASSERT_EQ(p.steps.size(), 3u);
  EXPECT_FALSE(p.steps[0].library);
  EXPECT_TRUE(p.steps[1].library);
  EXPECT_FALSE(p.steps[1].host);
  EXPECT_EQ(p.steps[1].node->op, Op::MatMul);
  // The matmul reads the relu kernel's output and w, and writes what the exp kernel reads.
  auto [reads, writes] = p.step_buffers(1);
  ASSERT_EQ(reads.size(), 2u);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(p.step_buffers(0).second, std::vector<const Value*>{reads[0]});
  EXPECT_EQ(p.step_buffers(2).first, std::vector<const Value*>{writes[0]});
  EXPECT_EQ(p.slots.at(p.graph->inputs()[0]).kind, lower::BufferSlot::kInput);
  EXPECT_EQ(p.slots.at(p.graph->outputs()[0]).kind, lower::BufferSlot::kOutput);
  EXPECT_EQ(p.slots.at(reads[0]).kind, lower::BufferSlot::kHeld);  // a library call reads it

  const std::string text = lower::print_program(p);
  EXPECT_NE(text.find("program mlp: 3 steps (2 kernels, 1 library calls, 0 host steps)"), std::string::npos) << text;
  EXPECT_NE(text.find("  1  library  matmul  reads "), std::string::npos) << text;
  EXPECT_NE(text.find("writes %z  (exp)"), std::string::npos) << text;
  EXPECT_NE(text.find("  %x  input 0  f32[3, 5]"), std::string::npos) << text;
  EXPECT_NE(text.find("  %z  output 0  f32[3, 7]"), std::string::npos) << text;
}

TEST(Program, NodesOnStringsAreHostStepsOnTheCpu) {
  Graph g("strings");
  Value* s = g.add_input("s", TensorType{DType::Str, static_shape({4}), Device::CPU});
  Value* t = g.add(Op::Reshape, {s}, Attrs{{"shape", Shape{SymInt(2), SymInt(2)}}});
  Value* e = g.add(Op::Eq, {t, t});
  g.set_outputs({e});
  auto low = runtime::lower_for_target(g, CompileOptions{}, "kiln_p_");
  bool any_host = false;
  for (const lower::ProgramStep& step : low->steps) any_host |= step.host;
  EXPECT_TRUE(any_host) << lower::print_program(*low);
  EXPECT_NE(lower::print_program(*low).find("host steps)"), std::string::npos);
}

}  // namespace
}  // namespace kiln::testing
