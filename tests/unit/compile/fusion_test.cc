// Fusion patterns compiled and compared with the interpreter: pointwise chains with broadcasts,
// reductions over each axis with prologue and epilogue, softmax / layer_norm in one kernel,
// matmul epilogues, views read through index arithmetic, odd sizes and dtypes.
#include <gtest/gtest.h>

#include <tuple>

#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

int count_generated(const Scoreboard& sb) {
  int n = 0;
  for (const auto& k : sb.kernels()) n += k.name.rfind("fused", 0) == 0;
  return n;
}

TEST(Fusion, ElementwiseChainIsOneKernel) {
  Graph g("chain");
  Value* x = g.add_input("x", f32({37, 129}));
  Value* y = x;
  for (int i = 0; i < 4; ++i) y = g.add(i % 2 ? Op::Exp : Op::Tanh, {g.add(Op::Mul, {y, g.scalar(DType::F32, 0.5)})});
  g.set_outputs({y});
  auto in = std::vector<HostTensor>{HostTensor::random(DType::F32, {37, 129}, 1)};
  auto exe = compile_and_check(g, in, "chain");
  Scoreboard sb;
  exe->run(in, &sb);
  ASSERT_EQ(sb.kernels_launched(), 1);
  EXPECT_EQ(sb.bytes_read(), 37 * 129 * 4);
  EXPECT_EQ(sb.bytes_written(), 37 * 129 * 4);
  EXPECT_EQ(sb.kernels()[0].source_ops.size(), 8u);
}

TEST(Fusion, BroadcastsFuseAndDimsMerge) {
  Graph g("bcast");
  Value* x = g.add_input("x", f32({4, 6, 33}));
  Value* b = g.add_input("b", f32({33}));
  Value* c = g.add_input("c", f32({4, 1, 1}));
  Value* y = g.add(Op::Relu, {g.add(Op::Add, {g.add(Op::Mul, {x, b}), c})});
  g.set_outputs({y, g.add(Op::Sub, {y, x})});
  std::vector<HostTensor> in = {HostTensor::random(DType::F32, {4, 6, 33}, 2),
                                HostTensor::random(DType::F32, {33}, 3),
                                HostTensor::random(DType::F32, {4, 1, 1}, 4)};
  auto exe = compile_and_check(g, in, "bcast");
  Scoreboard sb;
  exe->run(in, &sb);
  EXPECT_EQ(sb.kernels_launched(), 1);
}

TEST(Fusion, ReductionOverEachAxisWithPrologueAndEpilogue) {
  for (int axis = 0; axis < 3; ++axis) {
    for (Op red : {Op::ReduceSum, Op::ReduceMax, Op::ReduceMean, Op::ReduceMin, Op::ReduceProd}) {
      Graph g("reduce");
      Value* x = g.add_input("x", f32({5, 7, 11}));
      Value* pre = g.add(Op::Mul, {g.add(Op::Exp, {x}), g.scalar(DType::F32, 0.75)});
      Value* r = g.add(red, {pre}, {{"axes", std::vector<int64_t>{axis}}, {"keepdim", int64_t(1)}});
      Value* post = g.add(Op::Sub, {x, g.add(Op::Sqrt, {r})});
      g.set_outputs({post, r});
      std::vector<HostTensor> in = {HostTensor::random(DType::F32, {5, 7, 11}, 5, -0.3, 0.3)};
      auto exe = compile_and_check(g, in, str(op_name(red), " axis ", axis));
      Scoreboard sb;
      exe->run(in, &sb);
      EXPECT_EQ(sb.kernels_launched(), 1) << exe->explain();
    }
  }
}

TEST(Fusion, FullReductionToScalar) {
  Graph g("full");
  Value* x = g.add_input("x", f32({301, 67}));
  g.set_outputs({g.add(Op::ReduceSum, {g.add(Op::Abs, {x})})});
  compile_and_check(g, {HostTensor::random(DType::F32, {301, 67}, 6)}, "full");
}

