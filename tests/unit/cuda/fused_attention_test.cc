// The fused attention kernel (codegen/cuda/attention_kernel.h): which attention nodes it takes
// (kept whole through lowering, everything else decomposed), its source through NVRTC, and on a
// GPU its output against the interpreter at odd lengths, causal masks aligned to the bottom right
// (rows with every key masked are NaN in both), both element types and several head dims; and q,
// k, v read in place through strided views (split from one projection, permuted to [B, H, T, D]).
#include <gtest/gtest.h>

#include <cmath>

#include "codegen/cuda/attention_kernel.h"
#include "codegen/cuda/prepare_graph.h"
#include "kiln/cuda.h"
#include "kiln/interp.h"
#include "lower/strided_view.h"
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

// mask_shape: a mask operand of these dims (bool with `bool_mask`, else additive of type t).
std::unique_ptr<Graph> attention_graph(DType t, const AttentionCase& c, std::vector<int64_t> mask_shape = {},
                                       bool bool_mask = false, bool zero_nan_rows = false) {
  auto g = std::make_unique<Graph>("attention");
  auto shape = [&](int64_t rows) { return Shape{SymInt(c.batch), SymInt(c.heads), SymInt(rows), SymInt(c.d)}; };
  Value* q = g->add_input("q", TensorType{t, shape(c.tq), Device::CPU});
  Value* k = g->add_input("k", TensorType{t, shape(c.tk), Device::CPU});
  Value* v = g->add_input("v", TensorType{t, shape(c.tk), Device::CPU});
  std::vector<Value*> ins = {q, k, v};
  Shape ms;
  for (int64_t d : mask_shape) ms.push_back(SymInt(d));
  if (!mask_shape.empty()) ins.push_back(g->add_input("mask", TensorType{bool_mask ? DType::Bool : t, ms, Device::CPU}));
  g->set_outputs(g->add_node(Op::Attention, ins,
                             {{"causal", int64_t(c.causal)}, {"scale", c.scale}, {"zero_nan_rows", int64_t(zero_nan_rows)}}));
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

TEST(CudaCodegen, FusedAttentionTakesHalfPrecisionAndAdditiveMasks) {
  const AttentionCase c{2, 3, 77, 77, 64, true, 0};
  EXPECT_EQ(attention_steps(*attention_graph(DType::BF16, c)), 1);
  EXPECT_EQ(attention_steps(*attention_graph(DType::F16, c)), 1);
  EXPECT_EQ(attention_steps(*attention_graph(DType::BF16, c, {2, 1, 1, 77})), 1);  // an additive mask
  EXPECT_EQ(attention_steps(*attention_graph(DType::BF16, c, {77, 77}, false, true)), 1);
  // f32, a bool mask, or a head dim the kernel has no form for: decomposed into primitives.
  EXPECT_EQ(attention_steps(*attention_graph(DType::F32, c)), 0);
  EXPECT_EQ(attention_steps(*attention_graph(DType::BF16, c, {77, 77}, /*bool_mask=*/true)), 0);
  EXPECT_EQ(attention_steps(*attention_graph(DType::BF16, AttentionCase{1, 2, 9, 9, 72, false, 0})), 0);
  EXPECT_EQ(attention_steps(*attention_graph(DType::BF16, AttentionCase{1, 2, 9, 9, 144, false, 0})), 0);
  EXPECT_TRUE(codegen::cuda::fused_attention_head_dim_supported(16));
  EXPECT_FALSE(codegen::cuda::fused_attention_head_dim_supported(8));
  EXPECT_EQ(codegen::cuda::fused_attention_kernel_name({DType::BF16, 64}), "kiln_attention_bf16_d64");
  EXPECT_EQ(codegen::cuda::fused_attention_kernel_name({DType::F16, 32, true, true}), "kiln_attention_f16_d32_mask_zero_nan");
  EXPECT_THROW(codegen::cuda::fused_attention_kernel_name({DType::F32, 64}), Error);
}

TEST(CudaCodegen, FusedAttentionSourceCompiles) {
  if (!cuda::nvrtc_status().loaded) GTEST_SKIP() << cuda::nvrtc_status().message;
  std::string source = "typedef unsigned short uint16_t;\n" +
                       codegen::cuda::fused_attention_source({{DType::BF16, 64},
                                                              {DType::F16, 128},
                                                              {DType::BF16, 16},
                                                              {DType::BF16, 64, true, false},
                                                              {DType::F16, 64, true, true},
                                                              {DType::BF16, 128, false, true}});
  EXPECT_NE(source.find("kiln_attention_f16_d128"), std::string::npos);
  EXPECT_NE(source.find("kiln_attention_f16_d64_mask_zero_nan"), std::string::npos);
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
      EXPECT_NE(exe->source().find(codegen::cuda::fused_attention_kernel_name({t, c.d})), std::string::npos);
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

// An additive mask (broadcast over batch, heads or rows, or full) read per score, and zero_nan_rows:
// rows whose softmax is NaN — every key masked by -inf, a NaN in q, causal rows with no key — come
// out as sum_j 0 * v[j]: zeros, and NaN in the column where v holds an infinity.
TEST(CudaCompiled, FusedAttentionWithMaskAndZeroNanRowsMatchesTheInterpreter) {
  if (!cuda_unavailable_reason().empty()) GTEST_SKIP() << cuda_unavailable_reason();
  struct MaskCase {
    AttentionCase c;
    std::vector<int64_t> mask;  // empty: none
    bool zero_nan_rows;
    const char* what;
  };
  const std::vector<MaskCase> cases = {
      {{2, 3, 77, 77, 64, false, 0}, {2, 1, 1, 77}, false, "BERT's padding mask [B, 1, 1, Tk]"},
      {{2, 3, 77, 91, 32, true, 0}, {77, 91}, true, "a [Tq, Tk] plane under a causal mask"},
      {{1, 2, 70, 130, 64, false, 0.2}, {1, 2, 70, 130}, true, "a full mask, some rows all -inf"},
      {{1, 2, 130, 50, 16, true, 0}, {}, true, "causal, the first 80 rows keep no key"},
      {{2, 2, 33, 65, 128, false, 0}, {2, 1, 33, 65}, true, "a per-batch plane, the widest head"},
  };
  for (DType t : {DType::BF16, DType::F16}) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const MaskCase& mc = cases[i];
      const AttentionCase& c = mc.c;
      std::unique_ptr<Graph> g = attention_graph(t, c, mc.mask, false, mc.zero_nan_rows);
      CudaCompileOptions o;
      o.base.cache_dir = test_cache_dir();
      auto exe = compile_cuda(*g, o);
      const codegen::cuda::FusedAttentionKernel kernel{t, c.d, !mc.mask.empty(), mc.zero_nan_rows};
      EXPECT_NE(exe->source().find(codegen::cuda::fused_attention_kernel_name(kernel)), std::string::npos) << mc.what;
      for (uint64_t r = 0; r < 2; ++r) {
        std::vector<HostTensor> in = {HostTensor::random(t, {c.batch, c.heads, c.tq, c.d}, 10 * i + r, -2, 2),
                                      HostTensor::random(t, {c.batch, c.heads, c.tk, c.d}, 20 * i + r + 1, -2, 2),
                                      HostTensor::random(t, {c.batch, c.heads, c.tk, c.d}, 30 * i + r + 2, -1, 1)};
        if (!mc.mask.empty()) {
          HostTensor m = HostTensor::random(t, mc.mask, 40 * i + r + 3, -3, 3);
          const int64_t tk = mc.mask.back(), rows = m.numel() / tk;
          for (int64_t row = 0; row < rows; ++row)  // padded keys: the last 7 of each row (odd rows: all)
            for (int64_t j = row % 2 ? 0 : tk - 7; j < tk; ++j) m.set_f64(row * tk + j, -INFINITY);
          in.push_back(m);
        }
        if (mc.zero_nan_rows && r == 1) {
          in[0].set_f64(5 * c.d + 3, NAN);    // query row 5 of the first head: a NaN row
          in[2].set_f64(11 * c.d + 1, INFINITY);  // v: column 1 of key 11 is not finite
        }
        std::vector<HostTensor> want = interp::run(*g, in);
        std::vector<HostTensor> got = exe->run(in);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(compare_tensors(got[0], want[0]), "") << dtype_name(t) << " " << mc.what << ", run " << r;
        if (mc.zero_nan_rows && r == 1) {  // row 5 of head 0: zeros, NaN in column 1
          EXPECT_EQ(got[0].get_f64(5 * c.d), 0.0) << mc.what;
          EXPECT_TRUE(std::isnan(got[0].get_f64(5 * c.d + 1))) << mc.what;
        }
      }
    }
  }
}

