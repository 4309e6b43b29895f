// oneDNN convs with their elementwise tails folded as post-ops (runtime/onednn_plan.h), against
// the interpreter at odd sizes: each tail a real model writes after a conv (relu, relu6 clamp,
// batch norm's per-channel sub/mul/add, a residual add then relu, hardswish and silu as the ONNX
// importer decomposes them, gelu), over 1x1, strided, dilated, grouped and depthwise convs with
// channel counts that are not multiples of 16, in f32 and bf16. Why: a folded tail bypasses the generated kernel;
// only this proves the post-op list means what the kernel meant, and that explain says so.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/onednn_common.h"
#include "runtime/executable.h"
#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

using Dims = std::vector<int64_t>;

struct Geometry {
  const char* label;
  Dims x, w, strides, pads, dilations;
  int64_t groups;
};

const std::vector<Geometry> kGeometries = {
    {"3x3 C5 K7", {2, 5, 11, 13}, {7, 5, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
    {"1x1 C19 K21", {1, 19, 9, 7}, {21, 19, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
    {"strided dilated asymmetric", {1, 6, 17, 15}, {10, 6, 3, 2}, {2, 1}, {1, 0, 2, 1}, {2, 1}, 1},
    {"grouped 3", {1, 9, 10, 10}, {12, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3},
    {"depthwise 5x5 s2", {1, 17, 13, 13}, {17, 1, 5, 5}, {2, 2}, {2, 2, 2, 2}, {1, 1}, 17},
};

// kHardSigmoid: two linear post-ops merged into one; kClipScaleClip: a clip twice with other
// bounds, which oneDNN 2.6 would compute with the first one's (not folded, still correct).
enum class Tail { kRelu, kRelu6, kBatchNormRelu, kResidualRelu, kHardSwish, kSilu, kGelu, kHardSigmoid, kClipScaleClip, kNone };
bool folds(Tail t) { return t != Tail::kNone && t != Tail::kClipScaleClip; }
const char* tail_name(Tail t) {
  const char* names[] = {"relu", "relu6", "batch norm + relu", "residual + relu", "hardswish", "silu", "gelu",
                         "hardsigmoid", "clip, scale, clip", "none"};
  return names[int(t)];
}

// conv(x, w) + bias, then the tail; the weights are constants (reordered once), as in a model.
std::unique_ptr<Graph> conv_tail_graph(const Geometry& c, Tail t, uint64_t seed, DType dt = DType::F32) {
  auto g = std::make_unique<Graph>("conv_tail");
  Value* x = g->add_input("x", typed(dt, to_shape(c.x)));
  const int64_t o = c.w[0];
  Value* w = g->constant(HostTensor::random(dt, c.w, seed, -1, 1));
  Value* b = g->constant(HostTensor::random(dt, {o}, seed + 1, -1, 1));
  Value* y = g->add(Op::Conv2d, {x, w, b},
                    {{"strides", c.strides}, {"pads", c.pads}, {"dilations", c.dilations}, {"groups", c.groups}});
  auto per_channel = [&](uint64_t s, double lo, double hi) {
    return g->constant(HostTensor::random(dt, {1, o, 1, 1}, s, lo, hi));
  };
  Value* out = y;
  std::vector<Value*> extra_inputs;
  switch (t) {
    case Tail::kRelu: out = g->add(Op::Relu, {y}); break;
    case Tail::kRelu6: out = g->add(Op::Clamp, {y}, {{"min", 0.0}, {"max", 6.0}}); break;
    case Tail::kBatchNormRelu: {
      Value* z = g->add(Op::Sub, {y, per_channel(seed + 2, -0.5, 0.5)});
      z = g->add(Op::Add, {g->add(Op::Mul, {z, per_channel(seed + 3, 0.5, 2)}), per_channel(seed + 4, -1, 1)});
      out = g->add(Op::Relu, {z});
      break;
    }
    case Tail::kResidualRelu: {
      Value* r = g->add_input("residual", typed(dt, y->type.shape));
      out = g->add(Op::Relu, {g->add(Op::Add, {y, r})});
      break;
    }
    case Tail::kHardSwish: {  // as the ONNX importer writes HardSwish
      Value* lin = g->add(Op::Add, {g->add(Op::Mul, {y, g->scalar(dt, 1.0 / 6.0)}), g->scalar(dt, 0.5)});
      out = g->add(Op::Mul, {y, g->add(Op::Clamp, {lin}, {{"min", 0.0}, {"max", 1.0}})});
      break;
    }
    case Tail::kSilu: out = g->add(Op::Mul, {y, g->add(Op::Sigmoid, {y})}); break;
    case Tail::kGelu: out = g->add(Op::Gelu, {y}); break;
    case Tail::kHardSigmoid: {  // as the ONNX importer writes HardSigmoid
      Value* lin = g->add(Op::Add, {g->add(Op::Mul, {y, g->scalar(dt, 1.0 / 6.0)}), g->scalar(dt, 0.5)});
      out = g->add(Op::Clamp, {lin}, {{"min", 0.0}, {"max", 1.0}});
      break;
    }
    case Tail::kClipScaleClip: {
      Value* z = g->add(Op::Clamp, {y}, {{"min", -1.0}, {"max", 3.0}});
      out = g->add(Op::Clamp, {g->add(Op::Mul, {z, g->scalar(dt, 2.0)})}, {{"min", 0.0}, {"max", 1.0}});
      break;
    }
    case Tail::kNone: break;
  }
  g->set_outputs({out});
  return g;
}

void check_all(DType dt, const std::vector<Tail>& tails) {
  std::vector<std::unique_ptr<Graph>> graphs;
  std::vector<const Graph*> ptrs;
  std::vector<std::pair<const Geometry*, Tail>> cases;
  uint64_t seed = 500;
  for (const Geometry& c : kGeometries)
    for (Tail t : tails) {
      graphs.push_back(conv_tail_graph(c, t, seed += 10, dt));
      ptrs.push_back(graphs.back().get());
      cases.push_back({&c, t});
    }
  auto exes = compile_batch(ptrs, test_options());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [c, t] = cases[i];
    const std::string label = str(c->label, ", ", tail_name(t), ", ", dtype_name(dt));
    SCOPED_TRACE(label);
    std::vector<HostTensor> in{HostTensor::random(dt, c->x, 900 + i, -2, 2)};
    for (size_t k = 1; k < graphs[i]->inputs().size(); ++k) {  // the residual
      std::vector<int64_t> dims;
      for (const SymInt& d : graphs[i]->inputs()[k]->type.shape) dims.push_back(d.constant());
      in.push_back(HostTensor::random(dt, dims, 1700 + i, -1, 1));
    }
    expect_matches_interpreter(*graphs[i], in, *exes[i], label);
    expect_matches_interpreter(*graphs[i], in, *exes[i], label + " (second run: kept buffers)");
    const std::string explain = exes[i]->explain();
    EXPECT_NE(explain.find("oneDNN"), std::string::npos) << "the conv runs on oneDNN";
    if (t == Tail::kClipScaleClip) {
      EXPECT_NE(explain.find("an activation repeats"), std::string::npos) << explain.substr(0, 3000);
    }
    if (folds(t)) {
      EXPECT_NE(explain.find("[folded into the conv before it]"), std::string::npos)
          << "the tail is folded as post-ops:\n" << explain.substr(0, explain.find("== Loop IR"));
    }
    Scoreboard sb;
    exes[i]->run(in, &sb);
    if (folds(t)) {
      EXPECT_EQ(sb.kernels().size(), 1u) << "one step: the conv with its tail";
    }
    // NaN and infinities in the source: oneDNN's post-ops would treat them otherwise (relu(-inf)
    // = NaN there), so the run takes the exact path and still matches.
    if (folds(t)) {
      std::vector<HostTensor> special = in;
      special[0] = in[0].clone();
      const double values[] = {NAN, INFINITY, -INFINITY};
      for (int j = 0; j < 3; ++j) special[0].set_f64((7 * j + 3) % special[0].numel(), values[j]);
      auto* compiled = dynamic_cast<runtime::CompiledExecutable*>(exes[i].get());
      ASSERT_NE(compiled, nullptr);
      const int64_t before = compiled->exact_fallbacks;
      expect_matches_interpreter(*graphs[i], special, *exes[i], label + " (NaN and infinities)");
      EXPECT_GT(compiled->exact_fallbacks, before) << "the exact path ran";
      expect_matches_interpreter(*graphs[i], in, *exes[i], label + " (finite again)");
    }
  }
}

TEST(OnednnConv, FoldedTailsMatchTheInterpreter) {
  check_all(DType::F32, {Tail::kRelu, Tail::kRelu6, Tail::kBatchNormRelu, Tail::kResidualRelu, Tail::kHardSwish,
                         Tail::kSilu, Tail::kGelu, Tail::kHardSigmoid, Tail::kClipScaleClip, Tail::kNone});
}

TEST(OnednnConv, FoldedTailsMatchTheInterpreterBF16) {
  if (!eager::onednn::supports_dtype(DType::BF16)) GTEST_SKIP() << "oneDNN has no bf16 on this CPU (needs AVX-512)";
  check_all(DType::BF16, {Tail::kRelu, Tail::kBatchNormRelu, Tail::kResidualRelu, Tail::kHardSwish, Tail::kHardSigmoid,
                          Tail::kNone});
}

// The same graph without oneDNN runs the eager im2col kernel and its generated tail: the results
// agree with the folded form, and explain names the choice.
TEST(OnednnConv, OptionOffKeepsTheEagerKernel) {
  auto g = conv_tail_graph(kGeometries[0], Tail::kHardSwish, 77);
  CompileOptions off = test_options();
  off.onednn = false;
  auto exe = compile(*g, off);
  std::vector<HostTensor> in{HostTensor::random(DType::F32, kGeometries[0].x, 78, -2, 2)};
  expect_matches_interpreter(*g, in, *exe, "eager conv");
  EXPECT_NE(exe->explain().find("eager im2col + OpenBLAS"), std::string::npos);
  EXPECT_EQ(exe->explain().find("oneDNN"), std::string::npos);
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// A ResNet basic block twice over: conv -> bn-like per-channel mul/add -> relu -> conv -> + x ->
// relu, the second block reading the first's output. Each conv's result is read only by convs (as
// source or as the folded residual), so it stays in oneDNN's blocked layout: explain says so, and
// the results still match the interpreter (24 channels: blocked with padding; 32: without).
std::unique_ptr<Graph> basic_blocks(int64_t c, int64_t hw, uint64_t seed) {
  auto g = std::make_unique<Graph>("blocks");
  Value* x = g->add_input("x", f32({1, c, hw, hw}));
  Value* y = g->add(Op::Relu, {x});  // the blocks' input comes from a kernel, as after a stem
  for (int block = 0; block < 2; ++block) {
    auto conv = [&](Value* in, uint64_t s) {
      Value* w = g->constant(HostTensor::random(DType::F32, {c, c, 3, 3}, s, -0.3, 0.3));
      Value* b = g->constant(HostTensor::random(DType::F32, {c}, s + 1, -1, 1));
      return g->add(Op::Conv2d, {in, w, b},
                    {{"strides", std::vector<int64_t>{1, 1}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                     {"dilations", std::vector<int64_t>{1, 1}}, {"groups", int64_t(1)}});
    };
    Value* h = conv(y, seed + 10 * block);
    h = g->add(Op::Mul, {h, g->constant(HostTensor::random(DType::F32, {1, c, 1, 1}, seed + 5, 0.5, 1.5))});
    h = g->add(Op::Relu, {g->add(Op::Add, {h, g->constant(HostTensor::random(DType::F32, {1, c, 1, 1}, seed + 6, -1, 1))})});
    h = conv(h, seed + 10 * block + 3);
    y = g->add(Op::Relu, {g->add(Op::Add, {h, y})});
  }
  g->set_outputs({y});
  return g;
}

TEST(OnednnConv, ConvChainsStayBlocked) {
  for (int64_t c : {24, 32}) {
    SCOPED_TRACE(str(c, " channels"));
    auto g = basic_blocks(c, 9, 60 + uint64_t(c));
    auto exe = compile(*g, test_options());
    std::vector<HostTensor> in{HostTensor::random(DType::F32, {1, c, 9, 9}, 61, -2, 2)};
    expect_matches_interpreter(*g, in, *exe, "two basic blocks");
    expect_matches_interpreter(*g, in, *exe, "two basic blocks (second run)");
    const std::string explain = exe->explain();
    const std::string steps = explain.substr(explain.find("steps:"), explain.find("== Loop IR") - explain.find("steps:"));
    int kept = 0, fed = 0;
    for (size_t at = steps.find("output kept blocked"); at != std::string::npos; at = steps.find("output kept blocked", at + 1)) ++kept;
    for (size_t at = steps.find("read blocked"); at != std::string::npos; at = steps.find("read blocked", at + 1)) ++fed;
    // conv 1 -> conv 2 (source), conv 2 of block 1 -> conv 1 of block 2 (source) and conv 2 of block 2
    // (residual), conv 1 of block 2 -> conv 2: three producers keep their output blocked, four reads.
    EXPECT_EQ(kept, 3) << steps;
    EXPECT_EQ(fed, 4) << steps;
  }
}

// A squeeze-excite block: depthwise conv -> hardswish, read by a global average pool and by the
// multiply with the excitation. The hardswish folds into the conv's post-ops and the pool reads
// its result (ScheduleOptions::tails_fold_into_library_calls); before, activation + pool were one
// kernel of two outputs and the conv's raw result was written and read once more.
TEST(OnednnConv, SqueezeExciteActivationFoldsIntoTheConv) {
  for (bool other_reader : {true, false}) {
    SCOPED_TRACE(other_reader ? "activation read by the pool and the excitation" : "activation read by the pool only");
    auto g = std::make_unique<Graph>("se");
    Value* x = g->add_input("x", f32({1, 24, 13, 11}));
    Value* w = g->constant(HostTensor::random(DType::F32, {24, 1, 3, 3}, 5, -0.5, 0.5));
    Value* b = g->constant(HostTensor::random(DType::F32, {24}, 6, -1, 1));
    Value* conv = g->add(Op::Conv2d, {x, w, b},
                         {{"strides", std::vector<int64_t>{1, 1}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                          {"dilations", std::vector<int64_t>{1, 1}}, {"groups", int64_t(24)}});
    // hardswish as the ONNX importer writes it: x * clamp(x / 6 + 0.5, 0, 1)
    Value* lin = g->add(Op::Add, {g->add(Op::Mul, {conv, g->scalar(DType::F32, 1.0 / 6.0)}), g->scalar(DType::F32, 0.5)});
    Value* hs = g->add(Op::Mul, {conv, g->add(Op::Clamp, {lin}, {{"min", 0.0}, {"max", 1.0}})});
    Value* pooled = g->add(Op::ReduceMean, {hs}, {{"axes", std::vector<int64_t>{2, 3}}, {"keepdim", int64_t(1)}});
    Value* gate = g->add(Op::Sigmoid, {pooled});
    g->set_outputs({other_reader ? g->add(Op::Mul, {hs, gate}) : gate});
    auto exe = compile(*g, test_options());
    std::vector<HostTensor> in{HostTensor::random(DType::F32, {1, 24, 13, 11}, 7, -4, 4)};
    expect_matches_interpreter(*g, in, *exe, "squeeze-excite");
    const std::string explain = exe->explain();
    const std::string steps = explain.substr(explain.find("steps:"), explain.find("== Loop IR") - explain.find("steps:"));
    if (other_reader) {
      EXPECT_NE(steps.find("post-ops [hardswish]"), std::string::npos) << steps;
      EXPECT_NE(explain.find("folds into the library call, and the reduction reads its result"), std::string::npos);
    } else {  // nothing else reads the activation: it stays the pool's prologue, never stored
      EXPECT_EQ(steps.find("post-ops [hardswish]"), std::string::npos) << steps;
    }
  }
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// A NaN made inside the graph (sqrt of a negative value) reaches a conv with a relu post-op: the
// sources are not finite-with-the-inputs, so the conv checks its own source, finds the NaN and
// takes the exact path; with finite inputs throughout the graph-input check alone decides.
TEST(OnednnConv, NaNMadeInsideTheGraphTakesTheExactPath) {
  auto g = std::make_unique<Graph>("sqrt_conv");
  Value* x = g->add_input("x", f32({1, 6, 7, 7}));
  Value* w = g->constant(HostTensor::random(DType::F32, {8, 6, 3, 3}, 3, -1, 1));
  Value* y = g->add(Op::Conv2d, {g->add(Op::Sqrt, {x}), w},
                    {{"strides", std::vector<int64_t>{1, 1}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                     {"dilations", std::vector<int64_t>{1, 1}}, {"groups", int64_t(1)}});
  g->set_outputs({g->add(Op::Relu, {y})});
  auto exe = compile(*g, test_options());
  auto* compiled = dynamic_cast<runtime::CompiledExecutable*>(exe.get());
  ASSERT_NE(compiled, nullptr);
  ASSERT_EQ(compiled->onednn_plans.size(), 1u);
  EXPECT_FALSE(compiled->onednn_plans.begin()->second.sources_finite_with_inputs) << "sqrt can make a NaN";
  std::vector<HostTensor> positive{HostTensor::random(DType::F32, {1, 6, 7, 7}, 4, 0.1, 2)};
  expect_matches_interpreter(*g, positive, *exe, "sqrt of positives");
  EXPECT_EQ(compiled->exact_fallbacks, 0);
  std::vector<HostTensor> mixed{HostTensor::random(DType::F32, {1, 6, 7, 7}, 5, -2, 2)};
  expect_matches_interpreter(*g, mixed, *exe, "sqrt of negatives: NaN into the conv");
  EXPECT_EQ(compiled->exact_fallbacks, 1);
}

}  // namespace
}  // namespace kiln::testing
