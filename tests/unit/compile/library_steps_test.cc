// The compiled path's library steps at odd sizes against the interpreter: conv2d (im2col + sgemm
// tiles, 1x1 direct, depthwise loop; strides, dilations, asymmetric pads, groups, bias) followed by
// a generated epilogue, and batched matmuls with broadcast batch dims (the OpenMP-split GEMMs of
// src/kernels/cpu/gemm.h). Why: these steps bypass generated code, so only this compares them with
// the oracle inside a compiled executable, with the thread count and threshold of the other tests.
#include <gtest/gtest.h>

#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

using Dims = std::vector<int64_t>;

struct ConvCase {
  const char* label;
  Dims x, w;
  Dims strides, pads, dilations;
  int64_t groups;
  bool bias;
};

const std::vector<ConvCase> kConvCases = {
    {"C3 K5 13x13 s2 p1 d2", {2, 3, 13, 13}, {5, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {2, 2}, 1, true},
    {"groups 3 (C6 K9)", {2, 6, 13, 13}, {9, 2, 3, 3}, {2, 2}, {1, 1, 1, 1}, {2, 2}, 3, true},
    {"groups 3 one channel each (multiplier 2)", {1, 3, 13, 13}, {6, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {2, 2}, 3, true},
    {"depthwise 3x3 s1 p1", {2, 8, 13, 11}, {8, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 8, false},
    {"depthwise 5x5 s2 p2", {1, 7, 13, 13}, {7, 1, 5, 5}, {2, 2}, {2, 2, 2, 2}, {1, 1}, 7, true},
    {"single input channel", {2, 1, 9, 13}, {4, 1, 3, 2}, {1, 2}, {0, 1, 1, 0}, {1, 1}, 1, true},
    {"1x1 direct", {2, 16, 7, 9}, {12, 16, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},
    {"1x1 stride 2", {1, 16, 13, 13}, {24, 16, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, false},
    {"1x1 padded bottom/right", {1, 5, 6, 7}, {3, 5, 1, 1}, {1, 1}, {0, 0, 2, 1}, {1, 1}, 1, true},
    {"5x2 asymmetric pads", {1, 3, 13, 17}, {5, 3, 5, 2}, {1, 3}, {0, 2, 1, 0}, {3, 1}, 1, false},
    {"tiles end mid-row", {1, 4, 40, 40}, {6, 4, 5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 1, true},
    {"deep 2x2 image (channel blocks)", {1, 64, 2, 2}, {128, 64, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
    {"kernel wider than input", {1, 2, 3, 3}, {3, 2, 5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 1, true},
};

std::unique_ptr<Graph> conv_graph(const ConvCase& c) {
  auto g = std::make_unique<Graph>("conv");
  Value* x = g->add_input("x", f32(to_shape(c.x)));
  Value* w = g->add_input("w", f32(to_shape(c.w)));
  std::vector<Value*> operands{x, w};
  if (c.bias) operands.push_back(g->add_input("b", f32(to_shape({c.w[0]}))));
  Value* y = g->add(Op::Conv2d, operands,
                    {{"strides", c.strides}, {"pads", c.pads}, {"dilations", c.dilations}, {"groups", c.groups}});
  // A generated epilogue after the library step, reading its output buffer.
  g->set_outputs({g->add(Op::Relu, {g->add(Op::Add, {y, g->scalar(DType::F32, 0.25)})}), y});
  return g;
}

std::vector<HostTensor> conv_inputs(const ConvCase& c, uint64_t seed) {
  std::vector<HostTensor> in{HostTensor::random(DType::F32, c.x, seed, -1, 1),
                             HostTensor::random(DType::F32, c.w, seed + 1, -1, 1)};
  if (c.bias) in.push_back(HostTensor::random(DType::F32, {c.w[0]}, seed + 2, -1, 1));
  return in;
}

TEST(LibrarySteps, Conv2dMatchesTheInterpreterCompiled) {
  std::vector<std::unique_ptr<Graph>> graphs;
  std::vector<const Graph*> ptrs;
  for (const ConvCase& c : kConvCases) {
    graphs.push_back(conv_graph(c));
    ptrs.push_back(graphs.back().get());
  }
  auto exes = compile_batch(ptrs, test_options());
  ASSERT_EQ(exes.size(), kConvCases.size());
  for (size_t i = 0; i < kConvCases.size(); ++i) {
    const ConvCase& c = kConvCases[i];
    SCOPED_TRACE(c.label);
    std::vector<HostTensor> in = conv_inputs(c, 100 + 10 * i);
    expect_matches_interpreter(*graphs[i], in, *exes[i], c.label);
    Scoreboard sb;
    exes[i]->run(in, &sb);
    bool conv_step = false;
    for (const KernelRecord& k : sb.kernels()) conv_step |= k.name == "conv2d";
    EXPECT_TRUE(conv_step) << "conv2d is a library step";
    EXPECT_GE(exes[i]->stats().kernels_generated, 1) << "the epilogue is generated code";
  }
}

// Batched matmuls with numpy broadcasting of batch dims, and the attention pattern (q @ k^T,
// softmax, @ v) whose batches the GEMM helper spreads over threads.
TEST(LibrarySteps, BatchedMatmulMatchesTheInterpreterCompiled) {
  struct Case { Dims a, b; };
  const std::vector<Case> cases = {
      {{2, 3, 7, 13}, {3, 13, 5}}, {{4, 1, 9, 6}, {5, 6, 11}}, {{1, 5, 3}, {7, 3, 2}},
      {{3, 37, 29}, {29, 41}},     {{6, 33, 1}, {6, 1, 17}},  {{5, 13}, {2, 5, 13, 19}},
      {{2, 65, 70}, {2, 70, 66}},  {{13}, {3, 13, 7}},
  };
  std::vector<std::unique_ptr<Graph>> graphs;
  std::vector<const Graph*> ptrs;
  for (const Case& c : cases) {
    auto g = std::make_unique<Graph>("bmm");
    Value* a = g->add_input("a", f32(to_shape(c.a)));
    Value* b = g->add_input("b", f32(to_shape(c.b)));
    g->set_outputs({g->add(Op::Tanh, {g->add(Op::MatMul, {a, b})})});
    ptrs.push_back(g.get());
    graphs.push_back(std::move(g));
  }
  {  // attention over [B=2, H=3, T=17, D=8]
    auto g = std::make_unique<Graph>("attention");
    Value* q = g->add_input("q", f32({2, 3, 17, 8}));
    Value* k = g->add_input("k", f32({2, 3, 17, 8}));
    Value* v = g->add_input("v", f32({2, 3, 17, 8}));
    Value* kt = g->add(Op::Permute, {k}, {{"perm", Dims{0, 1, 3, 2}}});
    Value* p = g->add(Op::Softmax, {g->add(Op::Mul, {g->add(Op::MatMul, {q, kt}), g->scalar(DType::F32, 0.35)})});
    g->set_outputs({g->add(Op::MatMul, {p, v})});
    ptrs.push_back(g.get());
    graphs.push_back(std::move(g));
  }
  auto exes = compile_batch(ptrs, test_options());
  ASSERT_EQ(exes.size(), graphs.size());
  for (size_t i = 0; i < graphs.size(); ++i) {
    std::vector<HostTensor> in;
    for (size_t j = 0; j < graphs[i]->inputs().size(); ++j) {
      std::vector<int64_t> shape;
      for (const SymInt& d : graphs[i]->inputs()[j]->type.shape) shape.push_back(d.constant());
      in.push_back(HostTensor::random(DType::F32, shape, 300 + 7 * i + j, -1, 1));
    }
    expect_matches_interpreter(*graphs[i], in, *exes[i], str(graphs[i]->name(), " case ", i));
  }
}

}  // namespace
}  // namespace kiln::testing
