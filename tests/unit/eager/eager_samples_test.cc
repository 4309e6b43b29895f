// Every op sample (tests/common/op_samples) run eagerly and through the reference interpreter on
// random inputs for several seeds: outputs must agree within the per-(op, dtype) tolerance, and
// each call must leave exactly one scoreboard record.
#include <gtest/gtest.h>

#include "common/op_samples.h"
#include "kernels/cpu/eager.h"
#include "kiln/interp.h"
#include "common/eager_tolerance.h"

namespace kiln::testing {
namespace {

class EagerSample : public ::testing::TestWithParam<size_t> {};

TEST_P(EagerSample, MatchesReferenceInterpreter) {
  const OpSample& s = op_samples()[GetParam()];
  SCOPED_TRACE(s.label);
  for (uint64_t seed : {1, 2, 3}) {
    SCOPED_TRACE(str("seed ", seed));
    std::vector<HostTensor> inputs = sample_inputs(s, seed);
    std::vector<HostTensor> want = interp::run_op(s.op, s.attrs, inputs);
    Scoreboard sb;
    std::vector<HostTensor> got = eager::run_op(s.op, s.attrs, inputs, &sb);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(tensors_match(got[i], want[i], eager_tolerance(s.op, want[i].dtype()))) << "output " << i;
    ASSERT_EQ(sb.kernels_launched(), 1);
    const KernelRecord& r = sb.kernels()[0];
    EXPECT_EQ(r.source_ops, std::vector<std::string>{std::string(op_name(s.op))});
    EXPECT_EQ(r.name.rfind(std::string(op_name(s.op)), 0), 0u) << r.name;
    // The name says whether the fast kernel ran; has_fast_kernel must agree for these inputs
    // (where's data dtype is its second operand; sources have none).
    DType dtype = s.op == Op::Where ? inputs[1].dtype() : inputs.empty() ? want[0].dtype() : inputs[0].dtype();
    if (!eager::has_fast_kernel(s.op, dtype)) {
      EXPECT_NE(r.name.find("(reference)"), std::string::npos) << r.name;
    }
  }
}

std::string sample_name(const ::testing::TestParamInfo<size_t>& info) {
  std::string name = op_samples()[info.param].label;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name + "_" + std::to_string(info.param);
}

INSTANTIATE_TEST_SUITE_P(AllOps, EagerSample, ::testing::Range(size_t(0), op_samples().size()), sample_name);

// Ops that must run a fast kernel for the sample dtypes below (a regression guard: a family that
// stops claiming its ops would silently fall back to the slow reference).
TEST(EagerSample, FastKernelsCoverTheCommonOps) {
  for (Op op : {Op::Add, Op::Mul, Op::Exp, Op::Relu, Op::Cast, Op::Where, Op::ReduceSum, Op::ArgMax,
                Op::MatMul, Op::Softmax, Op::LayerNorm, Op::RmsNorm, Op::Permute, Op::Concat, Op::Slice,
                Op::Reshape, Op::Gather})
    for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64})
      EXPECT_TRUE(eager::has_fast_kernel(op, d)) << op_name(op) << " " << dtype_name(d);
  EXPECT_TRUE(eager::has_fast_kernel(Op::Add, DType::I32));
  EXPECT_FALSE(eager::has_fast_kernel(Op::MatMul, DType::I32));
  EXPECT_TRUE(eager::has_fast_kernel(Op::Conv2d, DType::F32));   // im2col + sgemm (conv.cc)
  EXPECT_FALSE(eager::has_fast_kernel(Op::Conv2d, DType::F16));  // f32 only; others: reference
  EXPECT_FALSE(eager::has_fast_kernel(Op::Exp, DType::I32));
}

}  // namespace
}  // namespace kiln::testing
