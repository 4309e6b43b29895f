// oneDNN matmuls with their elementwise tails folded as post-ops (runtime/onednn_plan.h), against
// the interpreter at odd sizes: each tail a real model writes after a GEMM (bias, bias + gelu /
// gelu(tanh) / relu / silu, bias + residual, a scalar scale) over a 2-D GEMM with constant weights,
// a 3-D activation times a weight matrix (batch folded into rows), a decode-sized row, a product of
// two inputs and an attention-style batched product, in f32 and bf16. Why: a folded tail bypasses
// the generated kernel; only this proves the post-op list means what the kernel meant, that every
// shape class reaches oneDNN and that explain says so.
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
  Dims a, b;
  bool constant_b;
};

const std::vector<Geometry> kGeometries = {
    {"2-D 37x45 @ 45x29", {37, 45}, {45, 29}, true},
    {"3-D 2x17x33 @ 33x23", {2, 17, 33}, {33, 23}, true},
    {"decode 1x64 @ 64x50", {1, 64}, {64, 50}, true},
    {"two inputs 5x12 @ 12x7", {5, 12}, {12, 7}, false},
    {"batched 3x2x9x16 @ 3x2x16x11", {3, 2, 9, 16}, {3, 2, 16, 11}, false},
};

enum class Tail { kBias, kBiasGelu, kBiasGeluTanh, kBiasRelu, kBiasSilu, kBiasResidual, kScale, kNone };
const char* tail_name(Tail t) {
  const char* names[] = {"bias", "bias + gelu", "bias + gelu(tanh)", "bias + relu", "bias + silu",
                         "bias + residual", "scale", "none"};
  return names[int(t)];
}

std::unique_ptr<Graph> matmul_tail_graph(const Geometry& c, Tail t, DType dt, uint64_t seed) {
  auto g = std::make_unique<Graph>("matmul_tail");
  Value* a = g->add_input("a", typed(dt, to_shape(c.a)));
  Value* b = c.constant_b ? g->constant(HostTensor::random(dt, c.b, seed, -1, 1)) : g->add_input("b", typed(dt, to_shape(c.b)));
  Value* y = g->add(Op::MatMul, {a, b});
  const int64_t n = c.b.back();
  Value* out = y;
  auto biased = [&] { return g->add(Op::Add, {y, g->constant(HostTensor::random(dt, {n}, seed + 1, -1, 1))}); };
  switch (t) {
    case Tail::kBias: out = biased(); break;
    case Tail::kBiasGelu: out = g->add(Op::Gelu, {biased()}); break;
    case Tail::kBiasGeluTanh: out = g->add(Op::Gelu, {biased()}, {{"approximate", std::string("tanh")}}); break;
    case Tail::kBiasRelu: out = g->add(Op::Relu, {biased()}); break;
    case Tail::kBiasSilu: {
      Value* z = biased();
      out = g->add(Op::Mul, {z, g->add(Op::Sigmoid, {z})});
      break;
    }
    case Tail::kBiasResidual: out = g->add(Op::Add, {g->add_input("residual", typed(dt, y->type.shape)), biased()}); break;
    case Tail::kScale: out = g->add(Op::Mul, {y, g->scalar(dt, 0.125)}); break;
    case Tail::kNone: break;
  }
  g->set_outputs({out});
  return g;
}

