// The text IR round-trips: print(parse(print(g))) == print(g) and the parsed graph has the same
// ops, attributes, types and wiring, for every op in the table and the awkward corners of the
// format (symbolic dims, multi-result ops, quoted names, constants, every dtype, devices).
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <unordered_map>

#include "common/op_samples.h"
#include "ir/text_syntax.h"
#include "kiln/error.h"
#include "kiln/graph.h"

using namespace kiln;

namespace {

TensorType tensor(DType d, Shape s, Device dev = Device::CPU) { return TensorType{d, std::move(s), dev}; }
using Ints = std::vector<int64_t>;

// Where a value comes from, independent of ids: graph input k, or result j of node i.
std::pair<int, int> origin(const Graph& g, const Value* v,
                           const std::unordered_map<const Node*, int>& node_index) {
  if (v->producer == nullptr) {
    for (size_t k = 0; k < g.inputs().size(); ++k)
      if (g.inputs()[k] == v) return {-1, int(k)};
    return {-2, v->id};
  }
  return {node_index.at(v->producer), v->output_index};
}

// Same ops, attributes, result types, node names, wiring and graph outputs.
void expect_same_structure(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.name(), b.name());
  ASSERT_EQ(a.inputs().size(), b.inputs().size());
  for (size_t i = 0; i < a.inputs().size(); ++i) EXPECT_EQ(a.inputs()[i]->type, b.inputs()[i]->type);
  ASSERT_EQ(a.num_nodes(), b.num_nodes());
  std::unordered_map<const Node*, int> index_a, index_b;
  auto nodes_a = a.node_list(), nodes_b = b.node_list();
  for (size_t i = 0; i < nodes_a.size(); ++i) {
    index_a[nodes_a[i]] = int(i);
    index_b[nodes_b[i]] = int(i);
  }
  for (size_t i = 0; i < nodes_a.size(); ++i) {
    const Node& na = *nodes_a[i];
    const Node& nb = *nodes_b[i];
    EXPECT_EQ(na.op, nb.op) << "node " << i;
    EXPECT_TRUE(na.attrs == nb.attrs) << "node " << i << " (" << op_name(na.op) << ")";
    EXPECT_EQ(na.name, nb.name);
    ASSERT_EQ(na.inputs.size(), nb.inputs.size());
    for (size_t k = 0; k < na.inputs.size(); ++k)
      EXPECT_EQ(origin(a, na.inputs[k], index_a), origin(b, nb.inputs[k], index_b)) << "node " << i;
    ASSERT_EQ(na.outputs.size(), nb.outputs.size());
    for (size_t k = 0; k < na.outputs.size(); ++k) EXPECT_EQ(na.outputs[k]->type, nb.outputs[k]->type);
  }
  ASSERT_EQ(a.outputs().size(), b.outputs().size());
  for (size_t k = 0; k < a.outputs().size(); ++k)
    EXPECT_EQ(origin(a, a.outputs()[k], index_a), origin(b, b.outputs()[k], index_b));
}

// Prints, parses, re-prints; checks identity, structure and that both graphs verify.
std::unique_ptr<Graph> expect_round_trip(const Graph& g) {
  verify(g);
  std::string text = print_graph(g);
  std::unique_ptr<Graph> parsed;
  try {
    parsed = parse_graph(text);
  } catch (const Error& e) {
    ADD_FAILURE() << e.what() << "\n" << text;
    return nullptr;
  }
  EXPECT_EQ(print_graph(*parsed), text);
  expect_same_structure(g, *parsed);
  verify(*parsed);
  return parsed;
}

}  // namespace

