// The demo models: eager and traced+interpreted runs agree, one trace serves several batch and
// sequence sizes, and the eager scoreboard shows one kernel per op.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/demo.h"
#include "kiln/trace.h"
#include "unit/trace/trace_test_util.h"

using namespace kiln;
using namespace kiln::trace_test;

TEST(DemoModels, MlpAgreesAcrossModesForEveryBatchSize) {
  demo::MlpParams params = demo::make_mlp_params({12, 20, 7}, 3);
  auto fn = [&](const Tensor& x) { return demo::mlp(x, params); };
  TraceOptions options;
  options.dynamic_dims = {{0, 0, "B"}};
  TracedFunction f = trace(fn, random_tensor({4, 12}, 1), options);
  for (int64_t b : {1, 4, 13}) {
    Tensor x = random_tensor({b, 12}, uint64_t(b) + 10);
    Tensor out = f(x);
    EXPECT_EQ(out.sizes(), (std::vector<int64_t>{b, 7}));
    EXPECT_TRUE(close(fn(x), out, 1e-5, 1e-4)) << "B = " << b;
  }
  EXPECT_EQ(f.num_traces(), 1);
}

TEST(DemoModels, TransformerBlockAgreesWithDynamicBatchAndSequence) {
  demo::BlockConfig config{32, 4, 64};
  demo::BlockParams params = demo::make_block_params(config, 5);
  auto fn = [&](const Tensor& x) { return demo::transformer_block(x, params); };
  TraceOptions options;
  options.dynamic_dims = {{0, 0, "B"}, {0, 1, "T"}};
  TracedFunction f = trace(fn, random_tensor({2, 5, 32}, 1), options);
  EXPECT_EQ(f.graph().inputs()[0]->type.to_string(), "f32[B, T, 32]");
  EXPECT_EQ(f.graph().outputs()[0]->type.to_string(), "f32[B, T, 32]");
  EXPECT_TRUE(f.graph().guards().empty()) << f.guards_text();
  int attentions = 0;
  for (const auto& node : f.graph().nodes()) attentions += node->op == Op::Attention;
  EXPECT_EQ(attentions, 1);
  for (auto [b, t] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 5}, {3, 11}}) {
    Tensor x = random_tensor({b, t, 32}, uint64_t(b * 100 + t));
    EXPECT_TRUE(close(fn(x), f(x), 1e-4, 1e-3)) << "B = " << b << ", T = " << t;
  }
  EXPECT_EQ(f.num_traces(), 1);
}

TEST(DemoModels, TransformerBlockIsCausal) {
  // Changing the last position must not change earlier positions' outputs.
  demo::BlockParams params = demo::make_block_params(demo::BlockConfig{16, 2, 32}, 2);
  Tensor x = random_tensor({1, 6, 16}, 1);
  Tensor changed = concat({slice_axis(x, 1, 0, 5), random_tensor({1, 1, 16}, 9)}, 1);
  Tensor a = demo::transformer_block(x, params), b = demo::transformer_block(changed, params);
  EXPECT_TRUE(close(slice_axis(a, 1, 0, 5), slice_axis(b, 1, 0, 5), 1e-6, 1e-6));
  EXPECT_FALSE(close(slice_axis(a, 1, 5, 6), slice_axis(b, 1, 5, 6), 1e-6, 1e-6));
}

TEST(DemoModels, RunDemoReportsAgreementAndAnEagerScoreboard) {
  std::vector<demo::DemoResult> results = demo::run_demo();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].model, "mlp");
  EXPECT_EQ(results[1].model, "transformer_block");
  for (const demo::DemoResult& r : results) {
    SCOPED_TRACE(r.model);
    EXPECT_TRUE(r.ok()) << r.agreement.to_string() << ", traces " << r.num_traces;
    EXPECT_EQ(r.num_traces, 1);
    EXPECT_EQ(r.input_shapes.size(), 2u);
    EXPECT_GT(r.eager_scoreboard.kernels_launched(), 3);
    EXPECT_GT(r.eager_scoreboard.bytes_moved(), 0);
  }
  // mlp: 3 x (matmul + add) + 2 relu.
  EXPECT_EQ(results[0].eager_scoreboard.kernels_launched(), 8);
}

TEST(DemoModels, CompareMeasuresAbsoluteAndRelativeError) {
  HostTensor e = HostTensor::from_doubles(DType::F64, {3}, {1.0, 100.0, NAN});
  HostTensor a = HostTensor::from_doubles(DType::F64, {3}, {1.5, 100.0, NAN});
  demo::Agreement agree = demo::compare(e, a, 1e-3, 1e-3);
  EXPECT_DOUBLE_EQ(agree.max_abs_error, 0.5);
  EXPECT_DOUBLE_EQ(agree.max_rel_error, 0.5);
  EXPECT_FALSE(agree.within_tolerance);
  EXPECT_TRUE(demo::compare(e, a, 1.0, 0).within_tolerance);
  HostTensor nan_vs_number = HostTensor::from_doubles(DType::F64, {3}, {1.0, 100.0, 0.0});
  EXPECT_FALSE(demo::compare(e, nan_vs_number, 1e9, 1e9).within_tolerance);
  EXPECT_THROW(demo::compare(e, HostTensor::zeros(DType::F64, {2}), 1, 1), Error);
}

// Default tolerances follow the dtype: a one-ulp bf16 difference (values rounded differently by a
// compiled kernel) passes bf16's, a 1% error fails f32's.
TEST(DemoModels, DefaultTolerancesFollowTheDtype) {
  auto [f32_atol, f32_rtol] = demo::default_tolerances(DType::F32);
  EXPECT_EQ(f32_atol, 1e-4);
  EXPECT_EQ(f32_rtol, 1e-3);
  EXPECT_EQ(demo::default_tolerances(DType::I32), (std::pair<double, double>{0, 0}));
  // Given tolerances (>= 0) win; each one not given keeps the dtype's default.
  EXPECT_EQ(demo::tolerances_for(DType::BF16, 0.5, -1), (std::pair<double, double>{0.5, 3e-2}));
  EXPECT_EQ(demo::tolerances_for(DType::F32, -1, 0), (std::pair<double, double>{1e-4, 0}));
  HostTensor want = HostTensor::empty(DType::BF16, {2}), got = HostTensor::empty(DType::BF16, {2});
  want.set_f64(0, 0.75), want.set_f64(1, -3.0);
  got.set_f64(0, 0.75 + 0.00390625), got.set_f64(1, -3.0);  // one ulp of bf16 at 0.75
  auto [atol, rtol] = demo::default_tolerances(DType::BF16);
  EXPECT_TRUE(demo::compare(want, got, atol, rtol).within_tolerance);
  got.set_f64(1, -3.5);
  EXPECT_FALSE(demo::compare(want, got, atol, rtol).within_tolerance);
  HostTensor w32 = HostTensor::empty(DType::F32, {1}), g32 = HostTensor::empty(DType::F32, {1});
  w32.set_f64(0, 2.0), g32.set_f64(0, 2.02);
  EXPECT_FALSE(demo::compare(w32, g32, f32_atol, f32_rtol).within_tolerance);
}
