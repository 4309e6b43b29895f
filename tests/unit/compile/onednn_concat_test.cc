// Channel concats on oneDNN (runtime/onednn_plan.h, kernels/cpu/onednn_concat.h) against the
// interpreter: SqueezeNet's Fire module (two convs joined, read by a conv and a max pool) with one
// image — where the convs write straight into the concat's blocked result — and with three, where
// the concat copies block planes; channel counts that are not whole blocks (oneDNN's primitive);
// the same conv twice in one concat and in two concats; a graph input joined to a conv result. Why: a concat in the
// blocked chain hands memory between primitives by offsets; a wrong offset or stride puts one
// source's channels in another's place, which only a comparison of every value shows.
#include <gtest/gtest.h>

#include <limits>

#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

using Ints = std::vector<int64_t>;

struct Builder {
  Graph* g;
  uint64_t seed = 1;
  Value* conv(Value* in, int64_t cin, int64_t cout, int64_t k) {
    Value* w = g->constant(HostTensor::random(DType::F32, {cout, cin, k, k}, seed++, -0.5, 0.5));
    Value* b = g->constant(HostTensor::random(DType::F32, {cout}, seed++, -1, 1));
    const int64_t p = k / 2;
    return g->add(Op::Relu, {g->add(Op::Conv2d, {in, w, b},
                                    {{"strides", Ints{1, 1}}, {"pads", Ints{p, p, p, p}}, {"dilations", Ints{1, 1}},
                                     {"groups", int64_t(1)}})});
  }
  Value* concat(std::vector<Value*> xs) { return g->add(Op::Concat, xs, {{"axis", int64_t(1)}}); }
  Value* pool(Value* x) {
    return g->add(Op::MaxPool2d, {x}, {{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{0, 0, 0, 0}},
                                       {"ceil_mode", int64_t(1)}, {"dilations", Ints{1, 1}}});
  }
};

// squeeze (1x1) -> expand 1x1 and 3x3 -> concat -> (max pool | conv) ... -> output
std::unique_ptr<Graph> fire(int64_t images, int64_t c1, int64_t c3, bool pool) {
  auto g = std::make_unique<Graph>("fire");
  Builder b{g.get()};
  Value* x = g->add_input("x", f32({images, 5, 13, 11}));
  Value* s = b.conv(x, 5, 16, 1);  // 16 channels, as SqueezeNet's first squeeze
  Value* joined = b.concat({b.conv(s, 16, c1, 1), b.conv(s, 16, c3, 3)});
  Value* next = pool ? b.pool(joined) : joined;
  g->set_outputs({b.conv(next, c1 + c3, 16, 3)});
  return g;
}

std::string steps_of(const Executable& exe) {
  const std::string e = exe.explain();
  return e.substr(e.find("steps:"), e.find("== Loop IR") - e.find("steps:"));
}

void check(const Graph& g, const std::vector<int64_t>& x_shape, const std::string& label) {
  auto exe = compile(g, test_options());
  std::vector<HostTensor> in{HostTensor::random(DType::F32, x_shape, 7, -2, 2)};
  expect_matches_interpreter(g, in, *exe, label);
  expect_matches_interpreter(g, in, *exe, label + " (second run)");
  in[0].data<float>()[17] = std::numeric_limits<float>::quiet_NaN();  // the exact path around the blocked concat
  expect_matches_interpreter(g, in, *exe, label + " with a NaN");
  EXPECT_NE(steps_of(*exe).find("concat  [library call]  oneDNN"), std::string::npos) << steps_of(*exe);
}

TEST(OnednnConcat, FireModuleOneImageWritesInPlace) {
  for (bool pool : {true, false}) {
    auto g = fire(1, 16, 24, pool);
    check(*g, {1, 5, 13, 11}, pool ? "fire, 1 image, then a pool" : "fire, 1 image, then a conv");
    auto exe = compile(*g, test_options());
    const std::string steps = steps_of(*exe);
    // Both expand convs hand their results to the concat, which hands its own on.
    int fed = 0;
    for (size_t at = steps.find("source read blocked"); at != std::string::npos; at = steps.find("source read blocked", at + 1)) ++fed;
    EXPECT_GE(fed, 4) << steps;
    // The convs write channel blocks (ConvSpec::channel_blocked_dst, also where oneDNN would pick
    // channels-last) straight into their places in the concat's result: no copy at all.
    int in_place = 0;
    for (size_t at = steps.find("written in place into the concat"); at != std::string::npos;
         at = steps.find("written in place into the concat", at + 1))
      ++in_place;
    EXPECT_EQ(in_place, 2) << steps;
  }
}

TEST(OnednnConcat, FireModuleThreeImagesCopiesBlocks) {
  auto g = fire(3, 16, 24, true);
  check(*g, {3, 5, 13, 11}, "fire, 3 images");
}

TEST(OnednnConcat, ChannelsNotWholeBlocks) {
  auto g = fire(2, 12, 20, true);  // 12 is not a multiple of 8 or 16: oneDNN's concat primitive
  check(*g, {2, 5, 13, 11}, "fire, 12 + 20 channels");
}

TEST(OnednnConcat, SameResultTwiceAndAGraphInput) {
  for (int64_t images : {1, 2}) {
    auto g = std::make_unique<Graph>("twice");
    Builder b{g.get()};
    Value* x = g->add_input("x", f32({images, 8, 9, 10}));
    Value* a = b.conv(x, 8, 16, 3);
    Value* c = b.conv(x, 8, 8, 1);
    // a twice (the block path: only its first place is written in place) and a plain graph input
    // (oneDNN's primitive, the input reordered in).
    Value* blocked = b.concat({a, c, a});
    Value* again = b.concat({c, a});  // a (and c) in a second concat's block path too
    Value* mixed = b.concat({a, x});
    g->set_outputs({b.conv(b.pool(blocked), 40, 8, 1), b.conv(again, 24, 8, 3), b.conv(mixed, 24, 8, 1)});
    check(*g, {images, 8, 9, 10}, str("concat(a, c, a), concat(c, a) and concat(a, x), ", images, " images"));
  }
}

}  // namespace
}  // namespace kiln::testing
