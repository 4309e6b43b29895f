// oneDNN max and average pooling (runtime/onednn_plan.h, kernels/cpu/onednn_pool.h) against the
// interpreter: odd sizes, strides, asymmetric pads, ceil_mode, dilation, count_include_pad on and
// off, f32 and bf16; and a conv -> max pool -> conv chain in which the pool reads and writes the
// convs' blocked layout. Why: the pool replaces the eager kernel in every CNN's stem, and a wrong
// window size or border rule shows only at the edges.
#include <gtest/gtest.h>

#include <limits>

#include "kernels/cpu/onednn_common.h"
#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

using Ints = std::vector<int64_t>;

struct PoolCase {
  const char* label;
  Op op;
  Ints x, kernel, strides, pads, dilations;
  int64_t ceil_mode, count_include_pad;
};

const std::vector<PoolCase> kCases = {
    {"max 3x3 s2 p1 (ResNet stem)", Op::MaxPool2d, {1, 5, 17, 17}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0, 0},
    {"max 3x3 s2 ceil (SqueezeNet)", Op::MaxPool2d, {2, 3, 14, 13}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, 0},
    {"max 2x3 dilated asymmetric pads", Op::MaxPool2d, {1, 4, 11, 12}, {2, 3}, {1, 2}, {1, 0, 0, 2}, {2, 1}, 0, 0},
    {"avg 3x3 s1 p1 exclude pad", Op::AvgPool2d, {1, 6, 9, 10}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 0, 0},
    {"avg 3x3 s2 p1 include pad", Op::AvgPool2d, {1, 6, 13, 11}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0, 1},
    {"avg 2x2 s2 ceil exclude pad", Op::AvgPool2d, {1, 3, 9, 7}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, 0},
};

std::unique_ptr<Graph> pool_graph(const PoolCase& c, DType dt) {
  auto g = std::make_unique<Graph>("pool");
  Value* x = g->add_input("x", typed(dt, to_shape(c.x)));
  Attrs a{{"kernel", c.kernel}, {"strides", c.strides}, {"pads", c.pads}, {"ceil_mode", c.ceil_mode}};
  if (c.op == Op::MaxPool2d) a.set("dilations", c.dilations);
  else a.set("count_include_pad", c.count_include_pad);
  g->set_outputs({g->add(c.op, {x}, a)});
  return g;
}

void check_pools(DType dt) {
  for (size_t i = 0; i < kCases.size(); ++i) {
    const PoolCase& c = kCases[i];
    const std::string label = str(c.label, ", ", dtype_name(dt));
    SCOPED_TRACE(label);
    auto g = pool_graph(c, dt);
    auto exe = compile(*g, test_options());
    std::vector<HostTensor> in{HostTensor::random(dt, c.x, 40 + i, -3, 3)};
    expect_matches_interpreter(*g, in, *exe, label);
    EXPECT_NE(exe->explain().find("oneDNN"), std::string::npos) << exe->explain().substr(0, 2000);
  }
}

TEST(OnednnPool, MatchesTheInterpreterF32) { check_pools(DType::F32); }

TEST(OnednnPool, MatchesTheInterpreterBF16) {
  if (!eager::onednn::supports_dtype(DType::BF16)) GTEST_SKIP() << "oneDNN has no bf16 on this CPU (needs AVX-512)";
  check_pools(DType::BF16);
}

// Max pools run Kiln's loop over oneDNN's channel blocks: 19 channels (two blocks of 8 and a
// padded one), every special value in the source — a NaN wins its window, -inf loses unless alone
// with -inf, +inf wins — and a plain source, which the pool reorders into a blocked layout itself.
TEST(OnednnPool, MaxPoolKeepsNaNAndInfinitiesInEveryLane) {
  PoolCase c{"max 3x3 s2 ceil, special values", Op::MaxPool2d, {2, 19, 15, 14}, {3, 3}, {2, 2}, {0, 1, 0, 1}, {1, 1}, 1, 0};
  auto g = pool_graph(c, DType::F32);
  auto exe = compile(*g, test_options());
  HostTensor x = HostTensor::random(DType::F32, c.x, 77, -3, 3);
  float* d = x.data<float>();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < x.numel(); i += 37) d[i] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 11; i < x.numel(); i += 53) d[i] = inf;
  for (int64_t i = 5; i < x.numel(); i += 7) d[i] = -inf;
  for (int64_t i = 3; i < x.numel(); i += 41) d[i] = -0.0f;
  expect_matches_interpreter(*g, {x}, *exe, c.label);
  EXPECT_NE(exe->explain().find("oneDNN"), std::string::npos) << exe->explain().substr(0, 2000);
}