TEST(Fusion, SoftmaxAndLayerNormAreOneKernel) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    Graph g("norms");
    Value* x = g.add_input("x", typed(d, {6, 97}));
    Value* w = g.add_input("w", typed(d, {97}));
    Value* b = g.add_input("b", typed(d, {97}));
    Value* sm = g.add(Op::Softmax, {x});
    Value* ln = g.add(Op::LayerNorm, {x, w, b});
    g.set_outputs({sm, ln});
    std::vector<HostTensor> in = {HostTensor::random(d, {6, 97}, 7, -3, 3), HostTensor::random(d, {97}, 8),
                                  HostTensor::random(d, {97}, 9)};
    auto exe = compile_and_check(g, in, str("norms ", dtype_name(d)));
    Scoreboard sb;
    exe->run(in, &sb);
    EXPECT_LE(sb.kernels_launched(), 2) << exe->explain();
  }
}

TEST(Fusion, SoftmaxOverAxisZeroAndRmsNorm) {
  Graph g("axis0");
  Value* x = g.add_input("x", f32({13, 5}));
  Value* w = g.add_input("w", f32({5}));
  g.set_outputs({g.add(Op::Softmax, {x}, {{"axis", int64_t(0)}}), g.add(Op::RmsNorm, {x, w}),
                 g.add(Op::LogSoftmax, {x})});
  compile_and_check(g, {HostTensor::random(DType::F32, {13, 5}, 10), HostTensor::random(DType::F32, {5}, 11)},
                    "axis0");
}

TEST(Fusion, MatmulEpilogueFusesBiasAndGelu) {
  Graph g("mlp");
  Value* x = g.add_input("x", f32({17, 24}));
  Value* w = g.add_input("w", f32({24, 40}));
  Value* b = g.add_input("b", f32({40}));
  Value* r = g.add_input("r", f32({17, 40}));
  Value* h = g.add(Op::Gelu, {g.add(Op::Add, {g.add(Op::MatMul, {x, w}), b})});
  g.set_outputs({g.add(Op::Add, {h, r})});
  std::vector<HostTensor> in = {HostTensor::random(DType::F32, {17, 24}, 12), HostTensor::random(DType::F32, {24, 40}, 13),
                                HostTensor::random(DType::F32, {40}, 14), HostTensor::random(DType::F32, {17, 40}, 15)};
  // On oneDNN the whole tail (bias, gelu, residual) is the matmul's post-ops: one step.
  auto exe = compile_and_check(g, in, "mlp");
  Scoreboard sb;
  exe->run(in, &sb);
  EXPECT_EQ(sb.kernels_launched(), 1) << exe->explain();
  EXPECT_NE(exe->explain().find("(step 1 folded)"), std::string::npos) << exe->explain();
  // On OpenBLAS the tail is one generated kernel after the GEMM.
  CompileOptions off = test_options();
  off.onednn = false;
  auto blas = compile_and_check(g, in, "mlp on OpenBLAS", off);
  Scoreboard sb2;
  blas->run(in, &sb2);
  ASSERT_EQ(sb2.kernels_launched(), 2) << blas->explain();
  EXPECT_EQ(count_generated(sb2), 1);
  EXPECT_NE(blas->explain().find("library call boundary"), std::string::npos);
}

