// Building graphs: types inferred at birth, defaults filled, ill-typed builds rejected by name.
#include <gtest/gtest.h>

#include "kiln/error.h"
#include "kiln/graph.h"

using namespace kiln;

namespace {
TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s), Device::CPU}; }
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(GraphBuild, EveryOpHasAShapeRuleAndParsedSpecs) {
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& info = op_info(Op(i));
    EXPECT_NE(info.shape_fn, nullptr) << info.name;
    EXPECT_EQ(op_from_name(info.name), std::optional<Op>(Op(i)));
  }
  EXPECT_TRUE(has_trait(Op::Add, kCommutative));
  EXPECT_TRUE(has_trait(Op::Exp, kElementwise));
  EXPECT_FALSE(has_trait(Op::Sub, kCommutative));
  EXPECT_NE(op_info(Op::Softmax).decompose, nullptr);
  EXPECT_EQ(op_info(Op::Add).decompose, nullptr);
}

TEST(GraphBuild, BroadcastingAndDefaults) {
  Graph g;
  SymInt B = SymInt::symbol("B");
  Value* x = g.add_input("x", f32({B, 1, 4}));
  Value* y = g.add_input("y", f32({3, 4}));
  Value* s = g.add(Op::Add, {x, y});
  EXPECT_EQ(s->type.shape, (Shape{B, 3, 4}));
  Value* r = g.add(Op::ReduceSum, {s}, {{"axes", std::vector<int64_t>{-1}}});
  EXPECT_EQ(r->type.shape, (Shape{B, 3}));
  EXPECT_EQ(r->producer->attrs.get_int("keepdim"), 0);
  Value* m = g.add(Op::Reshape, {s}, {{"shape", Shape{-1, 4}}});
  EXPECT_EQ(m->type.shape, (Shape{B * SymInt(3), 4}));
  EXPECT_TRUE(g.guards().empty());
  Value* z = g.add_input("z", f32({SymInt::symbol("T"), 4}));
  g.add(Op::Add, {y, z});
  ASSERT_EQ(g.guards().size(), 1u);  // T == 3 recorded, not proven
}

