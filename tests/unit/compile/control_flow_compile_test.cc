// Control flow and containers through kiln::compile: they run as host steps (the interpreter runs
// the node and its sub-graphs) between generated kernels, with symbolic dims. Why: a compiled
// graph around a loop must give the interpreter's results, containers included.
#include <gtest/gtest.h>

#include "kiln/graph.h"
#include "unit/compile/compile_test_util.h"

using namespace kiln;
using namespace kiln::testing;

TEST(ControlFlowCompile, LoopBetweenFusedKernelsWithSymbolicDims) {
  SymInt B = SymInt::symbol("B");
  auto body = std::make_shared<Graph>("body");
  body->add_input("i", TensorType{DType::I64, {}, Device::CPU});
  Value* cond = body->add_input("cond", TensorType{DType::Bool, {}, Device::CPU});
  Value* acc = body->add_input("acc", TensorType{DType::F32, {B, 3}, Device::CPU});
  Value* w = body->add_input("w", TensorType{DType::F32, {B, 3}, Device::CPU});
  Value* next = body->add(Op::Tanh, {body->add(Op::Add, {acc, w})});
  body->set_outputs({cond, next, next});
  Graph g("loop_in_chain");
  Value* x = g.add_input("x", TensorType{DType::F32, {B, 3}, Device::CPU});
  Value* ex = g.add(Op::Exp, {g.add(Op::Neg, {x})});
  auto outs = g.add_node(Op::Loop, {g.scalar(DType::I64, 4), g.scalar(DType::Bool, 1), ex, x},
                         {{"body", GraphAttr(body)}, {"num_carried", int64_t(1)}, {"scan_length", Shape{4}}});
  Value* seq = g.add(Op::SequenceConstruct, {outs[0], x});
  Value* back = g.add(Op::SequenceAt, {seq}, {{"index", int64_t(0)}});
  g.set_outputs({g.add(Op::Mul, {back, g.scalar(DType::F32, 2)}), outs[1], seq});
  for (int64_t b : {1, 5}) {
    std::vector<HostTensor> in = {HostTensor::random(DType::F32, {b, 3}, uint64_t(b))};
    auto exe = compile(g, test_options());
    std::vector<HostTensor> want = interp::run(g, in);
    std::vector<HostTensor> got = exe->run(in);
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(compare_tensors(got[0], want[0]), "");
    EXPECT_EQ(compare_tensors(got[1], want[1]), "");
    ASSERT_EQ(got[2].kind(), ValueKind::Sequence);
    EXPECT_EQ(compare_tensors(got[2].items()[0], want[2].items()[0]), "");
    EXPECT_EQ(compare_tensors(got[2].items()[1], want[2].items()[1]), "");
  }
}
