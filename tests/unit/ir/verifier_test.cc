// The verifier accepts every graph the builders make and rejects graphs broken by in-place
// mutation (the way a buggy pass would break them), naming the node and the rule.
#include <gtest/gtest.h>

#include "kiln/error.h"
#include "kiln/graph.h"

using namespace kiln;

namespace {

TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s), Device::CPU}; }
using Ints = std::vector<int64_t>;

std::string verify_error(const Graph& g) {
  try {
    verify(g);
  } catch (const Error& e) {
    return e.what();
  }
  return "(verified)";
}

#define EXPECT_VERIFY_ERROR(g, text)                              \
  do {                                                            \
    std::string msg_ = verify_error(g);                           \
    EXPECT_NE(msg_.find(text), std::string::npos) << msg_;        \
    EXPECT_EQ(msg_.rfind("verify: ", 0), 0u) << msg_;             \
  } while (0)

// x -> exp -> neg -> reduce_sum, with the reduction as the output.
struct Chain {
  Graph g{"chain"};
  Value* x;
  Value* e;
  Value* n;
  Value* r;
  Chain() {
    x = g.add_input("x", f32({SymInt::symbol("B"), 4}));
    e = g.add(Op::Exp, {x});
    n = g.add(Op::Neg, {e});
    r = g.add(Op::ReduceSum, {n}, {{"axes", Ints{1}}});
    g.set_outputs({r});
  }
};

}  // namespace

TEST(Verifier, AcceptsBuiltParsedAndClonedGraphs) {
  Chain c;
  EXPECT_EQ(verify_error(c.g), "(verified)");
  EXPECT_EQ(verify_error(*c.g.clone()), "(verified)");
  EXPECT_EQ(verify_error(*parse_graph(print_graph(c.g))), "(verified)");
  // Re-inference uses scratch guards: verifying never changes the graph.
  Graph g;
  Value* a = g.add_input("a", f32({SymInt::symbol("T")}));
  g.set_outputs({g.add(Op::Add, {a, g.add_input("b", f32({3}))})});
  size_t guards = g.guards().size();
  verify(g);
  EXPECT_EQ(g.guards().size(), guards);
}

TEST(Verifier, OperandUsedBeforeItsDefinition) {
  Chain c;
  c.g.set_operand(c.e->producer, 0, c.n);  // exp now reads neg, which reads exp: a cycle
  EXPECT_EQ(verify_error(c.g), "verify: node #0 (exp): operand 0 (value #2) closes a cycle through node #1 (neg)");

  Chain d;
  d.g.set_operand(d.e->producer, 0, d.r);  // reads a later node that does not depend on it
  Value* later = d.g.add(Op::Tanh, {d.x});
  d.g.set_operand(d.e->producer, 0, later);
  EXPECT_EQ(verify_error(d.g),
            "verify: node #0 (exp): operand 0 (value #4) is used before it is defined (by node #3 (tanh), later "
            "in the node list)");
  d.g.topological_sort();  // the fix the message suggests: reordering makes it valid
  EXPECT_EQ(verify_error(d.g), "(verified)");
}

TEST(Verifier, DanglingValues) {
  Chain c;
  Graph other;
  Value* foreign_input = other.add_input("y", f32({SymInt::symbol("B"), 4}));
  Value* foreign = other.add(Op::Exp, {foreign_input});
  c.g.set_operand(c.n->producer, 0, foreign);
  EXPECT_VERIFY_ERROR(c.g, "node #1 (neg): operand 0 (value #1) is dangling: its producer node #0 (exp) is not in the graph");
  c.g.set_operand(c.n->producer, 0, foreign_input);
  EXPECT_VERIFY_ERROR(c.g, "node #1 (neg): operand 0 (%y) is neither a graph input nor a node's result");
}

TEST(Verifier, UseListsMatchOperandSlots) {
  {
    Chain c;
    c.e->uses.clear();
    EXPECT_VERIFY_ERROR(c.g, "node #1 (neg): operand 0 (value #1) appears 0 times in that value's use list");
  }
  {
    Chain c;
    c.e->uses.push_back(c.e->uses[0]);
    EXPECT_VERIFY_ERROR(c.g, "appears 2 times in that value's use list; expected once");
  }
  {
    Chain c;
    c.x->uses.push_back(Use{c.r->producer, 0});
    EXPECT_VERIFY_ERROR(c.g, "node #2 (reduce_sum): %x lists a use as operand 0 of this node, which reads something else");
  }
  {
    Chain c;
    Graph other;
    Value* y = other.add_input("y", f32({4}));
    Value* stranger = other.add(Op::Neg, {y});
    c.x->uses.push_back(Use{stranger->producer, 0});
    EXPECT_VERIFY_ERROR(c.g, "graph 'chain': %x lists a use by a node that is not in the graph");
  }
}

