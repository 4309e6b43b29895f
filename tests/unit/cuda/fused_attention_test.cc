// The fused attention kernel (codegen/cuda/attention_kernel.h): which attention nodes it takes
// (kept whole through lowering, everything else decomposed), its source through NVRTC, and on a
// GPU its output against the interpreter at odd lengths, causal masks aligned to the bottom right
// (rows with every key masked are NaN in both), both element types and several head dims.
#include <gtest/gtest.h>

#include <cmath>

#include "codegen/cuda/attention_kernel.h"
#include "codegen/cuda/prepare_graph.h"
#include "kiln/cuda.h"
#include "kiln/interp.h"
#include "runtime/cuda/cuda_executable.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/executable.h"
#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

struct AttentionCase {
  int64_t batch, heads, tq, tk, d;
  bool causal;
  double scale;  // 0: 1/sqrt(d)
};

std::unique_ptr<Graph> attention_graph(DType t, const AttentionCase& c, bool with_mask = false) {
  auto g = std::make_unique<Graph>("attention");
  auto shape = [&](int64_t rows) { return Shape{SymInt(c.batch), SymInt(c.heads), SymInt(rows), SymInt(c.d)}; };
  Value* q = g->add_input("q", TensorType{t, shape(c.tq), Device::CPU});
  Value* k = g->add_input("k", TensorType{t, shape(c.tk), Device::CPU});
  Value* v = g->add_input("v", TensorType{t, shape(c.tk), Device::CPU});
  std::vector<Value*> ins = {q, k, v};
  if (with_mask) ins.push_back(g->add_input("mask", TensorType{DType::Bool, {SymInt(c.tq), SymInt(c.tk)}, Device::CPU}));
  g->set_outputs(g->add_node(Op::Attention, ins, {{"causal", int64_t(c.causal)}, {"scale", c.scale}}));
  return g;
}

// The attention library steps left after preparing and lowering `g` as compile_cuda does.
int attention_steps(const Graph& g) {
  std::unique_ptr<Graph> prepared = g.clone();
  codegen::cuda::prepare_graph_for_cuda(*prepared, /*fused_attention=*/true);
  CompileOptions o;
  o.keep_whole.insert(Op::Attention);
  auto low = runtime::lower_for_target(*prepared, o, "kiln_att_");
  int n = 0;
  for (const runtime::Step& s : low->steps) n += s.library && s.node->op == Op::Attention;
  return n;
}

TEST(CudaCodegen, FusedAttentionTakesHalfPrecisionWithoutMask) {
  const AttentionCase c{2, 3, 77, 77, 64, true, 0};
  EXPECT_EQ(attention_steps(*attention_graph(DType::BF16, c)), 1);
  EXPECT_EQ(attention_steps(*attention_graph(DType::F16, c)), 1);
  // f32, a mask operand, or a head dim the kernel has no form for: decomposed into primitives.
  EXPECT_EQ(attention_steps(*attention_graph(DType::F32, c)), 0);
  EXPECT_EQ(attention_steps(*attention_graph(DType::BF16, c, /*with_mask=*/true)), 0);
  EXPECT_EQ(attention_steps(*attention_graph(DType::BF16, AttentionCase{1, 2, 9, 9, 72, false, 0})), 0);
  EXPECT_EQ(attention_steps(*attention_graph(DType::BF16, AttentionCase{1, 2, 9, 9, 144, false, 0})), 0);
  EXPECT_TRUE(codegen::cuda::fused_attention_head_dim_supported(16));
  EXPECT_FALSE(codegen::cuda::fused_attention_head_dim_supported(8));
  EXPECT_EQ(codegen::cuda::fused_attention_kernel_name(DType::BF16, 64), "kiln_attention_bf16_d64");
  EXPECT_THROW(codegen::cuda::fused_attention_kernel_name(DType::F32, 64), Error);
}

TEST(CudaCodegen, FusedAttentionSourceCompiles) {
  if (!cuda::nvrtc_status().loaded) GTEST_SKIP() << cuda::nvrtc_status().message;
  std::string source = "typedef unsigned short uint16_t;\n" +
                       codegen::cuda::fused_attention_source({{DType::BF16, 64}, {DType::F16, 128}, {DType::BF16, 16}});
  EXPECT_NE(source.find("kiln_attention_f16_d128"), std::string::npos);
  for (const char* arch : {"sm_80", "sm_90"})
    EXPECT_NO_THROW(cuda::nvrtc_compile(source, "attention.cu", arch, {"--std=c++17"})) << arch;
}

TEST(CudaCompiled, FusedAttentionMatchesTheInterpreter) {
  if (!cuda_unavailable_reason().empty()) GTEST_SKIP() << cuda_unavailable_reason();
  const std::vector<AttentionCase> cases = {
      {2, 3, 77, 77, 64, true, 0},     // odd length, causal: the last query block partial
      {1, 2, 50, 130, 64, true, 0},    // more keys than queries: each row sees Tk - Tq more
      {1, 2, 130, 50, 32, true, 0},    // fewer: the first 80 rows keep no key (NaN)
      {2, 1, 100, 70, 128, false, 0.3},  // not causal, a given scale, the widest head
      {1, 3, 1, 200, 16, true, 0},     // one query (a decode step) over every key
  };
  for (DType t : {DType::BF16, DType::F16}) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const AttentionCase& c = cases[i];
      std::unique_ptr<Graph> g = attention_graph(t, c);
      CudaCompileOptions o;
      o.base.cache_dir = test_cache_dir();
      auto exe = compile_cuda(*g, o);
      EXPECT_NE(exe->source().find(codegen::cuda::fused_attention_kernel_name(t, c.d)), std::string::npos);
      for (uint64_t r = 0; r < 2; ++r) {
        std::vector<HostTensor> in = {HostTensor::random(t, {c.batch, c.heads, c.tq, c.d}, 10 * i + r, -2, 2),
                                      HostTensor::random(t, {c.batch, c.heads, c.tk, c.d}, 20 * i + r + 1, -2, 2),
                                      HostTensor::random(t, {c.batch, c.heads, c.tk, c.d}, 30 * i + r + 2, -1, 1)};
        std::vector<HostTensor> want = interp::run(*g, in);
        std::vector<HostTensor> got = exe->run(in);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(compare_tensors(got[0], want[0]), "")
            << dtype_name(t) << " case " << i << " run " << r << " (" << c.tq << " queries, " << c.tk << " keys, d " << c.d << ")";
        if (c.tq > c.tk && c.causal) {
          EXPECT_TRUE(std::isnan(got[0].get_f64(0)));  // row 0 keeps no key
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln::testing
