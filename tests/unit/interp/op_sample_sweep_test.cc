// Every op runs on every sample of tests/common/op_samples: the interpreter must produce outputs of
// the declared types, deterministically, and without NaN where the sample's inputs are NaN-free and
// inside the op's domain. Why: catches an op whose reference kernel crashes or was never exercised.
#include <gtest/gtest.h>

#include <set>

#include "common/op_samples.h"
#include "interp_test_util.h"

using namespace kiln;
using namespace kiln::test;

TEST(OpSampleSweep, EverySampleRunsWithDeclaredTypesDeterministically) {
  for (const auto& s : kiln::testing::op_samples()) {
    auto g = kiln::testing::build_sample_graph(s);
    std::vector<HostTensor> in = kiln::testing::sample_inputs(s, 3);
    std::vector<HostTensor> out;
    try {
      out = interp::run(*g, in);
    } catch (const Error& e) {
      ADD_FAILURE() << s.label << ": " << e.what();
      continue;
    }
    ASSERT_EQ(out.size(), g->outputs().size()) << s.label;
    for (size_t i = 0; i < out.size(); ++i) {
      const TensorType& type = g->outputs()[i]->type;
      EXPECT_EQ(out[i].dtype(), type.dtype) << s.label;
      EXPECT_EQ(out[i].shape(), type.static_shape()) << s.label;
      if (!s.inject_nan && is_float(out[i].dtype()))
        for (int64_t k = 0; k < out[i].numel(); ++k)
          if (std::isnan(out[i].get_f64(k))) {
            ADD_FAILURE() << s.label << ": NaN at output " << i << " element " << k;
            break;
          }
    }
    // Deterministic: a second run gives bit-identical results.
    std::vector<HostTensor> again = interp::run(*g, in);
    for (size_t i = 0; i < out.size(); ++i) EXPECT_TRUE(out[i].bit_equal(again[i])) << s.label;
  }
}

// An op added to ops.def without a sample is never exercised by the sweeps.
TEST(OpSampleSweep, EveryOpHasASample) {
  std::set<Op> covered;
  for (const auto& s : kiln::testing::op_samples()) covered.insert(s.op);
  for (int i = 0; i < kNumOps; ++i)  // control flow and containers: control_flow_test.cc
    if (!has_trait(Op(i), kSubgraph) && !has_trait(Op(i), kContainer)) {
      EXPECT_TRUE(covered.count(Op(i))) << "no sample for op #" << i << " (" << op_info(Op(i)).name << ")";
    }
}