// A transformer's attention input: one [B, T, 3*H*D] projection split into q, k, v (slices along
// the last dim), each reshaped to [B, T, H, D] and permuted to [B, H, T, D]; `merge_heads`: the
// output permuted back and reshaped to [B, T, H*D], as the block does.
std::unique_ptr<Graph> projected_attention_graph(DType t, int64_t batch, int64_t seq, int64_t heads, int64_t d, bool causal,
                                                 bool merge_heads = false) {
  auto g = std::make_unique<Graph>("projected_attention");
  const int64_t c = heads * d;
  Value* qkv = g->add_input("qkv", TensorType{t, {SymInt(batch), SymInt(seq), SymInt(3 * c)}, Device::CPU});
  std::vector<Value*> parts;
  for (int64_t i = 0; i < 3; ++i) {
    Value* part = g->add(Op::Slice, {qkv}, {{"axes", std::vector<int64_t>{2}}, {"starts", std::vector<int64_t>{i * c}},
                                            {"ends", std::vector<int64_t>{(i + 1) * c}}, {"steps", std::vector<int64_t>{1}}});
    Value* split = g->add(Op::Reshape, {part}, {{"shape", Shape{SymInt(batch), SymInt(seq), SymInt(heads), SymInt(d)}}});
    parts.push_back(g->add(Op::Permute, {split}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}));
  }
  Value* y = g->add(Op::Attention, parts, {{"causal", int64_t(causal)}, {"scale", 0.0}});
  if (merge_heads) {
    y = g->add(Op::Permute, {y}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    y = g->add(Op::Reshape, {y}, {{"shape", Shape{SymInt(batch), SymInt(seq), SymInt(c)}}});
  }
  g->set_outputs({y});
  return g;
}