void check_all(DType dt) {
  const std::vector<Tail> tails = {Tail::kBias, Tail::kBiasGelu, Tail::kBiasGeluTanh, Tail::kBiasRelu,
                                   Tail::kBiasSilu, Tail::kBiasResidual, Tail::kScale, Tail::kNone};
  std::vector<std::unique_ptr<Graph>> graphs;
  std::vector<const Graph*> ptrs;
  std::vector<std::pair<const Geometry*, Tail>> cases;
  uint64_t seed = 300;
  for (const Geometry& c : kGeometries)
    for (Tail t : tails) {
      graphs.push_back(matmul_tail_graph(c, t, dt, seed += 10));
      ptrs.push_back(graphs.back().get());
      cases.push_back({&c, t});
    }
  auto exes = compile_batch(ptrs, test_options());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [c, t] = cases[i];
    const std::string label = str(c->label, ", ", tail_name(t), ", ", dtype_name(dt));
    SCOPED_TRACE(label);
    std::vector<HostTensor> in;
    for (size_t k = 0; k < graphs[i]->inputs().size(); ++k) {
      std::vector<int64_t> dims;
      for (const SymInt& d : graphs[i]->inputs()[k]->type.shape) dims.push_back(d.constant());
      in.push_back(HostTensor::random(dt, dims, 1100 + 7 * i + k, -2, 2));
    }
    expect_matches_interpreter(*graphs[i], in, *exes[i], label);
    expect_matches_interpreter(*graphs[i], in, *exes[i], label + " (second run: kept buffers)");
    const std::string explain = exes[i]->explain();
    EXPECT_NE(explain.find("oneDNN"), std::string::npos) << "the matmul runs on oneDNN:\n" << explain.substr(0, 3000);
    if (t != Tail::kNone) {
      EXPECT_NE(explain.find("[folded into the matmul before it]"), std::string::npos)
          << "the tail is folded as post-ops:\n" << explain.substr(0, explain.find("== Loop IR"));
      Scoreboard sb;
      exes[i]->run(in, &sb);
      EXPECT_EQ(sb.kernels().size(), 1u) << "one step: the matmul with its tail";
    }
    // NaN and infinities in the source: oneDNN's post-ops would treat them otherwise (relu(-inf)
    // = NaN there), so the run takes the exact path and still matches.
    if (t != Tail::kNone) {
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

TEST(OnednnMatmul, FoldedTailsMatchTheInterpreterF32) { check_all(DType::F32); }

TEST(OnednnMatmul, FoldedTailsMatchTheInterpreterBF16) {
  if (!eager::onednn::supports_dtype(DType::BF16)) GTEST_SKIP() << "oneDNN has no bf16 on this CPU (needs AVX-512)";
  check_all(DType::BF16);
}

// A tail oneDNN has no post-op for (a per-row operand) stays a generated kernel, still correct,
// and explain says why; broadcast batch dims stay on OpenBLAS.
TEST(OnednnMatmul, UnfoldableTailsAndBroadcastBatchesStayCorrect) {
  auto g = std::make_unique<Graph>("per_row");
  Value* a = g->add_input("a", f32({13, 21}));
  Value* b = g->constant(HostTensor::random(DType::F32, {21, 9}, 5, -1, 1));
  Value* y = g->add(Op::MatMul, {a, b});
  g->set_outputs({g->add(Op::Add, {y, g->constant(HostTensor::random(DType::F32, {13, 1}, 6, -1, 1))})});
  auto exe = compile(*g, test_options());
  expect_matches_interpreter(*g, {HostTensor::random(DType::F32, {13, 21}, 7, -2, 2)}, *exe, "per-row add");
  EXPECT_NE(exe->explain().find("no tail folded"), std::string::npos) << exe->explain().substr(0, 3000);

  auto h = std::make_unique<Graph>("broadcast_batch");
  Value* p = h->add_input("p", f32({1, 4, 6}));
  Value* q = h->add_input("q", f32({3, 6, 5}));
  h->set_outputs({h->add(Op::MatMul, {p, q})});
  auto exe2 = compile(*h, test_options());
  expect_matches_interpreter(*h, {HostTensor::random(DType::F32, {1, 4, 6}, 8, -2, 2), HostTensor::random(DType::F32, {3, 6, 5}, 9, -2, 2)},
                             *exe2, "broadcast batch");
  EXPECT_NE(exe2->explain().find("eager OpenBLAS"), std::string::npos);
}

// Without oneDNN the GEMM is OpenBLAS's and its tail a generated kernel: same results.
TEST(OnednnMatmul, OptionOffKeepsOpenBlas) {
  auto g = matmul_tail_graph(kGeometries[1], Tail::kBiasGelu, DType::F32, 41);
  CompileOptions off = test_options();
  off.onednn = false;
  auto exe = compile(*g, off);
  expect_matches_interpreter(*g, {HostTensor::random(DType::F32, kGeometries[1].a, 42, -2, 2)}, *exe, "OpenBLAS");
  EXPECT_NE(exe->explain().find("eager OpenBLAS"), std::string::npos);
  EXPECT_EQ(exe->explain().find("oneDNN"), std::string::npos);
}

}  // namespace
}  // namespace kiln::testing
