// The tensor API in eager mode: values of operators and scalar mixing, accessors, factories,
// error messages that name the op and operand types, and scoreboard recording.
#include <gtest/gtest.h>

#include "kiln/scoreboard.h"
#include "kiln/trace.h"
#include "unit/trace/trace_test_util.h"

using namespace kiln;
using namespace kiln::trace_test;

namespace {
std::vector<double> doubles(const Tensor& t) { return t.host().to_doubles(); }
}  // namespace

TEST(TensorApi, ArithmeticOperatorsAndScalarsMix) {
  Tensor a = values(DType::F32, {3}, {1, 2, 3});
  Tensor b = values(DType::F32, {3}, {4, 5, 6});
  EXPECT_EQ(doubles(a + b), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(doubles(a - b), (std::vector<double>{-3, -3, -3}));
  EXPECT_EQ(doubles(a * b), (std::vector<double>{4, 10, 18}));
  EXPECT_EQ(doubles(b / a), (std::vector<double>{4, 2.5, 2}));
  EXPECT_EQ(doubles(-a), (std::vector<double>{-1, -2, -3}));
  EXPECT_EQ(doubles(a * 2.0), (std::vector<double>{2, 4, 6}));
  EXPECT_EQ(doubles(10.0 - a), (std::vector<double>{9, 8, 7}));
  EXPECT_EQ(doubles(6.0 / a), (std::vector<double>{6, 3, 2}));
  EXPECT_EQ(doubles(a + 0.5), (std::vector<double>{1.5, 2.5, 3.5}));
  EXPECT_EQ(doubles(pow(a, 2.0)), (std::vector<double>{1, 4, 9}));
  EXPECT_EQ(doubles(maximum(a, 2.0)), (std::vector<double>{2, 2, 3}));
  EXPECT_EQ(doubles(minimum(a, 2.0)), (std::vector<double>{1, 2, 2}));

  // A scalar takes the tensor's dtype: integer division truncates.
  Tensor i = values(DType::I32, {3}, {7, -7, 9});
  Tensor q = i / 2.0;
  EXPECT_EQ(q.dtype(), DType::I32);
  EXPECT_EQ(doubles(q), (std::vector<double>{3, -3, 4}));
  EXPECT_EQ(doubles(mod(i, values(DType::I32, {1}, {4}))), (std::vector<double>{3, 1, 1}));
  EXPECT_EQ(doubles(mod(i, values(DType::I32, {1}, {4}), true)), (std::vector<double>{3, -3, 1}));

  // Broadcasting a row against a column.
  Tensor col = values(DType::F32, {2, 1}, {10, 20});
  Tensor sum = col + a;
  EXPECT_EQ(sum.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(doubles(sum), (std::vector<double>{11, 12, 13, 21, 22, 23}));
}

TEST(TensorApi, ComparisonsAndLogicalOpsReturnBool) {
  Tensor a = values(DType::F32, {4}, {1, 2, 3, 4});
  Tensor lt = a < 2.5;
  EXPECT_EQ(lt.dtype(), DType::Bool);
  EXPECT_EQ(doubles(lt), (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(doubles(a <= 2.0), (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(doubles(a > 2.0), (std::vector<double>{0, 0, 1, 1}));
  EXPECT_EQ(doubles(a >= 2.0), (std::vector<double>{0, 1, 1, 1}));
  EXPECT_EQ(doubles(eq(a, 3.0)), (std::vector<double>{0, 0, 1, 0}));
  EXPECT_EQ(doubles(ne(a, 3.0)), (std::vector<double>{1, 1, 0, 1}));
  Tensor mid = (a > 1.5) && (a < 3.5);
  EXPECT_EQ(doubles(mid), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(doubles(!mid), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ(doubles((a < 1.5) || (a > 3.5)), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ(doubles(logical_xor(a > 1.5, a > 2.5)), (std::vector<double>{0, 1, 0, 0}));
  EXPECT_EQ(doubles(where(mid, a, -1.0)), (std::vector<double>{-1, 2, 3, -1}));
  EXPECT_EQ(doubles(where(mid, 0.0, a)), (std::vector<double>{1, 0, 0, 4}));
}

TEST(TensorApi, MovementAndReductionsGiveExpectedValues) {
  Tensor x = values(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(doubles(transpose(x, 0, 1)), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(doubles(sum(x, {1})), (std::vector<double>{6, 15}));
  EXPECT_EQ(sum(x, {1}, true).sizes(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(doubles(sum(x)), (std::vector<double>{21}));
  EXPECT_DOUBLE_EQ(mean(x).item(), 3.5);
  EXPECT_EQ(doubles(max(x, {0})), (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(doubles(min(x, {-1})), (std::vector<double>{1, 4}));
  EXPECT_EQ(doubles(prod(x, {1})), (std::vector<double>{6, 120}));
  EXPECT_EQ(doubles(argmax(x, 1)), (std::vector<double>{2, 2}));
  EXPECT_EQ(argmax(x, 1).dtype(), DType::I64);
  EXPECT_EQ(doubles(slice_axis(x, 1, 0, 3, 2)), (std::vector<double>{1, 3, 4, 6}));
  EXPECT_EQ(doubles(reshape(x, {3, -1})), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(reshape(x, {3, -1}).sizes(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(doubles(concat({x, x * 10.0}, 0)),
            (std::vector<double>{1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60}));
  EXPECT_EQ(unsqueeze(x, {0}).sizes(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(squeeze(unsqueeze(x, {0})).sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(doubles(tril(values(DType::F32, {2, 2}, {1, 2, 3, 4}))), (std::vector<double>{1, 0, 3, 4}));
  EXPECT_EQ(doubles(index_select(x, 1, values(DType::I64, {2}, {2, 0}))),
            (std::vector<double>{3, 1, 6, 4}));
  EXPECT_EQ(doubles(shape_of(x)), (std::vector<double>{2, 3}));
}

TEST(TensorApi, AccessorsDescribeEagerTensors) {
  Tensor x = random_tensor({2, 5}, 1);
  EXPECT_TRUE(x.defined());
  EXPECT_FALSE(x.is_traced());
  EXPECT_EQ(x.dtype(), DType::F32);
  EXPECT_EQ(x.rank(), 2);
  EXPECT_EQ(x.shape(), (Shape{2, 5}));
  EXPECT_EQ(x.dim(-1), SymInt(5));
  EXPECT_EQ(x.numel(), SymInt(10));
  EXPECT_EQ(x.type().to_string(), "f32[2, 5]");
  EXPECT_NE(error_of([&] { x.dim(2); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { x.item(); }).find("one-element"), std::string::npos);
  Tensor undefined;
  EXPECT_FALSE(undefined.defined());
  EXPECT_NE(error_of([&] { undefined.dtype(); }).find("undefined"), std::string::npos);
  EXPECT_EQ(scalar(2.5, DType::F64).item(), 2.5);
  EXPECT_EQ(scalar(2.5, DType::F64).rank(), 0);
}

TEST(TensorApi, FactoriesAreSeededAndTyped) {
  EXPECT_EQ(doubles(zeros({2, 2})), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(doubles(ones({3}, DType::I32)), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(ones({3}, DType::I32).dtype(), DType::I32);
  EXPECT_EQ(doubles(full({2}, 1.5, DType::F64)), (std::vector<double>{1.5, 1.5}));
  EXPECT_EQ(doubles(arange(4)), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(arange(4).dtype(), DType::I64);
  EXPECT_EQ(doubles(arange(3, 1.0, 0.5, DType::F32)), (std::vector<double>{1, 1.5, 2}));
  Tensor r1 = rand({64}, 7), r2 = rand({64}, 7), r3 = rand({64}, 8);
  EXPECT_TRUE(r1.host().bit_equal(r2.host()));
  EXPECT_FALSE(r1.host().bit_equal(r3.host()));
  for (double v : doubles(rand({64}, 7, 2.0, 3.0))) {
    EXPECT_GE(v, 2.0);
    EXPECT_LT(v, 3.0);
  }
  Tensor n = randn({4096}, 3, 1.0, 2.0);
  EXPECT_NEAR(mean(n).item(), 1.0, 0.15);
  EXPECT_TRUE(randn({8}, 3).host().bit_equal(randn({8}, 3).host()));
  Tensor c = constant(HostTensor::from_doubles(DType::I32, {2}, {4, 5}));
  EXPECT_EQ(doubles(c), (std::vector<double>{4, 5}));
  // Symbolic shapes only mean something while tracing.
  std::string msg = error_of([] { zeros({SymInt::symbol("B"), 2}); });
  EXPECT_NE(msg.find("zeros"), std::string::npos) << msg;
  EXPECT_NE(msg.find("symbolic"), std::string::npos) << msg;
}

TEST(TensorApi, IllTypedCallsNameTheOpAndOperandTypes) {
  Tensor a = random_tensor({2, 3}, 1);
  Tensor b = random_tensor({4, 3}, 2);
  Tensor i = random_tensor({2, 3}, 3, DType::I32, -5, 5);

  std::string shape_msg = error_of([&] { a + b; });
  EXPECT_NE(shape_msg.find("add"), std::string::npos) << shape_msg;
  EXPECT_NE(shape_msg.find("f32[2, 3]"), std::string::npos) << shape_msg;
  EXPECT_NE(shape_msg.find("f32[4, 3]"), std::string::npos) << shape_msg;

  std::string dtype_msg = error_of([&] { mul(a, i); });
  EXPECT_NE(dtype_msg.find("mul"), std::string::npos) << dtype_msg;
  EXPECT_NE(dtype_msg.find("i32"), std::string::npos) << dtype_msg;

  std::string matmul_msg = error_of([&] { matmul(a, a); });
  EXPECT_NE(matmul_msg.find("matmul"), std::string::npos) << matmul_msg;
  EXPECT_NE(matmul_msg.find("f32[2, 3]"), std::string::npos) << matmul_msg;

  std::string axis_msg = error_of([&] { softmax(a, 5); });
  EXPECT_NE(axis_msg.find("softmax"), std::string::npos) << axis_msg;
  EXPECT_NE(axis_msg.find("axis"), std::string::npos) << axis_msg;

  std::string float_msg = error_of([&] { exp(i); });
  EXPECT_NE(float_msg.find("exp"), std::string::npos) << float_msg;
  EXPECT_NE(float_msg.find("i32"), std::string::npos) << float_msg;

  std::string bool_msg = error_of([&] { a && a; });
  EXPECT_NE(bool_msg.find("and"), std::string::npos) << bool_msg;

  EXPECT_NE(error_of([&] { conv2d(random_tensor({1, 1, 4, 4}, 4), random_tensor({1, 1, 3, 3}, 5), {},
                                  {1, 1}, {1, 1, 1}); })
                .find("padding"),
            std::string::npos);
  EXPECT_NE(error_of([&] { transpose(a, 0, 2); }).find("transpose"), std::string::npos);
  std::string gap_msg = error_of([&] { apply(Op::Where, {a > 0.0, Tensor(), b}); });
  EXPECT_NE(gap_msg.find("undefined"), std::string::npos) << gap_msg;
  EXPECT_NE(error_of([&] { apply(Op::Split, {a}, {{"axis", int64_t(0)}, {"sizes", std::vector<int64_t>{1, 1}}}); })
                .find("apply_multi"),
            std::string::npos);
}

TEST(TensorApi, EagerOpsRecordOnTheCurrentScoreboard) {
  Tensor a = random_tensor({16, 8}, 1), w = random_tensor({8, 4}, 2);
  Scoreboard sb;
  {
    ScoreboardScope scope(&sb);
    EXPECT_EQ(&eager_scoreboard(), &sb);
    Tensor y = relu(matmul(a, w) + 1.0);
    (void)y;
  }
  EXPECT_EQ(sb.kernels_launched(), 3);  // matmul, add, relu
  EXPECT_GT(sb.bytes_moved(), 16 * 8 * 4);
  EXPECT_GT(sb.flops(), 0);
  EXPECT_GT(sb.dispatch_us(), 0);

  Scoreboard outer, inner;
  {
    ScoreboardScope o(&outer);
    exp(a);
    {
      ScoreboardScope i(&inner);
      exp(a);
      exp(a);
    }
    {
      ScoreboardScope silent(nullptr);
      exp(a);  // recorded nowhere
    }
    exp(a);
  }
  EXPECT_EQ(outer.kernels_launched(), 2);
  EXPECT_EQ(inner.kernels_launched(), 2);

  Scoreboard& thread_default = eager_scoreboard();
  int64_t before = thread_default.kernels_launched();
  exp(a);
  EXPECT_EQ(thread_default.kernels_launched(), before + 1);
}