// The scheduler leaves the three permuted slices as views the attention step reads in place (no
// copy kernels), and lower::strided_view gives their offsets and strides in the projection.
TEST(CudaCodegen, FusedAttentionReadsStridedViewsInPlace) {
  const int64_t B = 2, T = 37, H = 3, D = 16, C = H * D;
  std::unique_ptr<Graph> g = projected_attention_graph(DType::BF16, B, T, H, D, true);
  CompileOptions o;
  o.keep_whole.insert(Op::Attention);
  o.attention_reads_views = true;
  auto low = runtime::lower_for_target(*g, o, "kiln_att_views_");
  EXPECT_EQ(low->kernels.size(), 0u) << low->schedule.explain();
  ASSERT_EQ(low->steps.size(), 1u);
  const Node& att = *low->steps[0].node;
  auto is_view = [&](const Value* v) { return low->schedule.is_view(v); };
  for (int64_t i = 0; i < 3; ++i) {
    auto view = lower::strided_view(att.inputs[size_t(i)], is_view);
    ASSERT_TRUE(view.has_value());
    EXPECT_EQ(view->source, low->graph->inputs()[0]);
    EXPECT_EQ(view->offset, i * C);
    EXPECT_EQ(view->strides, (std::vector<int64_t>{T * 3 * C, D, 3 * C, 1}));
    auto rows = lower::batched_rows({B, H, T, D}, *view, 2);
    ASSERT_TRUE(rows.has_value());
    EXPECT_EQ(rows->outer_stride, T * 3 * C);
    EXPECT_EQ(rows->heads, H);
    EXPECT_EQ(rows->head_stride, D);
    EXPECT_EQ(rows->row_stride, 3 * C);
  }
  // Without the option the views are copied, one kernel each.
  o.attention_reads_views = false;
  EXPECT_EQ(runtime::lower_for_target(*g, o, "kiln_att_copies_")->kernels.size(), 3u);
  // Rows that start off a 16-byte boundary (head dim 12 in a projection of odd width) are copied.
  std::unique_ptr<Graph> odd = projected_attention_graph(DType::BF16, 1, 5, 1, 12, false);
  o.attention_reads_views = true;
  EXPECT_EQ(runtime::lower_for_target(*odd, o, "kiln_att_odd_")->kernels.size(), 3u);
}

