// The CPU row schedule (lower_group.h): a value a reduction pass computes is kept in the f32/f64
// output row that needs it instead of being recomputed (softmax computes exp once). Compiled against the interpreter on random inputs
// at odd sizes, over the last and other axes, in every float dtype; the Loop IR says what it chose.
#include <gtest/gtest.h>

#include "runtime/executable.h"
#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string loop_ir(const Executable& exe) {
  std::string e = exe.explain();
  size_t a = e.find("== Loop IR =="), b = e.find("== memory ==");
  return e.substr(a, b - a);
}

TEST(RowSchedule, SoftmaxComputesExpOnceInEveryDtypeAndAxis) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;
  };
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    for (const Case& c : {Case{{7, 333}, 1}, Case{{333, 7}, 0}, Case{{3, 37, 5}, 1}, Case{{1001}, 0}}) {
      Graph g("softmax");
      Value* x = g.add_input("x", typed(d, to_shape(c.shape)));
      g.set_outputs({g.add(Op::Softmax, {x}, {{"axis", c.axis}})});
      std::vector<HostTensor> in = {HostTensor::random(d, c.shape, 21, -8, 8)};
      std::string label = str("softmax ", dtype_name(d), " ", dims_to_string(c.shape), " axis ", c.axis);
      auto exe = compile_and_check(g, in, label);
      std::string ir = loop_ir(*exe);
      // The output row can hold exp(x - max) exactly only when it is stored in the compute type.
      bool keeps = d == DType::F32 || d == DType::F64;
      EXPECT_EQ(count(ir, "exp("), keeps ? 1 : 2) << label << "\n" << ir;
      EXPECT_EQ(count(ir, "kept in output"), keeps ? 1 : 0) << label << "\n" << ir;
      EXPECT_EQ(count(ir, "div("), 1) << label << "\n" << ir;  // exact: no reciprocal multiply
      Scoreboard sb;
      exe->run(in, &sb);
      EXPECT_EQ(sb.kernels_launched(), 1) << label;
    }
  }
}

TEST(RowSchedule, LayerNormLogSoftmaxAndRmsNormStillMatch) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    Graph g("norms");
    Value* x = g.add_input("x", typed(d, {7, 333}));
    Value* w = g.add_input("w", typed(d, {333}));
    Value* b = g.add_input("b", typed(d, {333}));
    g.set_outputs({g.add(Op::LayerNorm, {x, w, b}), g.add(Op::LogSoftmax, {x}), g.add(Op::RmsNorm, {x, w})});
    std::vector<HostTensor> in = {HostTensor::random(d, {7, 333}, 22, -4, 4), HostTensor::random(d, {333}, 23),
                                  HostTensor::random(d, {333}, 24)};
    auto exe = compile_and_check(g, in, str("norms ", dtype_name(d)));
    // Their store passes recompute only single ops (x - mean, x - max): nothing worth keeping.
    EXPECT_EQ(count(loop_ir(*exe), "kept in output"), 0) << loop_ir(*exe);
  }
}

// exp(x - max) is itself returned and also normalised: the reduction pass stores the first output
// and the second reads it back; sum(e) and a division by a row value over a non-last axis too.
TEST(RowSchedule, KeptValueThatIsAlsoAnOutput) {
  for (DType d : {DType::F32, DType::F64}) {
    Graph g("shared_exp");
    Value* x = g.add_input("x", typed(d, {5, 9, 7}));
    std::vector<int64_t> axes = {1};
    Value* m = g.add(Op::ReduceMax, {x}, {{"axes", axes}, {"keepdim", int64_t(1)}});
    Value* e = g.add(Op::Exp, {g.add(Op::Sub, {x, m})});
    Value* s = g.add(Op::ReduceSum, {e}, {{"axes", axes}, {"keepdim", int64_t(1)}});
    g.set_outputs({e, g.add(Op::Div, {e, s}), s});
    std::vector<HostTensor> in = {HostTensor::random(d, {5, 9, 7}, 25, -5, 5)};
    auto exe = compile_and_check(g, in, str("shared exp ", dtype_name(d)));
    std::string ir = loop_ir(*exe);
    EXPECT_EQ(count(ir, "exp("), 1) << ir;
    EXPECT_EQ(count(ir, "is stored by the reduction pass"), 1) << ir;
  }
}

// A costly prologue (gelu of a scaled input) feeding both a sum and the output.
TEST(RowSchedule, CostlyPrologueIsKept) {
  Graph g("gelu_norm");
  Value* x = g.add_input("x", f32({11, 129}));
  Value* gx = g.add(Op::Gelu, {g.add(Op::Mul, {x, g.scalar(DType::F32, 1.5)})});
  Value* s = g.add(Op::ReduceSum, {gx}, {{"axes", std::vector<int64_t>{1}}, {"keepdim", int64_t(1)}});
  g.set_outputs({g.add(Op::Div, {gx, g.add(Op::Add, {s, g.scalar(DType::F32, 100.0)})})});
  auto exe = compile_and_check(g, {HostTensor::random(DType::F32, {11, 129}, 26, -3, 3)}, "gelu_norm");
  std::string ir = loop_ir(*exe);
  EXPECT_EQ(count(ir, "gelu("), 1) << ir;
}

// Symbolic row length: the kept row works for any binding.
TEST(RowSchedule, SymbolicRowLength) {
  Graph g("sym");
  Value* x = g.add_input("x", TensorType{DType::F32, {SymInt(3), SymInt::symbol("n")}, Device::CPU});
  g.set_outputs({g.add(Op::Softmax, {x})});
  auto exe = compile(g, test_options());
  for (int64_t n : {1, 17, 1000}) {
    std::vector<HostTensor> in = {HostTensor::random(DType::F32, {3, n}, 27, -9, 9)};
    expect_matches_interpreter(g, in, *exe, str("n=", n));
  }
}

// The CUDA target lowers the same graph without the CPU row schedule (its emitter stages rows in
// shared memory itself): exp is still recomputed there and nothing reads an output back.
TEST(RowSchedule, NotAppliedForOtherTargets) {
  Graph g("softmax");
  g.set_outputs({g.add(Op::Softmax, {g.add_input("x", f32({7, 333}))})});
  auto lowered = runtime::lower_for_target(g, test_options(), "kiln_cu_");
  ASSERT_EQ(lowered->kernels.size(), 1u);
  std::string ir = lower::print_kernel(lowered->kernels[0].kernel);
  EXPECT_EQ(count(ir, "exp("), 2) << ir;
  EXPECT_EQ(count(ir, "div("), 1) << ir;
  EXPECT_TRUE(lowered->kernels[0].kernel.notes.empty());
}

}  // namespace
}  // namespace kiln::testing
