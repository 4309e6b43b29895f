// Graph::to_dot writes Graphviz text: one box per input and node, an edge per operand, and the
// graph outputs, with names escaped so ONNX names cannot break the file.
#include <gtest/gtest.h>

#include "kiln/graph.h"

using namespace kiln;

namespace {
TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s), Device::CPU}; }
size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}
}  // namespace

TEST(Dot, NodesEdgesAndOutputs) {
  Graph g("net");
  Value* x = g.add_input("x", f32({SymInt::symbol("B"), 4}));
  Value* w = g.add_input("w", f32({4, 3}));
  Value* h = g.add(Op::MatMul, {x, w});
  auto parts = g.add_node(Op::Split, {h}, {{"axis", int64_t(1)}, {"sizes", std::vector<int64_t>{1, 2}}});
  Value* r = g.add(Op::Relu, {parts[1]});
  g.set_outputs({r, parts[0]});
  std::string dot = g.to_dot();

  EXPECT_EQ(dot.rfind("digraph \"net\" {\n", 0), 0u) << dot;
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
  EXPECT_NE(dot.find("v0 [shape=box, style=rounded, label=\"x\\nf32[B, 4]\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("v1 [shape=box, style=rounded, label=\"w\\nf32[4, 3]\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n0 [shape=box, label=\"matmul\\nf32[B, 3]\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n1 [shape=box, label=\"split\\nf32[B, 1]\\nf32[B, 2]\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("v0 -> n0;"), std::string::npos);
  EXPECT_NE(dot.find("v1 -> n0;"), std::string::npos);
  EXPECT_NE(dot.find("n0 -> n1;"), std::string::npos);
  EXPECT_NE(dot.find("n1 -> n2;"), std::string::npos);
  EXPECT_NE(dot.find("n2 -> out0;"), std::string::npos);
  EXPECT_NE(dot.find("n1 -> out1;"), std::string::npos);
  EXPECT_EQ(count(dot, " -> "), 6u) << dot;  // 4 operand edges + 2 outputs
  EXPECT_EQ(count(dot, "[shape=box"), 2u + 3u + 2u);  // inputs, nodes, outputs
}

TEST(Dot, InputFeedingAnOutputDirectlyAndEscapedNames) {
  Graph g("a \"quoted\" graph");
  Value* x = g.add_input("in\\put\"0\"", f32({2}));
  g.set_outputs({x});
  std::string dot = g.to_dot();
  EXPECT_EQ(dot.rfind("digraph \"a \\\"quoted\\\" graph\" {", 0), 0u) << dot;
  EXPECT_NE(dot.find("label=\"in\\\\put\\\"0\\\"\\nf32[2]\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("v0 -> out0;"), std::string::npos) << dot;
}