TEST(GraphBuild, IllTypedBuildsNameOpOperandsAndRule) {
  Graph g;
  Value* a = g.add_input("a", f32({2, 3}));
  Value* b = g.add_input("b", f32({4, 3}));
  Value* i = g.add_input("i", TensorType{DType::I32, {2, 3}, Device::CPU});
  std::string msg = error_of([&] { g.add(Op::Add, {a, b}); });
  EXPECT_NE(msg.find("add"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f32[2, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2 != 4"), std::string::npos) << msg;
  msg = error_of([&] { g.add(Op::Exp, {i}); });
  EXPECT_NE(msg.find("floating-point"), std::string::npos) << msg;
  msg = error_of([&] { g.add(Op::Add, {a, i}); });
  EXPECT_NE(msg.find("share a dtype"), std::string::npos) << msg;
  msg = error_of([&] { g.add(Op::ReduceSum, {a}, {{"axes", std::vector<int64_t>{2}}}); });
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
  msg = error_of([&] { g.add(Op::Softmax, {a}, {{"axiz", int64_t(1)}}); });
  EXPECT_NE(msg.find("no attribute 'axiz'"), std::string::npos) << msg;
  msg = error_of([&] { g.add(Op::MatMul, {a, b}); });
  EXPECT_NE(msg.find("contraction"), std::string::npos) << msg;
  msg = error_of([&] { g.add(Op::Reshape, {a}, {{"shape", Shape{4, 2}}}); });
  EXPECT_NE(msg.find("element count"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { g.add(Op::Add, {a}); }).find("expects 2 operands"), std::string::npos);
}

TEST(GraphBuild, MatmulConvPoolShapes) {
  Graph g;
  Value* a = g.add_input("a", f32({5, 1, 7, 3}));
  Value* b = g.add_input("b", f32({4, 3, 2}));
  EXPECT_EQ(g.add(Op::MatMul, {a, b})->type.shape, (Shape{5, 4, 7, 2}));
  Value* v = g.add_input("v", f32({3}));
  EXPECT_EQ(g.add(Op::MatMul, {a, v})->type.shape, (Shape{5, 1, 7}));
  Value* x = g.add_input("x", f32({2, 6, 11, 13}));
  Value* w = g.add_input("w", f32({8, 3, 3, 3}));
  Value* c = g.add(Op::Conv2d, {x, w},
                   {{"groups", int64_t(2)}, {"strides", std::vector<int64_t>{2, 2}},
                    {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  EXPECT_EQ(c->type.shape, (Shape{2, 8, 6, 7}));
  Value* p = g.add(Op::MaxPool2d, {x}, {{"kernel", std::vector<int64_t>{3, 3}},
                                          {"strides", std::vector<int64_t>{2, 2}},
                                          {"ceil_mode", int64_t(1)}});
  EXPECT_EQ(p->type.shape, (Shape{2, 6, 5, 6}));
}

TEST(GraphBuild, CloneAndEraseKeepUseLists) {
  Graph g;
  Value* a = g.add_input("a", f32({3}));
  Value* e = g.add(Op::Exp, {a});
  Value* n = g.add(Op::Neg, {e});
  g.set_outputs({n});
  EXPECT_EQ(a->uses.size(), 1u);
  auto c = g.clone();
  EXPECT_EQ(c->num_nodes(), 2);
  EXPECT_THROW(g.erase_node(e->producer), Error);
  g.replace_all_uses(n, e);
  g.erase_node(n->producer);
  EXPECT_EQ(g.outputs()[0], e);
  EXPECT_TRUE(e->uses.empty());
  EXPECT_EQ(c->outputs()[0]->producer->op, Op::Neg);
}

// sort / argsort / sample: result types (symbolic rows kept) and ill-typed uses named.
TEST(GraphBuild, SelectionAndSampleShapesAndErrors) {
  Graph g;
  SymInt B = SymInt::symbol("B");
  auto i64 = [](Shape s) { return TensorType{DType::I64, std::move(s), Device::CPU}; };
  Value* x = g.add_input("x", f32({B, 9}));
  std::vector<Value*> sorted = g.add_node(Op::Sort, {x}, {{"axis", int64_t(0)}});
  EXPECT_EQ(sorted.at(0)->type, x->type);
  EXPECT_EQ(sorted.at(1)->type, i64({B, 9}));
  EXPECT_EQ(g.add(Op::ArgSort, {x})->type, i64({B, 9}));
  Value* seeds = g.add_input("seeds", i64({B}));
  Value* steps = g.add_input("steps", i64({B}));
  EXPECT_EQ(g.add(Op::Sample, {x, seeds, steps}, {{"top_k", int64_t(5)}})->type, i64({B}));
  Value* flags = g.add_input("flags", TensorType{DType::Bool, {3}, Device::CPU});
  EXPECT_NE(error_of([&] { g.add(Op::Sort, {flags}); }).find("sort needs a numeric dtype"), std::string::npos);
  EXPECT_NE(error_of([&] { g.add(Op::Sort, {x}, {{"axis", int64_t(2)}}); }).find("axis"), std::string::npos);
  Value* four_rows = g.add_input("four_rows", f32({4, 9}));
  Value* three_seeds = g.add_input("three_seeds", i64({3}));
  Value* four_steps = g.add_input("four_steps", i64({4}));
  EXPECT_NE(error_of([&] { g.add(Op::Sample, {four_rows, three_seeds, four_steps}); }).find("seeds length vs the logits' rows"),
            std::string::npos);
  Value* f32_seeds = g.add_input("f32_seeds", f32({B}));
  EXPECT_NE(error_of([&] { g.add(Op::Sample, {x, f32_seeds, steps}); }).find("seeds must be a [B] i64 tensor"),
            std::string::npos);
  EXPECT_NE(error_of([&] { g.add(Op::Sample, {x, seeds, steps}, {{"top_p", 0.0}}); }).find("top_p must be in (0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { g.add(Op::Sample, {x, seeds, steps}, {{"temperature", -1.0}}); }).find("temperature must be"),
            std::string::npos);
  Value* ids = g.add_input("ids", i64({B}));
  Value* t = g.add_input("t", f32({B}));
  Value* k = g.add_input("k", i64({B}));
  EXPECT_NE(error_of([&] { g.add(Op::Sample, {x, seeds, steps, t, k, t, t, ids}); }).find("penalty_ids must be [B, L]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { g.add(Op::Sample, {x, seeds, steps, k}); }).find("temperature must be a [B] f32"),
            std::string::npos);
}