TEST(Fusion, ViewsAreIndexArithmeticNotCopies) {
  Graph g("views");
  Value* x = g.add_input("x", f32({4, 6, 10}));
  Value* t = g.add(Op::Permute, {x}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
  Value* s = g.add(Op::Slice, {t}, {{"starts", std::vector<int64_t>{1, 0}}, {"ends", std::vector<int64_t>{9, 4}},
                                    {"axes", std::vector<int64_t>{0, 1}}, {"steps", std::vector<int64_t>{2, 1}}});
  Value* r = g.add(Op::Reshape, {s}, {{"shape", Shape{4, 24}}});
  Value* e = g.add(Op::Expand, {g.add_input("c", f32({4, 1}))}, {{"shape", Shape{4, 24}}});
  g.set_outputs({g.add(Op::Add, {g.add(Op::Exp, {r}), e})});
  std::vector<HostTensor> in = {HostTensor::random(DType::F32, {4, 6, 10}, 16), HostTensor::random(DType::F32, {4, 1}, 17)};
  auto exe = compile_and_check(g, in, "views");
  Scoreboard sb;
  exe->run(in, &sb);
  EXPECT_EQ(sb.kernels_launched(), 1) << exe->explain();
}

// A permute that moves only size-1 dims (a decode step's [B, 1, H, D] -> [B, H, 1, D]) is the same
// bytes: an alias, so a library call reading it needs no copy. One that reorders real dims is not.
TEST(Fusion, PermutingOnlyUnitDimsIsAnAlias) {
  for (auto [dims, perm, alias] : std::vector<std::tuple<std::vector<int64_t>, std::vector<int64_t>, bool>>{
           {{3, 1, 4, 5}, {0, 2, 1, 3}, true}, {{1, 1, 4, 5}, {1, 2, 3, 0}, true}, {{3, 1, 4, 5}, {0, 2, 3, 1}, true},
           {{3, 2, 4, 5}, {0, 2, 1, 3}, false}, {{3, 1, 4, 5}, {0, 3, 1, 2}, false}}) {
    Graph g("unit_permute");
    Shape shape;
    for (int64_t d : dims) shape.push_back(SymInt(d));
    Value* x = g.add_input("x", f32(shape));
    Value* p = g.add(Op::Permute, {x}, {{"perm", perm}});
    const Shape& ps = p->type.shape;
    Value* w = g.add_input("w", f32({ps.back().constant(), 3}));
    g.set_outputs({g.add(Op::MatMul, {p, w})});  // a library call: it needs its operand contiguous
    std::vector<int64_t> wdims = {ps.back().constant(), 3};
    std::vector<HostTensor> in = {HostTensor::random(DType::F32, dims, 21), HostTensor::random(DType::F32, wdims, 22)};
    auto exe = compile_and_check(g, in, "unit permute");
    Scoreboard sb;
    exe->run(in, &sb);
    EXPECT_EQ(count_generated(sb), alias ? 0 : 1) << dims_to_string(dims) << " perm " << dims_to_string(perm) << "\n"
                                                  << exe->explain().substr(0, 3000);
  }
}

TEST(Fusion, DifferentIterationSpacesAreRefusedWithReason) {
  Graph g("spaces");
  Value* x = g.add_input("x", f32({8, 3}));
  Value* a = g.add(Op::Exp, {x});
  Value* p = g.add(Op::Permute, {a}, {{"perm", std::vector<int64_t>{1, 0}}});
  Value* y = g.add(Op::Add, {p, g.add_input("y", f32({3, 8}))});
  g.set_outputs({y});
  auto exe = compile_and_check(g, {HostTensor::random(DType::F32, {8, 3}, 18), HostTensor::random(DType::F32, {3, 8}, 19)},
                               "spaces");
  EXPECT_NE(exe->explain().find("starts group 1"), std::string::npos) << exe->explain();
}

TEST(Fusion, SymbolicDimsAreRunTimeArguments) {
  Graph g("sym");
  Value* x = g.add_input("x", f32({SymInt::symbol("B"), 19}));
  Value* w = g.add_input("w", f32({19}));
  g.set_outputs({g.add(Op::Softmax, {g.add(Op::Mul, {x, w})})});
  auto exe = compile(g, test_options());
  for (int64_t b : {1, 3, 64}) {
    std::vector<HostTensor> in = {HostTensor::random(DType::F32, {b, 19}, 20 + uint64_t(b)), HostTensor::random(DType::F32, {19}, 21)};
    expect_matches_interpreter(g, in, *exe, str("B=", b));
  }
  EXPECT_THROW(exe->run({HostTensor::random(DType::F32, {2, 18}, 1), HostTensor::random(DType::F32, {19}, 1)}), Error);
}

TEST(Fusion, FuseOffGivesOneKernelPerOp) {
  Graph g("nofuse");
  Value* x = g.add_input("x", f32({9, 9}));
  g.set_outputs({g.add(Op::Exp, {g.add(Op::Neg, {g.add(Op::Abs, {x})})})});
  CompileOptions o = test_options();
  o.fuse = false;
  std::vector<HostTensor> in = {HostTensor::random(DType::F32, {9, 9}, 22)};
  auto exe = compile_and_check(g, in, "nofuse", o);
  Scoreboard sb;
  exe->run(in, &sb);
  EXPECT_EQ(sb.kernels_launched(), 3);
}

TEST(Fusion, IntegerDivisionByZeroIsAnError) {
  Graph g("idiv");
  Value* x = g.add_input("x", typed(DType::I32, {5}));
  Value* y = g.add_input("y", typed(DType::I32, {5}));
  g.set_outputs({g.add(Op::Div, {x, y})});
  auto exe = compile(g, test_options());
  HostTensor zero = HostTensor::zeros(DType::I32, {5});
  EXPECT_THROW(exe->run({HostTensor::random(DType::I32, {5}, 1, -5, 5), zero}), Error);
}

}  // namespace
}  // namespace kiln::testing
