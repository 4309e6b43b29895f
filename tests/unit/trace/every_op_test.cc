// Every op in the op table is reachable from the tensor API: through apply() for every op sample
// (eager vs the interpreter, and traced vs the interpreter), and through its named function.
#include <gtest/gtest.h>

#include <set>

#include "common/op_samples.h"
#include "kiln/interp.h"
#include "kiln/trace.h"
#include "common/eager_tolerance.h"
#include "unit/trace/trace_test_util.h"

using namespace kiln;
using namespace kiln::trace_test;

namespace {
// Eager kernels may accumulate in the storage type; the interpreter uses float64.
std::pair<double, double> tolerance(DType d) {
  switch (d) {
    case DType::F16: return {1e-2, 1e-2};
    case DType::BF16: return {6e-2, 2e-2};
    case DType::F32: return {1e-4, 1e-3};
    default: return {1e-9, 1e-9};
  }
}

std::vector<Tensor> wrap(const std::vector<HostTensor>& hosts) {
  std::vector<Tensor> out;
  for (const HostTensor& h : hosts) out.push_back(Tensor::from_host(h));
  return out;
}
}  // namespace

TEST(EveryOp, ApplyRunsEverySampleEagerlyAndTraced) {
  for (const kiln::testing::OpSample& s : kiln::testing::op_samples()) {
    SCOPED_TRACE(s.label);
    std::vector<HostTensor> inputs = kiln::testing::sample_inputs(s, 7);
    std::vector<HostTensor> reference = interp::run_op(s.op, s.attrs, inputs);

    std::vector<Tensor> eager = apply_multi(s.op, wrap(inputs), s.attrs);
    ASSERT_EQ(eager.size(), reference.size());
    for (size_t i = 0; i < eager.size(); ++i)
      EXPECT_TRUE(kiln::testing::tensors_match(eager[i].host(), reference[i],
                                               kiln::testing::eager_tolerance(s.op, reference[i].dtype())))
          << "result " << i;

    // Traced through apply, run by the interpreter: the same kernels, so the same bits.
    TraceFn fn = [&](const std::vector<Tensor>& in) { return apply_multi(s.op, in, s.attrs); };
    TracedFunction traced = trace(fn, wrap(inputs));
    ASSERT_EQ(traced.graph().num_nodes(), 1);
    EXPECT_EQ(traced.graph().nodes().front()->op, s.op);
    std::vector<Tensor> got = traced(wrap(inputs));
    ASSERT_EQ(got.size(), reference.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(got[i].host().bit_equal(reference[i])) << "traced result " << i;
  }
}

namespace {
// Calls every named API function once. Inputs come in traced (or eager); index tensors and
// weights are eager constants.
std::vector<Tensor> call_every_named_function(const Tensor& x) {  // x: f32[2, 3, 4, 5]
  std::vector<Tensor> r;
  Tensor pos = abs(x) + 0.5;
  // unary
  for (Tensor t : {neg(x), abs(x), exp(x), log(pos), sqrt(pos), rsqrt(pos), reciprocal(pos), tanh(x),
                   sigmoid(x), erf(x), relu(x), gelu(x), gelu(x, "tanh"), silu(x), sin(x), cos(x),
                   floor(x * 3.0), ceil(x * 3.0), round(x * 3.0), sign(x), isnan(x),
                   cast(x * 4.0, DType::I32), clamp(x, -0.5, 0.25)})
    r.push_back(t);
  Tensor unit = tanh(x) * 0.9;
  for (Tensor t : {asin(unit), acos(unit), atan(x), sinh(x), cosh(x), asinh(x), acosh(pos + 1.0), atanh(unit)})
    r.push_back(t);
  Tensor ix = cast(x * 10.0, DType::I32), iy = cast(abs(x) * 3.0, DType::I32);
  for (Tensor t : {bit_not(ix), bit_and(ix, iy), bit_or(ix, iy), bit_xor(ix, iy), bit_shift(ix, iy, true),
                   bit_shift(ix, iy, false), det(reshape(x, {30, 2, 2}))})
    r.push_back(t);
  r.push_back(logical_not(x > 0.0));
  // binary
  Tensor y = x * 0.5 + 0.25;
  for (Tensor t : {add(x, y), sub(x, y), mul(x, y), div(x, pos), pow(pos, y), maximum(x, y),
                   minimum(x, y), mod(x, pos), mod(x, pos, true), eq(x, y), ne(x, y), lt(x, y),
                   le(x, y), gt(x, y), ge(x, y), logical_and(x > 0.0, y > 0.0),
                   logical_or(x > 0.0, y > 0.0), logical_xor(x > 0.0, y > 0.0),
                   where(x > 0.0, x, y)})
    r.push_back(t);
  // reductions
  for (Tensor t : {sum(x, {1}), mean(x, {2, 3}, true), max(x, {0}), min(x, {-1}), prod(pos, {3}),
                   argmax(x, 2), argmin(x, 1, true), cumsum(x, 3), cumsum(x, 1, true, true)})
    r.push_back(t);
  std::vector<Tensor> top = topk(x, 2, -1);
  r.insert(r.end(), top.begin(), top.end());
  std::vector<Tensor> sorted = sort(x, 1, true);
  r.insert(r.end(), sorted.begin(), sorted.end());
  r.push_back(argsort(x, -1));
  Tensor logits = reshape(x, {6, 20});
  Tensor seeds = random_tensor({6}, 12, DType::I64, 0, 1000), steps = random_tensor({6}, 13, DType::I64, 0, 50);
  r.push_back(sample(logits, seeds, steps, SampleOptions{.temperature = 0.7, .top_k = 5, .top_p = 0.9}));
  // movement
  Tensor idx = values(DType::I64, {2}, {3, 0});
  Tensor elem_idx = random_tensor({2, 3, 4, 2}, 11, DType::I64, 0, 4);
  for (Tensor t : {reshape(x, {6, -1}), permute(x, {3, 1, 0, 2}), transpose(x, 1, 3),
                   expand(sum(x, {1}, true), {2, 3, 4, 5}), slice(x, {0, 1}, {2, 4}, {1, 3}),
                   slice_axis(x, 2, -1, 0, -1), concat({x, y}, 1), pad(x, {0, 0, 1, 1, 0, 0, 2, 0}),
                   pad(x, {0, 0, 1, 1, 0, 0, 1, 1}, "reflect"), squeeze(slice_axis(x, 0, 0, 1), {0}),
                   unsqueeze(x, {1}), flatten(x, 1), gather(x, idx, 2), gather_elements(x, elem_idx, 3),
                   index_select(x, 3, idx), tril(x, 1), triu(x, -1), shape_of(x)})
    r.push_back(t);
  std::vector<Tensor> parts = split(x, 3, {2, 3});
  r.insert(r.end(), parts.begin(), parts.end());
  r.push_back(resize(x, {2, 3, 8, 10}));
  r.push_back(resize(x, {2, 3, 6, 7}, "linear"));
  // contractions and nn
  Tensor w = random_tensor({5, 6}, 12);
  Tensor conv_w = random_tensor({4, 3, 3, 3}, 13), conv_b = random_tensor({4}, 14);
  Tensor convt_w = random_tensor({3, 2, 2, 2}, 15);
  Tensor channel = random_tensor({3}, 16, DType::F32, 0.5, 1.5);
  Tensor feat = random_tensor({5}, 17);
  for (Tensor t : {matmul(x, w), conv2d(x, conv_w, conv_b, {1, 1}, {1, 1}),
                   conv2d(x, conv_w, {}, {2, 1}, {0, 1, 0, 1}, {1, 1}),
                   conv_transpose2d(x, convt_w, {}, {2, 2}), im2col(x, {3, 2}, {2, 1}, {1, 0, 1, 1}, {1, 2}),
                   max_pool2d(x, {2, 2}), max_pool2d(x, {3, 3}, {1, 1}, {1, 1}, {1, 1}, true),
                   avg_pool2d(x, {2, 2}, {1, 1}), global_avg_pool(x), softmax(x, 1), log_softmax(x),
                   layer_norm(x, feat, feat), layer_norm(x, {}, feat), layer_norm(x, {}, {}, 2),
                   rms_norm(x, feat), batch_norm(x, channel, channel, channel * 0.1, channel),
                   attention(x, x, x), attention(x, x, x, {}, true, 0.5),
                   attention(x, x, x, tril(ones({4, 4})) > 0.0)})
    r.push_back(t);
  // sources
  for (Tensor t : {full({2, 3}, 1.5), zeros({3}, DType::I32), ones({2}), arange(5, 1, 2),
                   rand({4, 3}, 5), randn({6}, 9, 1.0, 0.5),
                   constant(HostTensor::from_doubles(DType::F32, {2}, {1, 2}))})
    r.push_back(t);
  return r;
}
}  // namespace

TEST(EveryOp, NamedFunctionsCoverTheOpTableAndAgreeAcrossModes) {
  Tensor x = random_tensor({2, 3, 4, 5}, 1);
  std::vector<Tensor> eager = call_every_named_function(x);
  TracedFunction traced = trace([](const std::vector<Tensor>& in) { return call_every_named_function(in[0]); },
                                {x});
  std::set<Op> recorded;
  for (const auto& node : traced.graph().nodes()) recorded.insert(node->op);
  for (int i = 0; i < kNumOps; ++i)  // control flow and containers come from ONNX, not the tensor API
    if (!has_trait(Op(i), kSubgraph) && !has_trait(Op(i), kContainer)) {
      EXPECT_TRUE(recorded.count(Op(i))) << "no named API function records op " << op_name(Op(i));
    }

  std::vector<Tensor> interpreted = traced({x});
  ASSERT_EQ(interpreted.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    auto [atol, rtol] = tolerance(eager[i].dtype());
    EXPECT_TRUE(close(interpreted[i], eager[i], std::max(atol, 1e-4), std::max(rtol, 1e-3)))
        << "result " << i << " (" << eager[i].type().to_string() << ")";
  }
}