TEST(Verifier, OperandCountsWithinTheOpTable) {
  Chain c;
  Node* neg = c.n->producer;
  neg->inputs.push_back(c.x);
  c.x->uses.push_back(Use{neg, 1});
  EXPECT_VERIFY_ERROR(c.g, "node #1 (neg): has 2 operands; 'neg' takes 1");

  Graph g;
  Value* a = g.add_input("a", f32({2}));
  Value* s = g.add(Op::Concat, {a, a}, {{"axis", int64_t(0)}});
  g.set_outputs({s});
  s->producer->inputs.clear();
  a->uses.clear();
  EXPECT_VERIFY_ERROR(g, "has 0 operands; 'concat' takes at least 1");
}

TEST(Verifier, AttributesCompleteAndOfTheDeclaredKind) {
  {
    Chain c;
    c.r->producer->attrs.erase("keepdim");
    EXPECT_VERIFY_ERROR(c.g, "node #2 (reduce_sum): lacks attribute 'keepdim' (int)");
  }
  {
    Chain c;
    c.r->producer->attrs.set("bogus", int64_t(1));
    EXPECT_VERIFY_ERROR(c.g, "node #2 (reduce_sum): has attribute 'bogus' that 'reduce_sum' does not declare");
  }
  {
    Chain c;
    c.r->producer->attrs.set("keepdim", 1.0);
    EXPECT_VERIFY_ERROR(c.g, "node #2 (reduce_sum): attribute 'keepdim' is float, the op table says int");
  }
  {
    Chain c;  // a value the shape rule rejects outright
    c.r->producer->attrs.set("axes", Ints{7});
    EXPECT_VERIFY_ERROR(c.g, "node #2 (reduce_sum): its shape rule rejects the operands");
  }
}

TEST(Verifier, ResultTypesEqualReinference) {
  {
    Chain c;
    c.n->type = f32({SymInt::symbol("B"), 5});
    // neg itself is now wrong; reported at the first node whose check fails.
    EXPECT_VERIFY_ERROR(c.g, "node #1 (neg): result 0 (value #2) has type f32[B, 5]; re-inference gives f32[B, 4]");
  }
  {
    Chain c;  // changing an attribute without updating the result type
    c.r->producer->attrs.set("keepdim", int64_t(1));
    EXPECT_VERIFY_ERROR(c.g, "has type f32[B]; re-inference gives f32[B, 1]");
  }
  {
    Chain c;
    c.e->type.dtype = DType::F16;  // exp's result, and so neg's operand, changes dtype
    EXPECT_VERIFY_ERROR(c.g, "node #0 (exp): result 0 (value #1) has type f16[B, 4]");
  }
  {
    Chain c;
    c.e->output_index = 1;
    EXPECT_VERIFY_ERROR(c.g, "does not point back to this node as result 0");
  }
}

TEST(Verifier, GraphOutputsAndInputs) {
  {
    Chain c;
    Graph other;
    c.g.set_outputs({c.r, other.add_input("z", f32({1}))});
    EXPECT_VERIFY_ERROR(c.g, "graph 'chain': output 1 (%z) is not defined in the graph");
  }
  {
    Graph g;
    Value* a = g.add_input("a", f32({2}));
    Value* b = g.add_input("b", f32({2}));
    g.set_outputs({g.add(Op::Add, {a, b})});
    b->name = "a";
    EXPECT_VERIFY_ERROR(g, "graph 'main': two inputs are named 'a'");
  }
}

TEST(Verifier, NamedNodesAreNamedInErrors) {
  Graph g;
  Value* a = g.add_input("a", f32({2}));
  Value* s = g.add(Op::Add, {a, a}, {}, "/block/Add");
  s->name = "sum";
  g.set_outputs({s});
  s->type = f32({3});
  EXPECT_EQ(verify_error(g),
            "verify: node '/block/Add' (add): result 0 (%sum) has type f32[3]; re-inference gives f32[2]");
}
