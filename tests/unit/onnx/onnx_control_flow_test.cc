// ONNX If/Loop import: outer-scope names read by a branch become explicit captures (operands of
// the Kiln node, inputs of its sub-graph), and bad Loops are refused naming the node.
#include <gtest/gtest.h>

#include <cmath>

#include "unit/onnx/one_node_model.h"

using namespace kiln;
using namespace kiln::testing;

namespace {
// A branch graph returning op(x) where x is an *outer* value (not a branch input).
void branch(onnx::GraphProto* g, const std::string& name, const std::string& op) {
  g->set_name(name);
  auto* n = g->add_node();
  n->set_op_type(op);
  n->add_input("x");
  n->add_output(name + "_out");
  g->add_output()->set_name(name + "_out");
}
}  // namespace

TEST(OnnxControlFlow, IfCapturesOuterValuesExplicitly) {
  OneNode m("If", {{"c", onnx::TensorProto::BOOL, {}}, {"x", onnx::TensorProto::FLOAT, {3}}}, {"y"});
  m.node->clear_input();
  m.node->add_input("c");
  auto* t = m.node->add_attribute();
  t->set_name("then_branch");
  t->set_type(onnx::AttributeProto::GRAPH);
  branch(t->mutable_g(), "then", "Exp");
  auto* e = m.node->add_attribute();
  e->set_name("else_branch");
  e->set_type(onnx::AttributeProto::GRAPH);
  branch(e->mutable_g(), "else", "Neg");
  std::string bytes;
  ASSERT_TRUE(m.m.SerializeToString(&bytes));
  auto g = import_onnx_bytes(bytes, "if.onnx");
  const Node* if_node = nullptr;
  for (const auto& n : g->nodes())
    if (n->op == Op::If) if_node = n.get();
  ASSERT_NE(if_node, nullptr) << g->to_text();
  ASSERT_EQ(if_node->inputs.size(), 2u);  // cond and the captured x
  EXPECT_EQ(if_node->inputs[1]->name, "x");
  EXPECT_EQ(if_node->attrs.get_graph("then_branch").inputs().size(), 1u);
  HostTensor x = HostTensor::from_doubles(DType::F32, {3}, {0, 1, -2});
  auto yes = interp::run(*g, {HostTensor::scalar(DType::Bool, 1), x});
  auto no = interp::run(*g, {HostTensor::scalar(DType::Bool, 0), x});
  EXPECT_NEAR(yes[0].get_f64(1), std::exp(1.0), 1e-6);
  EXPECT_EQ(no[0].get_f64(2), 2.0);
}

TEST(OnnxControlFlow, LoopWithoutTripCountAndConditionIsRefused) {
  OneNode m("Loop", {{"", 0, {}}, {"", 0, {}}, {"v", onnx::TensorProto::FLOAT, {2}}}, {"w"});
  auto* b = m.node->add_attribute();
  b->set_name("body");
  b->set_type(onnx::AttributeProto::GRAPH);
  b->mutable_g()->set_name("body");
  std::string msg = m.import_error();
  EXPECT_NE(msg.find("node 'the_Loop' (Loop"), std::string::npos) << msg;
  EXPECT_NE(msg.find("without a trip count and without a condition"), std::string::npos) << msg;
}