// heads_last: the interpreter writes [B, Tq, H, D] (the permute of the plain output), the CPU
// path decomposes it to the same; prepare_graph_for_cuda turns fused attention whose only reader
// merges the heads back into it, so no copy is left.
TEST(CudaCodegen, AttentionWritesHeadsLastForTheHeadMerge) {
  const AttentionCase c{2, 3, 9, 11, 16, true, 0};
  std::unique_ptr<Graph> plain = attention_graph(DType::F32, c);
  Graph last("heads_last");
  std::vector<Value*> ins;
  for (const Value* v : plain->inputs()) ins.push_back(last.add_input(v->name, v->type));
  last.set_outputs({last.add(Op::Attention, ins, {{"causal", int64_t(1)}, {"heads_last", int64_t(1)}})});
  EXPECT_EQ(last.outputs()[0]->type.shape, (Shape{SymInt(2), SymInt(9), SymInt(3), SymInt(16)}));
  std::vector<HostTensor> in = {HostTensor::random(DType::F32, {2, 3, 9, 16}, 1, -2, 2),
                                HostTensor::random(DType::F32, {2, 3, 11, 16}, 2, -2, 2),
                                HostTensor::random(DType::F32, {2, 3, 11, 16}, 3, -1, 1)};
  const HostTensor want = interp::run(*plain, in)[0], got = interp::run(last, in)[0];
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t i = 0; i < 9; ++i)
        for (int64_t e = 0; e < 16; ++e)
          ASSERT_EQ(got.get_f64(((b * 9 + i) * 3 + h) * 16 + e), want.get_f64(((b * 3 + h) * 9 + i) * 16 + e));
  compile_and_check(last, in, "heads_last on the CPU");  // the decomposition, then a permute
  // On the GPU path the block's head merge folds into the attention.
  std::unique_ptr<Graph> merged = projected_attention_graph(DType::BF16, 2, 37, 3, 16, true, /*merge_heads=*/true);
  codegen::cuda::prepare_graph_for_cuda(*merged, /*fused_attention=*/true);
  int attention = 0, permutes = 0;
  for (const auto& n : merged->nodes()) {
    if (n->op == Op::Attention) {
      ++attention;
      EXPECT_EQ(n->attrs.get_int("heads_last"), 1);
    }
    permutes += n->op == Op::Permute;
  }
  EXPECT_EQ(attention, 1);
  EXPECT_EQ(permutes, 3);  // q's, k's and v's; the output's is gone
  CompileOptions o;
  o.keep_whole.insert(Op::Attention);
  o.attention_reads_views = true;
  EXPECT_EQ(runtime::lower_for_target(*merged, o, "kiln_att_merged_")->kernels.size(), 0u);
}

// strided_view rejects a reshape that merges dims a slice left apart (not affine).
TEST(CudaCodegen, StridedViewsMustBeAffine) {
  Graph g("merge");
  Value* x = g.add_input("x", TensorType{DType::BF16, {SymInt(4), SymInt(10)}, Device::CPU});
  Value* sliced = g.add(Op::Slice, {x}, {{"axes", std::vector<int64_t>{1}}, {"starts", std::vector<int64_t>{0}},
                                         {"ends", std::vector<int64_t>{6}}, {"steps", std::vector<int64_t>{1}}});
  Value* merged = g.add(Op::Reshape, {sliced}, {{"shape", Shape{SymInt(24)}}});
  auto all_views = [&](const Value* v) { return v != x; };
  EXPECT_FALSE(lower::strided_view(merged, all_views).has_value());
  auto kept = lower::strided_view(sliced, all_views);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->strides, (std::vector<int64_t>{10, 1}));
}

TEST(CudaCompiled, FusedAttentionReadsStridedViewsAndMatchesTheInterpreter) {
  if (!cuda_unavailable_reason().empty()) GTEST_SKIP() << cuda_unavailable_reason();
  for (DType t : {DType::BF16, DType::F16}) {
    for (bool causal : {true, false}) {
      const int64_t B = 2, T = 83, H = 3, D = 64;
      // Causal: the heads merged back too ([B, T, H*D], the kernel writing heads last).
      std::unique_ptr<Graph> g = projected_attention_graph(t, B, T, H, D, causal, /*merge_heads=*/causal);
      CudaCompileOptions o;
      o.base.cache_dir = test_cache_dir();
      auto exe = compile_cuda(*g, o);
      EXPECT_EQ(exe->stats().kernels_generated, 0) << "the views are read in place, not copied";
      for (uint64_t r = 0; r < 2; ++r) {
        std::vector<HostTensor> in = {HostTensor::random(t, {B, T, 3 * H * D}, 90 + r, -2, 2)};
        std::vector<HostTensor> want = interp::run(*g, in);
        std::vector<HostTensor> got = exe->run(in);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(compare_tensors(got[0], want[0]), "") << dtype_name(t) << (causal ? " causal" : "") << " run " << r;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::testing
