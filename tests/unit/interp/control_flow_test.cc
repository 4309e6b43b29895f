// If, Loop and Scan in the reference interpreter (and through kiln::optimize), and the sequence
// and optional ops, on random inputs against values computed here. Why: control flow is checked
// against its plain definition: branches, carried values, scan outputs, early exit, zero trips.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/error.h"
#include "kiln/graph.h"
#include "kiln/interp.h"
#include "kiln/passes.h"

using namespace kiln;

namespace {

TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s), Device::CPU}; }
TensorType scalar(DType d) { return TensorType{d, {}, Device::CPU}; }
HostTensor flag(bool b) { return HostTensor::scalar(DType::Bool, b); }
HostTensor count(int64_t n) { return HostTensor::scalar(DType::I64, double(n)); }

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

// then: exp(x) * y, else: -x; x and y are captures.
std::unique_ptr<Graph> if_graph() {
  auto then_g = std::make_shared<Graph>("then");
  Value* tx = then_g->add_input("x", f32({3}));
  Value* ty = then_g->add_input("y", f32({3}));
  then_g->set_outputs({then_g->add(Op::Mul, {then_g->add(Op::Exp, {tx}), ty})});
  auto else_g = std::make_shared<Graph>("else");
  Value* ex = else_g->add_input("x", f32({3}));
  else_g->add_input("y", f32({3}));
  else_g->set_outputs({else_g->add(Op::Neg, {ex})});
  auto g = std::make_unique<Graph>("branch");
  Value* c = g->add_input("c", scalar(DType::Bool));
  Value* x = g->add_input("x", f32({3}));
  Value* y = g->add_input("y", f32({3}));
  g->set_outputs(g->add_node(Op::If, {c, x, y}, {{"then_branch", GraphAttr(then_g)}, {"else_branch", GraphAttr(else_g)}}));
  return g;
}

// sum_{i < n} (acc + x * i): carried acc (f32[4]), capture x, scan output acc after each step.
std::unique_ptr<Graph> loop_graph(int64_t scan_length, bool stop_after_two = false) {
  auto body = std::make_shared<Graph>("body");
  Value* i = body->add_input("i", scalar(DType::I64));
  Value* cond = body->add_input("cond", scalar(DType::Bool));
  Value* acc = body->add_input("acc", f32({4}));
  Value* x = body->add_input("x", f32({4}));
  Value* fi = body->add(Op::Cast, {i}, {{"dtype", DType::F32}});
  Value* next = body->add(Op::Add, {acc, body->add(Op::Mul, {x, fi})});
  Value* keep = stop_after_two ? body->add(Op::Lt, {i, body->scalar(DType::I64, 1)}) : cond;
  body->set_outputs({keep, next, next});
  auto g = std::make_unique<Graph>("loop");
  Value* n = g->add_input("n", scalar(DType::I64));
  Value* c = g->add_input("c", scalar(DType::Bool));
  Value* a0 = g->add_input("a0", f32({4}));
  Value* gx = g->add_input("x", f32({4}));
  g->set_outputs(g->add_node(Op::Loop, {n, c, a0, gx},
                             {{"body", GraphAttr(body)}, {"num_carried", int64_t(1)}, {"scan_length", Shape{scan_length}}}));
  return g;
}

}  // namespace

TEST(ControlFlow, IfRunsTheChosenBranchOnItsCaptures) {
  auto g = if_graph();
  verify(*g);
  HostTensor x = HostTensor::random(DType::F32, {3}, 1), y = HostTensor::random(DType::F32, {3}, 2);
  HostTensor then_out = interp::run(*g, {flag(true), x, y})[0];
  HostTensor else_out = interp::run(*g, {flag(false), x, y})[0];
  for (int64_t k = 0; k < 3; ++k) {
    EXPECT_NEAR(then_out.get_f64(k), std::exp(x.get_f64(k)) * y.get_f64(k), 1e-6);
    EXPECT_EQ(else_out.get_f64(k), -x.get_f64(k));
  }
}

TEST(ControlFlow, LoopCarriesValuesAndStacksScanOutputs) {
  auto g = loop_graph(5);
  verify(*g);
  HostTensor a0 = HostTensor::random(DType::F32, {4}, 3), x = HostTensor::random(DType::F32, {4}, 4);
  auto out = interp::run(*g, {count(5), flag(true), a0, x});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{5, 4}));
  for (int64_t k = 0; k < 4; ++k) {
    double acc = a0.get_f64(k);
    for (int64_t i = 0; i < 5; ++i) {
      acc = float(acc + float(x.get_f64(k) * double(i)));
      EXPECT_FLOAT_EQ(float(out[1].get_f64(i * 4 + k)), float(acc));
    }
    EXPECT_FLOAT_EQ(float(out[0].get_f64(k)), float(acc));
  }
}