// An average that counts padding must not reach into ceil_mode's extra border (oneDNN would count
// it too): that one stays on the eager kernel, still correct.
TEST(OnednnPool, CeilModeIncludePadStaysEager) {
  PoolCase c{"avg ceil include pad", Op::AvgPool2d, {1, 2, 8, 8}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, 1};
  auto g = pool_graph(c, DType::F32);
  auto exe = compile(*g, test_options());
  expect_matches_interpreter(*g, {HostTensor::random(DType::F32, c.x, 9, -3, 3)}, *exe, c.label);
  EXPECT_EQ(exe->explain().find("oneDNN"), std::string::npos) << exe->explain().substr(0, 2000);
}

// conv -> relu -> max pool -> conv -> relu: the pool reads the first conv's blocked result and
// hands its own to the second conv.
TEST(OnednnPool, PoolBetweenConvsStaysBlocked) {
  auto g = std::make_unique<Graph>("stem");
  Value* x = g->add_input("x", f32({1, 3, 21, 21}));
  auto conv = [&](Value* in, int64_t cin, int64_t cout, uint64_t seed) {
    Value* w = g->constant(HostTensor::random(DType::F32, {cout, cin, 3, 3}, seed, -0.5, 0.5));
    Value* b = g->constant(HostTensor::random(DType::F32, {cout}, seed + 1, -1, 1));
    return g->add(Op::Relu, {g->add(Op::Conv2d, {in, w, b},
                                    {{"strides", Ints{1, 1}}, {"pads", Ints{1, 1, 1, 1}}, {"dilations", Ints{1, 1}},
                                     {"groups", int64_t(1)}})});
  };
  // 22 channels: a channels-last pool (oneDNN's AVX-512 convs) ends on a 2-channel tail, a blocked
  // one on a partly padded block.
  Value* h = conv(x, 3, 22, 1);
  h = g->add(Op::MaxPool2d, {h}, {{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  g->set_outputs({conv(h, 22, 20, 2)});
  auto exe = compile(*g, test_options());
  std::vector<HostTensor> in{HostTensor::random(DType::F32, {1, 3, 21, 21}, 3, -2, 2)};
  expect_matches_interpreter(*g, in, *exe, "conv, pool, conv");
  expect_matches_interpreter(*g, in, *exe, "conv, pool, conv (second run)");
  // A NaN in the image reaches the pool through the conv: oneDNN's max would drop it, Kiln's keeps it.
  in[0].data<float>()[5 * 21 + 7] = std::numeric_limits<float>::quiet_NaN();
  in[0].data<float>()[2 * 21 * 21 + 19 * 21 + 20] = std::numeric_limits<float>::quiet_NaN();  // last pixel
  expect_matches_interpreter(*g, in, *exe, "conv, pool, conv with a NaN pixel");
  const std::string explain = exe->explain();
  const std::string steps = explain.substr(explain.find("steps:"), explain.find("== Loop IR") - explain.find("steps:"));
  EXPECT_NE(steps.find("max_pool2d  [library call]  oneDNN"), std::string::npos) << steps;
  int fed = 0;
  for (size_t at = steps.find("source read blocked"); at != std::string::npos; at = steps.find("source read blocked", at + 1)) ++fed;
  EXPECT_EQ(fed, 2) << "the pool reads the conv's blocked result, the second conv the pool's:\n" << steps;
}

}  // namespace
}  // namespace kiln::testing
