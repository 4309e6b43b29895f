// The row statistics (tests/common/row_statistics.h) accept the interpreter's own softmax,
// log_softmax, layer_norm and rms_norm and reject what a wrong row kernel gives: all zeros, rows
// scaled by 1%, one row's statistics used for another, a forgotten bias.
#include <gtest/gtest.h>

#include "common/row_statistics.h"
#include "kiln/interp.h"

namespace kiln::testing {
namespace {

struct RowCase {
  std::unique_ptr<Graph> g;
  std::vector<HostTensor> inputs;
  HostTensor want;
};

RowCase make_case(Op op, DType t, int64_t rows, int64_t cols) {
  RowCase c;
  c.g = std::make_unique<Graph>("rows");
  Value* x = c.g->add_input("x", TensorType{t, {SymInt(rows), SymInt(cols)}, Device::CPU});
  c.inputs.push_back(HostTensor::random(t, {rows, cols}, 11, -4, 3));
  // Rows of different spread, so reusing one row's statistics for another shows.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) c.inputs[0].set_f64(r * cols + j, c.inputs[0].get_f64(r * cols + j) * double(r + 1));
  std::vector<Value*> operands = {x};
  if (op == Op::LayerNorm || op == Op::RmsNorm) {
    operands.push_back(c.g->add_input("w", TensorType{t, {SymInt(cols)}, Device::CPU}));
    c.inputs.push_back(HostTensor::random(t, {cols}, 12, 0.5, 1.5));
  }
  if (op == Op::LayerNorm) {
    operands.push_back(c.g->add_input("b", TensorType{t, {SymInt(cols)}, Device::CPU}));
    c.inputs.push_back(HostTensor::random(t, {cols}, 13, -1, 1));
  }
  c.g->set_outputs({c.g->add(op, operands)});
  c.want = interp::run(*c.g, c.inputs)[0];
  return c;
}

TEST(RowStatistics, TheReferenceMeetsThemInEveryFloatDtype) {
  for (Op op : {Op::Softmax, Op::LogSoftmax, Op::LayerNorm, Op::RmsNorm})
    for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
      RowCase c = make_case(op, t, 3, 4097);
      EXPECT_EQ(check_row_statistics(*c.g, c.inputs, 0, c.want), "") << op_name(op) << " " << dtype_name(t);
    }
}

TEST(RowStatistics, WrongRowKernelsFail) {
  for (Op op : {Op::Softmax, Op::LogSoftmax, Op::LayerNorm, Op::RmsNorm})
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
      RowCase c = make_case(op, t, 3, 70001);
      std::string what = str(op_name(op), " ", dtype_name(t));
      HostTensor zeros = HostTensor::zeros(t, c.want.shape());
      EXPECT_NE(check_row_statistics(*c.g, c.inputs, 0, zeros), "") << what << ": all zeros";
      HostTensor scaled = c.want.clone();
      for (int64_t i = 0; i < scaled.numel(); ++i) scaled.set_f64(i, c.want.get_f64(i) * 1.1);
      EXPECT_NE(check_row_statistics(*c.g, c.inputs, 0, scaled), "") << what << ": scaled by 1.1";
      if (op == Op::LayerNorm || op == Op::RmsNorm) {  // row 0's normalisation applied to row 2
        HostTensor reused = c.want.clone();
        int64_t cols = c.want.shape()[1];
        for (int64_t j = 0; j < cols; ++j) {
          double w = c.inputs[1].get_f64(j), b = op == Op::LayerNorm ? c.inputs[2].get_f64(j) : 0;
          double z = (c.want.get_f64(2 * cols + j) - b) / w;
          reused.set_f64(2 * cols + j, z * 3 * w + b);  // row 2's spread is 3x row 0's
        }
        EXPECT_NE(check_row_statistics(*c.g, c.inputs, 0, reused), "") << what << ": another row's statistics";
      }
      if (op == Op::LayerNorm) {
        HostTensor no_bias = c.want.clone();
        for (int64_t i = 0; i < no_bias.numel(); ++i)
          no_bias.set_f64(i, c.want.get_f64(i) - c.inputs[2].get_f64(i % c.want.shape()[1]));
        EXPECT_NE(check_row_statistics(*c.g, c.inputs, 0, no_bias), "") << what << ": the bias forgotten";
      }
    }
}

TEST(RowStatistics, OtherOutputsAreNotJudged) {
  Graph g("sum");
  Value* x = g.add_input("x", TensorType{DType::F32, {SymInt(2), SymInt(9)}, Device::CPU});
  g.set_outputs({g.add(Op::Exp, {x})});
  HostTensor anything = HostTensor::random(DType::F32, {2, 9}, 1);
  EXPECT_EQ(check_row_statistics(g, {anything}, 0, anything), "");
}

}  // namespace
}  // namespace kiln::testing