TEST(TextIR, PrintsTheDocumentedForm) {
  Graph g("mlp");
  SymInt B = SymInt::symbol("B");
  Value* x = g.add_input("x", tensor(DType::F32, {B, 784}));
  Value* w = g.add_input("w", tensor(DType::F32, {784, 4}));
  Value* h = g.add(Op::MatMul, {x, w});
  Value* s = g.add(Op::ReduceSum, {h}, {{"axes", Ints{0}}});
  auto parts = g.add_node(Op::Split, {s}, {{"axis", int64_t(0)}, {"sizes", Ints{1, 3}}});
  Value* c = g.constant(HostTensor::from_doubles(DType::F32, {1}, {2.5}));
  c->name = "c";
  Value* scaled = g.add(Op::Mul, {parts[0], c}, {}, "scale/Mul");
  g.set_outputs({h, scaled, parts[1]});
  const char* expected =
      "graph @mlp(%x: f32[B, 784], %w: f32[784, 4]) {\n"
      "  %0 = matmul(%x, %w) : f32[B, 4]\n"
      "  %1 = reduce_sum(%0) {axes = [0], keepdim = 0} : f32[4]\n"
      "  %2, %3 = split(%1) {axis = 0, sizes = [1, 3]} : f32[1], f32[3]\n"
      "  %c = constant() {value = dense<f32[1]>[2.5]} : f32[1]\n"
      "  %4 = mul(%2, %c) : f32[1] loc(\"scale/Mul\")\n"
      "  return %0, %4, %3\n"
      "}\n";
  EXPECT_EQ(print_graph(g), expected);
  EXPECT_EQ(g.to_text(), expected);
  auto parsed = expect_round_trip(g);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->name(), "mlp");
  EXPECT_EQ(parsed->inputs()[0]->name, "x");
  EXPECT_EQ(parsed->outputs()[1]->producer->name, "scale/Mul");
}

TEST(TextIR, EveryOpRoundTrips) {
  std::set<Op> covered;
  for (const auto& sample : kiln::testing::op_samples()) {
    SCOPED_TRACE(sample.label);
    auto g = kiln::testing::build_sample_graph(sample);
    expect_round_trip(*g);
    covered.insert(sample.op);
  }
  for (int i = 0; i < kNumOps; ++i)  // control flow and containers: control_flow_ir_test.cc
    if (!has_trait(Op(i), kSubgraph) && !has_trait(Op(i), kContainer)) {
      EXPECT_TRUE(covered.count(Op(i))) << "no round-trip sample for op " << op_name(Op(i));
    }
}

TEST(TextIR, SymbolicDimsAndShapeAttributes) {
  Graph g("symbolic");
  SymInt B = SymInt::symbol("B"), T = SymInt::symbol("T");
  Value* x = g.add_input("x", tensor(DType::F32, {B, T, 8}));
  Value* flat = g.add(Op::Reshape, {x}, {{"shape", Shape{B * T, 8}}});
  Value* halves = g.add(Op::Reshape, {x}, {{"shape", Shape{B, floordiv(T, 2) * 2, 4}}});
  Value* wide = g.add(Op::Expand, {g.add_input("y", tensor(DType::F32, {1, 8}))},
                      {{"shape", Shape{max(B, T) + 1, 8}}});
  Value* joined = g.add(Op::Concat, {flat, wide}, {{"axis", int64_t(0)}});
  Value* shape = g.add(Op::ShapeOf, {x});
  Value* full = g.add(Op::Full, {}, {{"shape", Shape{mod(B, 3), T - 1}}, {"value", -0.5}});
  g.set_outputs({joined, halves, shape, full});
  auto parsed = expect_round_trip(g);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->outputs()[0]->type.shape, (Shape{B * T + max(B, T) + 1, 8}));
  EXPECT_EQ(parsed->outputs()[3]->type.shape, (Shape{mod(B, 3), T - 1}));
  EXPECT_EQ(parsed->guards().size(), g.guards().size());
}

TEST(TextIR, MultiResultOpsAndUnusedResults) {
  Graph g;
  Value* x = g.add_input("x", tensor(DType::I32, {3, 6}));
  auto parts = g.add_node(Op::Split, {x}, {{"axis", int64_t(1)}, {"sizes", Ints{1, 2, 3}}});
  parts[1]->name = "middle";
  g.set_outputs({parts[2], parts[1], parts[2]});
  auto parsed = expect_round_trip(g);
  ASSERT_TRUE(parsed);
  EXPECT_NE(print_graph(g).find("%0, %middle, %1 = split(%x)"), std::string::npos) << print_graph(g);
}

