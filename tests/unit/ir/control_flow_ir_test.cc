// Sub-graph attributes and container types in the IR: the text form round-trips (nested graphs,
// seq<...>/opt<...> types), and the builder/verifier reject bad bodies naming the node. Why:
// sub-graphs are the one place the IR nests, so printer, parser and verifier must agree on it.
#include <gtest/gtest.h>

#include "kiln/error.h"
#include "kiln/graph.h"

using namespace kiln;

namespace {

TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s), Device::CPU}; }
TensorType scalar(DType d) { return TensorType{d, {}, Device::CPU}; }

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

const char* kNested = R"(graph @outer(%n: i64[], %x: f32[B, 4], %s: seq<f32[2], f32[3]>) {
  %c = constant() {value = dense<bool[]>[1]} : bool[]
  %0, %1 = loop(%n, %c, %x, %x) {body = graph @body(%i: i64[], %cond: bool[], %acc: f32[B, 4], %cap: f32[B, 4]) {
    %0 = if(%cond, %acc, %cap) {else_branch = graph @else(%a: f32[B, 4], %b: f32[B, 4]) {
      return %a
    }, then_branch = graph @then(%a: f32[B, 4], %b: f32[B, 4]) {
      %0 = add(%a, %b) : f32[B, 4]
      return %0
    }} : f32[B, 4]
    return %cond, %0, %0
  }, num_carried = 1, scan_length = [7]} : f32[B, 4], f32[7, B, 4]
  %e = sequence_at(%s) {index = 1} : f32[3]
  %o = optional(%s) : opt<seq<f32[2], f32[3]>>
  %z = optional_none() {type = "opt<f32[5]>"} : opt<f32[5]>
  return %0, %1, %e, %o, %z
}
)";

}  // namespace

TEST(ControlFlowIR, NestedSubgraphsRoundTrip) {
  auto g = parse_graph(kNested);
  verify(*g);
  EXPECT_EQ(print_graph(*g), kNested);
  auto again = parse_graph(print_graph(*g->clone()));
  EXPECT_EQ(print_graph(*again), kNested);
  EXPECT_EQ(parse_type("seq<i64>").to_string(), "seq<i64>");
  EXPECT_EQ(parse_type("opt<seq<f32[B]>>").to_string(), "opt<seq<f32[B]>>");
}

TEST(ControlFlowIR, ParseErrorsInsideSubgraphsPointAtTheLine) {
  std::string text = kNested;
  text.replace(text.find("%0 = add(%a, %b)"), 16, "%0 = add(%a, %q)");
  std::string msg = error_of([&] { parse_graph(text); });
  EXPECT_NE(msg.find("line 7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("undefined value %q"), std::string::npos) << msg;
  // Outer values are not visible in a sub-graph: captures are explicit inputs.
  text = kNested;
  text.replace(text.find("%0 = add(%a, %b)"), 16, "%0 = add(%a, %x)");
  msg = error_of([&] { parse_graph(text); });
  EXPECT_NE(msg.find("undefined value %x"), std::string::npos) << msg;
}

TEST(ControlFlowIR, BuilderRejectsBadBodies) {
  Graph g("g");
  Value* c = g.add_input("c", scalar(DType::Bool));
  Value* x = g.add_input("x", f32({4}));
  auto branch = [](TensorType in, TensorType out_like) {
    auto b = std::make_shared<Graph>("b");
    Value* v = b->add_input("v", in);
    b->set_outputs({out_like == in ? v : b->add(Op::ReduceSum, {v}, {{"axes", std::vector<int64_t>{0}}})});
    return b;
  };
  auto same = branch(f32({4}), f32({4}));
  auto reduced = branch(f32({4}), f32({}));
  std::string msg = error_of([&] {
    g.add_node(Op::If, {c, x}, {{"then_branch", GraphAttr(same)}, {"else_branch", GraphAttr(reduced)}}, "pick");
  });
  EXPECT_NE(msg.find("node 'pick' (if): branch types differ at output 0"), std::string::npos) << msg;
  msg = error_of([&] { g.add_node(Op::If, {c}, {{"then_branch", GraphAttr(same)}, {"else_branch", GraphAttr(same)}}); });
  EXPECT_NE(msg.find("then_branch takes 1 inputs, but the node passes it 0"), std::string::npos) << msg;
  // A loop body with the wrong arity, and a carried value that changes type.
  auto body = std::make_shared<Graph>("body");
  body->add_input("i", scalar(DType::I64));
  Value* cond = body->add_input("cond", scalar(DType::Bool));
  Value* acc = body->add_input("acc", f32({4}));
  body->set_outputs({cond, body->add(Op::ReduceSum, {acc}, {{"axes", std::vector<int64_t>{0}}, {"keepdim", int64_t(1)}})});
  Value* n = g.add_input("n", scalar(DType::I64));
  msg = error_of([&] { g.add_node(Op::Loop, {n, c}, {{"body", GraphAttr(body)}, {"num_carried", int64_t(0)}}, "L"); });
  EXPECT_NE(msg.find("node 'L' (loop): body takes 3 inputs, but the node passes it 2"), std::string::npos) << msg;
  msg = error_of([&] { g.add_node(Op::Loop, {n, c, x}, {{"body", GraphAttr(body)}, {"num_carried", int64_t(1)}}); });
  EXPECT_NE(msg.find("loop-carried value 0 enters as f32[4] but the body returns f32[1]"), std::string::npos) << msg;
  msg = error_of([&] { g.add_node(Op::Loop, {x, c}, {{"body", GraphAttr(body)}, {"num_carried", int64_t(0)}}); });
  EXPECT_NE(msg.find("trip_count must be a one-element i64 tensor"), std::string::npos) << msg;
}

TEST(ControlFlowIR, VerifierChecksSubgraphs) {
  auto g = parse_graph(kNested);
  // Break the then-branch in place (as a buggy pass would): its add now reads a value of
  // another graph, a dangling operand.
  const Node* loop = nullptr;
  for (const auto& n : g->nodes())
    if (n->op == Op::Loop) loop = n.get();
  ASSERT_NE(loop, nullptr);
  Graph& body = const_cast<Graph&>(loop->attrs.get_graph("body"));
  Node* if_node = body.node_list().front();
  Graph& then_g = const_cast<Graph&>(if_node->attrs.get_graph("then_branch"));
  Node* add = then_g.node_list().front();
  then_g.set_operand(add, 1, g->inputs()[1]);
  std::string msg = error_of([&] { verify(*g); });
  EXPECT_NE(msg.find("verify: node #1 (loop): sub-graph 'body': verify: node #0 (if): sub-graph 'then_branch'"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("is neither a graph input nor a node's result"), std::string::npos) << msg;
}