TEST(ControlFlow, ZeroTripLoopReturnsTheInitialValues) {
  auto g = loop_graph(0);
  HostTensor a0 = HostTensor::random(DType::F32, {4}, 5), x = HostTensor::random(DType::F32, {4}, 6);
  auto out = interp::run(*g, {count(0), flag(true), a0, x});
  EXPECT_TRUE(out[0].bit_equal(a0));
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{0, 4}));
  // A false condition also means zero iterations.
  auto none = interp::run(*loop_graph(0), {count(7), flag(false), a0, x});
  EXPECT_TRUE(none[0].bit_equal(a0));
}

TEST(ControlFlow, LoopConditionEndsItEarly) {
  // Without scan outputs: the body's cond (i < 1) stops the loop after two iterations.
  auto body = std::make_shared<Graph>("body");
  Value* i = body->add_input("i", scalar(DType::I64));
  body->add_input("cond", scalar(DType::Bool));
  Value* acc = body->add_input("acc", scalar(DType::I64));
  body->set_outputs({body->add(Op::Lt, {i, body->scalar(DType::I64, 1)}), body->add(Op::Add, {acc, i})});
  Graph g("early");
  Value* n = g.add_input("n", scalar(DType::I64));
  Value* a = g.add_input("a", scalar(DType::I64));
  g.set_outputs(g.add_node(Op::Loop, {n, g.scalar(DType::Bool, 1), a}, {{"body", GraphAttr(body)}, {"num_carried", int64_t(1)}}));
  EXPECT_EQ(interp::run(g, {count(100), count(10)})[0].get_i64(0), 10 + 0 + 1);
  EXPECT_EQ(interp::run(g, {count(1), count(10)})[0].get_i64(0), 10);
  // With scan outputs of a fixed length, stopping early is an error naming the node.
  auto scanned = loop_graph(4, /*stop_after_two=*/true);
  HostTensor a0 = HostTensor::random(DType::F32, {4}, 7);
  std::string msg = error_of([&] { interp::run(*scanned, {count(4), flag(true), a0, a0}); });
  EXPECT_NE(msg.find("(loop)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("stopped after 2 iterations"), std::string::npos) << msg;
  // Running longer than the typed length is an error too.
  msg = error_of([&] { interp::run(*loop_graph(3), {count(4), flag(true), a0, a0}); });
  EXPECT_NE(msg.find("more than 3 iterations"), std::string::npos) << msg;
}

TEST(ControlFlow, ScanWalksAxesAndDirections) {
  // Running sum over the rows of x[5, 3], read backwards; outputs stacked along axis 1.
  auto body = std::make_shared<Graph>("body");
  Value* s = body->add_input("s", f32({3}));
  Value* row = body->add_input("row", f32({3}));
  Value* next = body->add(Op::Add, {s, row});
  body->set_outputs({next, next});
  Graph g("scan");
  Value* s0 = g.add_input("s0", f32({3}));
  Value* x = g.add_input("x", f32({5, 3}));
  g.set_outputs(g.add_node(Op::Scan, {s0, x},
                           {{"body", GraphAttr(body)}, {"num_carried", int64_t(1)}, {"num_scan_inputs", int64_t(1)},
                            {"scan_input_directions", std::vector<int64_t>{1}},
                            {"scan_output_axes", std::vector<int64_t>{1}}}));
  verify(g);
  EXPECT_EQ(g.outputs()[1]->type.to_string(), "f32[3, 5]");
  HostTensor s0v = HostTensor::random(DType::F32, {3}, 8), xv = HostTensor::random(DType::F32, {5, 3}, 9);
  auto out = interp::run(g, {s0v, xv});
  for (int64_t c = 0; c < 3; ++c) {
    float acc = float(s0v.get_f64(c));
    for (int64_t t = 0; t < 5; ++t) {
      acc += float(xv.get_f64((4 - t) * 3 + c));
      EXPECT_FLOAT_EQ(float(out[1].get_f64(c * 5 + t)), acc);
    }
    EXPECT_FLOAT_EQ(float(out[0].get_f64(c)), acc);
  }
}

TEST(ControlFlow, OptimizeKeepsControlFlowNodesOpaque) {
  auto g = loop_graph(5);
  // A dead copy, a constant-foldable input and a CSE twin around the loop.
  HostTensor a0 = HostTensor::random(DType::F32, {4}, 10), x = HostTensor::random(DType::F32, {4}, 11);
  auto before = interp::run(*g, {count(5), flag(true), a0, x});
  optimize(*g);
  verify(*g);
  auto after = interp::run(*g, {count(5), flag(true), a0, x});
  EXPECT_TRUE(after[0].bit_equal(before[0]));
  EXPECT_TRUE(after[1].bit_equal(before[1]));
  int loops = 0;
  for (const auto& n : g->nodes()) loops += n->op == Op::Loop;
  EXPECT_EQ(loops, 1);
}

TEST(Containers, SequencesAndOptionals) {
  Graph g("seq");
  Value* a = g.add_input("a", f32({2}));
  Value* b = g.add_input("b", f32({3}));
  Value* s = g.add(Op::SequenceConstruct, {a, b});
  EXPECT_EQ(s->type.to_string(), "seq<f32[2], f32[3]>");
  Value* s2 = g.add(Op::SequenceInsert, {s, b}, {{"position", int64_t(0)}});
  Value* s3 = g.add(Op::SequenceErase, {s2}, {{"position", int64_t(1)}});  // [b, b]
  Value* at = g.add(Op::SequenceAt, {s3}, {{"index", int64_t(1)}});
  Value* opt = g.add(Op::OptionalWrap, {s3});
  Value* none = g.add(Op::OptionalNone, {}, {{"type", std::string("opt<f32[3]>")}});
  g.set_outputs({s3, at, g.add(Op::OptionalHas, {opt}), g.add(Op::OptionalHas, {none}), g.add(Op::OptionalGet, {opt}),
                 g.add(Op::SequenceEmpty, {}, {{"dtype", DType::I32}})});
  verify(g);
  HostTensor av = HostTensor::random(DType::F32, {2}, 12), bv = HostTensor::random(DType::F32, {3}, 13);
  auto out = interp::run(g, {av, bv});
  ASSERT_EQ(out[0].items().size(), 2u);
  EXPECT_TRUE(out[0].items()[0].bit_equal(bv));
  EXPECT_TRUE(out[1].bit_equal(bv));
  EXPECT_EQ(out[2].get_i64(0), 1);
  EXPECT_EQ(out[3].get_i64(0), 0);
  EXPECT_TRUE(out[4].bit_equal(out[0]));
  EXPECT_EQ(out[5].kind(), ValueKind::Sequence);
  EXPECT_TRUE(out[5].items().empty());
  // Sequences as graph inputs: the length and element shapes are checked like dims.
  Graph h("seq_in");
  Value* in = h.add_input("s", TensorType::sequence(DType::F32, {f32({SymInt::symbol("N")}), f32({2})}));
  h.set_outputs({h.add(Op::SequenceAt, {in}, {{"index", int64_t(0)}})});
  HostTensor good = HostTensor::sequence(DType::F32, {HostTensor::random(DType::F32, {5}, 1), av});
  EXPECT_EQ(interp::run(h, {good})[0].shape(), (std::vector<int64_t>{5}));
  std::string msg = error_of([&] { interp::run(h, {HostTensor::sequence(DType::F32, {av})}); });
  EXPECT_NE(msg.find("expected a sequence of 2 elements"), std::string::npos) << msg;
  // An empty optional reports itself when read.
  Graph k("opt");
  Value* o = k.add_input("o", TensorType::optional(f32({3})));
  k.set_outputs({k.add(Op::OptionalGet, {o})});
  msg = error_of([&] { interp::run(k, {HostTensor::optional(DType::F32, {})}); });
  EXPECT_NE(msg.find("optional_get of an empty optional"), std::string::npos) << msg;
}

TEST(Containers, TensorOpsRejectSequences) {
  Graph g("bad");
  Value* a = g.add_input("a", f32({2}));
  Value* s = g.add(Op::SequenceConstruct, {a, a});
  std::string msg = error_of([&] { g.add(Op::Exp, {s}); });
  EXPECT_NE(msg.find("takes tensors only"), std::string::npos) << msg;
  msg = error_of([&] { g.add(Op::SequenceAt, {s}, {{"index", int64_t(2)}}); });
  EXPECT_NE(msg.find("index 2 is outside the sequence of length 2"), std::string::npos) << msg;
}