TEST(TextIR, NamesThatNeedQuotingNumbersAndDuplicates) {
  Graph g("onnx/model.v1");
  Value* a = g.add_input("input:0", tensor(DType::F32, {4}));
  Value* b = g.add_input("", tensor(DType::F32, {4}));
  Value* c = g.add_input("7", tensor(DType::F32, {4}));  // numeric names print as positions
  Value* s = g.add(Op::Add, {a, b});
  s->name = "/layer.1/Add_output_0";
  Value* t = g.add(Op::Mul, {s, c}, {}, "node \"with\" quotes\\");
  t->name = "dup";
  Value* u = g.add(Op::Sub, {t, a});
  u->name = "dup";  // a second value of the same name prints as a number
  Value* v = g.add(Op::Neg, {u});
  v->name = "line\nbreak\ttab";
  g.set_outputs({v, t});
  std::string text = print_graph(g);
  EXPECT_NE(text.find("graph @\"onnx/model.v1\"(%\"input:0\": f32[4], %0: f32[4], %1: f32[4])"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("%\"/layer.1/Add_output_0\" = add(%\"input:0\", %0)"), std::string::npos) << text;
  EXPECT_NE(text.find("%dup = mul(%\"/layer.1/Add_output_0\", %1) : f32[4] loc(\"node \\\"with\\\" quotes\\\\\")"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("%2 = sub(%dup, %\"input:0\")"), std::string::npos) << text;
  EXPECT_NE(text.find("%\"line\\nbreak\\ttab\" = neg(%2)"), std::string::npos) << text;
  auto parsed = expect_round_trip(g);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->name(), "onnx/model.v1");
  EXPECT_EQ(parsed->inputs()[0]->name, "input:0");
  EXPECT_EQ(parsed->inputs()[1]->name, "");
  EXPECT_EQ(parsed->outputs()[0]->name, "line\nbreak\ttab");
  EXPECT_EQ(parsed->outputs()[1]->producer->name, "node \"with\" quotes\\");
}

TEST(TextIR, ConstantsOfEveryDTypeSmallAndLarge) {
  Graph g("constants");
  std::vector<Value*> outs;
  for (int d = 0; d < kNumDTypes; ++d) {
    DType dtype = DType(d);
    if (dtype == DType::Str) continue;  // no numeric values: string_dtype_test.cc covers its text
    // Small constants print their values; more than 16 elements print as hex bytes.
    outs.push_back(g.constant(HostTensor::from_doubles(dtype, {3}, {1, 0, is_float(dtype) ? -2.5 : 1})));
    outs.push_back(g.constant(HostTensor::random(dtype, {5, 7}, uint64_t(d + 1), 0, 9)));
    outs.push_back(g.constant(HostTensor::scalar(dtype, 1)));
  }
  outs.push_back(g.constant(HostTensor::from_doubles(DType::F64, {4}, {NAN, INFINITY, -INFINITY, -0.0})));
  outs.push_back(g.constant(HostTensor::empty(DType::F32, {0, 3})));
  g.set_outputs(outs);
  std::string text = print_graph(g);
  EXPECT_NE(text.find("dense<bf16[3]>[1.0, 0.0, -2.5]"), std::string::npos) << text;
  EXPECT_NE(text.find("dense<u8[5, 7]>\"0x"), std::string::npos) << text;
  EXPECT_NE(text.find("dense<f64[4]>[nan, inf, -inf, -0.0]"), std::string::npos) << text;
  EXPECT_NE(text.find("dense<f32[0, 3]>[]"), std::string::npos) << text;
  expect_round_trip(g);  // attrs compare bit-exactly, so NaN and -0.0 survive too
}

TEST(TextIR, DumpsElideLargeConstantsAndTheParserRefusesThem) {
  // An IR dump keeps small constants whole and prints big ones (weights) as their shape; parsing
  // such a dump back names what is missing instead of reading garbage.
  Graph g("elided");
  Value* weight = g.constant(HostTensor::random(DType::F32, {3, 11}, 5));  // 132 bytes
  Value* scale = g.constant(HostTensor::random(DType::F32, {11}, 6));      // 44 bytes
  g.set_outputs({g.add(Op::Mul, {weight, scale})});
  std::string full = print_graph(g), elided;
  {
    text_syntax::TensorElision scope(64);
    elided = print_graph(g);
  }
  EXPECT_EQ(print_graph(g), full);  // the scope ended
  EXPECT_NE(elided.find("dense<f32[3, 11]>\"elided: 132 bytes\""), std::string::npos) << elided;
  EXPECT_EQ(elided.find("dense<f32[11]>\"elided"), std::string::npos) << elided;
  EXPECT_LT(elided.size(), full.size());
  try {
    parse_graph(elided);
    FAIL() << "an elided dump parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("elided"), std::string::npos) << e.what();
  }
  expect_round_trip(g);
}

TEST(TextIR, EveryDTypeAndDeviceInTypes) {
  Graph g("types");
  std::vector<Value*> outs;
  for (int d = 0; d < kNumDTypes; ++d) {
    Value* cpu = g.add_input(str("in", d), tensor(DType(d), {2, SymInt::symbol("N")}));
    Value* gpu = g.add_input(str("gpu", d), tensor(DType(d), {}, Device::CUDA));
    outs.push_back(g.add(Op::ShapeOf, {cpu}));
    if (DType(d) != DType::Str) outs.push_back(g.add(Op::Cast, {gpu}, {{"dtype", DType::F16}}));
  }
  g.set_outputs(outs);
  std::string text = print_graph(g);
  EXPECT_NE(text.find("%gpu3: bf16[]@cuda"), std::string::npos) << text;
  EXPECT_NE(text.find("cast(%gpu9) {dtype = f16} : f16[]@cuda"), std::string::npos) << text;
  expect_round_trip(g);
}

TEST(TextIR, AttributesOfEveryKindPrintSortedWithDefaults) {
  Graph g;
  Value* x = g.add_input("x", tensor(DType::F32, {2, 3, 9, 9}));
  Value* p = g.add(Op::Pad, {x}, {{"pads", Ints{0, 0, 1, 1, 0, 0, 1, 1}}, {"mode", std::string("reflect")}});
  Value* c = g.add(Op::Clamp, {p}, {{"max", 6.0}});
  Value* ln = g.add(Op::LayerNorm, {c}, {{"eps", 1e-3}});
  g.set_outputs({ln});
  std::string text = print_graph(g);
  EXPECT_NE(text.find("pad(%x) {mode = \"reflect\", pads = [0, 0, 1, 1, 0, 0, 1, 1], value = 0.0}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("clamp(%0) {max = 6.0, min = -inf}"), std::string::npos) << text;
  EXPECT_NE(text.find("layer_norm(%1) {axis = -1, eps = 0.001}"), std::string::npos) << text;
  expect_round_trip(g);
}

TEST(TextIR, ParsesHandWrittenTextWithCommentsAndLooseSpacing) {
  const char* text =
      "// a comment before the graph\n"
      "graph @main ( %a : f32[N,4] ,%b:f32[4] ) {   // trailing comment\n"
      "\n"
      "  %sum=add( %a,%b ):f32[N, 4]\n"
      "  // a comment line\n"
      "  %r = reduce_max(%sum) {axes=[ -1 ]} : f32[N]   loc( \"r\" )\n"
      "  return %r , %sum\n"
      "}\n"
      "// after the graph\n";
  auto g = parse_graph(text);
  verify(*g);
  EXPECT_EQ(print_graph(*g),
            "graph @main(%a: f32[N, 4], %b: f32[4]) {\n"
            "  %sum = add(%a, %b) : f32[N, 4]\n"
            "  %r = reduce_max(%sum) {axes = [-1], keepdim = 0} : f32[N] loc(\"r\")\n"
            "  return %r, %sum\n"
            "}\n");
}

TEST(TextIR, EmptyGraphAndGraphWithoutOutputs) {
  Graph empty("empty");
  expect_round_trip(empty);
  EXPECT_EQ(print_graph(empty), "graph @empty() {\n  return\n}\n");
  Graph no_outputs("side");
  no_outputs.add(Op::RandomUniform, {}, {{"shape", Shape{2}}});
  expect_round_trip(no_outputs);
}

TEST(TextIR, GuardsAreRederivedNotPrinted) {
  Graph g;
  Value* a = g.add_input("a", tensor(DType::F32, {SymInt::symbol("T"), 4}));
  Value* b = g.add_input("b", tensor(DType::F32, {3, 4}));
  g.set_outputs({g.add(Op::Add, {a, b})});
  ASSERT_EQ(g.guards().size(), 1u);
  EXPECT_EQ(print_graph(g).find("guard"), std::string::npos);
  auto parsed = expect_round_trip(g);
  ASSERT_TRUE(parsed);
  ASSERT_EQ(parsed->guards().size(), 1u);
  EXPECT_EQ(parsed->guards()[0].to_string(), g.guards()[0].to_string());
}

TEST(TextIR, ClonedAndMutatedGraphsStillRoundTrip) {
  Graph g;
  Value* x = g.add_input("x", tensor(DType::F32, {4}));
  Value* e = g.add(Op::Exp, {x});
  Value* n = g.add(Op::Neg, {e});
  g.set_outputs({n});
  g.set_insertion_point(n->producer);
  Value* t = g.add(Op::Tanh, {e});
  g.set_insertion_point(nullptr);
  g.set_operand(n->producer, 0, t);
  expect_round_trip(g);
  auto copy = g.clone();
  EXPECT_EQ(print_graph(*copy), print_graph(g));
}

// Samples use static shapes; these instances put symbolic dims through ops of every family,
// including the two-result topk and resize's float-list attributes.
TEST(TextIR, SymbolicInstancesAcrossOpFamilies) {
  Graph g("families");
  SymInt N = SymInt::symbol("N"), L = SymInt::symbol("L");
  Value* img = g.add_input("img", tensor(DType::F32, {N, 4, 8, 8}));
  Value* seq = g.add_input("seq", tensor(DType::F32, {N, L, 6}));
  Value* w = g.add_input("w", tensor(DType::F32, {4, 2, 3, 3}));
  Value* idx = g.add_input("idx", tensor(DType::I64, {L}));
  std::vector<Value*> outs;
  outs.push_back(g.add(Op::ConvTranspose2d, {img, w}, {{"strides", Ints{2, 2}}}));
  outs.push_back(g.add(Op::Resize, {img}, {{"sizes", Shape{N, 4, 16, 16}}, {"scales", std::vector<double>{1, 1, 2, 2}},
                                            {"mode", std::string("linear")}}));
  auto top = g.add_node(Op::TopK, {seq}, {{"k", int64_t(2)}});
  outs.insert(outs.end(), top.begin(), top.end());
  outs.push_back(g.add(Op::CumSum, {seq}, {{"axis", int64_t(1)}, {"reverse", int64_t(1)}}));
  outs.push_back(g.add(Op::Softmax, {seq}));
  outs.push_back(g.add(Op::Attention, {seq, seq, seq}, {{"causal", int64_t(1)}}));
  outs.push_back(g.add(Op::IndexSelect, {seq, idx}, {{"axis", int64_t(1)}}));
  outs.push_back(g.add(Op::Slice, {seq}, {{"starts", Ints{1}}, {"ends", Ints{-1}}, {"axes", Ints{1}}}));
  outs.push_back(g.add(Op::Flatten, {seq}, {{"start_dim", int64_t(0)}, {"end_dim", int64_t(1)}}));
  outs.push_back(g.add(Op::ArgMax, {seq}, {{"axis", int64_t(-1)}}));
  outs.push_back(g.add(Op::MaxPool2d, {img}, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}}));
  outs.push_back(g.add(Op::Arange, {}, {{"size", Shape{L}}}));
  g.set_outputs(outs);
  expect_round_trip(g);
}
