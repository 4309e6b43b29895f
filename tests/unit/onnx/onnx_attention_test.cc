// ONNX Attention's two import forms: the plain form (no mask, softcap or qk output; causal only where
// ONNX's upper-left alignment equals Kiln's bottom-right one) must become exactly one Kiln attention
// node, and everything else must stay composed. Both are run in the interpreter on random inputs of
// odd sizes and compared with attention written here as loops from the ONNX spec, in doubles.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <optional>

#include "kiln/interp.h"
#include "kiln/onnx.h"
#include "unit/onnx/one_node_model.h"

namespace kiln {
namespace {

using testing::Io;
using testing::OneNode;

constexpr int F = onnx::TensorProto::FLOAT;
constexpr int kOpset = 23;

void attr_f(OneNode& m, const std::string& name, float v) {
  auto* a = m.node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

std::unique_ptr<Graph> import_model(const OneNode& m) {
  std::string bytes;
  m.m.SerializeToString(&bytes);
  return import_onnx_bytes(bytes, "attention.onnx");
}

int count_ops(const Graph& g, Op op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op == op;
  return n;
}

const Node* only_attention_node(const Graph& g) {
  for (const auto& node : g.nodes())
    if (node->op == Op::Attention) return node.get();
  return nullptr;
}

std::vector<double> values(const HostTensor& t) {
  std::vector<double> v(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = t.get_f64(i);
  return v;
}

// [B, S, H*D] (ONNX's 3-D packed heads) <-> [B, H, S, D]: `to_heads` unpacks, else packs.
std::vector<double> repack_heads(const std::vector<double>& x, int64_t B, int64_t S, int64_t H, int64_t D, bool to_heads) {
  std::vector<double> y(x.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < D; ++d) {
          const size_t heads = size_t(((b * H + h) * S + s) * D + d), packed = size_t(((b * S + s) * H + h) * D + d);
          if (to_heads) y[heads] = x[packed];
          else y[packed] = x[heads];
        }
  return y;
}
std::vector<double> unpack_heads(const std::vector<double>& x, int64_t B, int64_t S, int64_t H, int64_t D) {
  return repack_heads(x, B, S, H, D, true);
}
std::vector<double> pack_heads(const std::vector<double>& x, int64_t B, int64_t H, int64_t S, int64_t D) {
  return repack_heads(x, B, S, H, D, false);
}

// concat(past [B, H, P, D], new [B, H, S, D]) along the sequence axis.
std::vector<double> concat_seq(const std::vector<double>& past, const std::vector<double>& now, int64_t B, int64_t H,
                               int64_t P, int64_t S, int64_t D) {
  std::vector<double> y;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      auto p = past.begin() + (b * H + h) * P * D, n = now.begin() + (b * H + h) * S * D;
      y.insert(y.end(), p, p + P * D);
      y.insert(y.end(), n, n + S * D);
    }
  return y;
}

// The ONNX spec on [B, H, S, D] arrays: softmax(softcap(q k^T * scale + mask)) v, query head h
// reading kv head h / (Hq / Hkv).
struct Reference {
  int64_t B, Hq, Hkv, Sq, Skv, D, Dv;
  double scale;
  std::optional<int64_t> causal_offset;  // key j hidden from query i when j > i + offset
  double softcap = 0;
  std::vector<double> mask;  // additive [Sq, Skv], empty for none

  std::vector<double> run(const std::vector<double>& q, const std::vector<double>& k,
                          const std::vector<double>& v) const {
    std::vector<double> y(size_t(B * Hq * Sq * Dv));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hq; ++h) {
        int64_t kvh = h / (Hq / Hkv);
        for (int64_t i = 0; i < Sq; ++i) {
          std::vector<double> s(static_cast<size_t>(Skv));
          double mx = -INFINITY;
          for (int64_t j = 0; j < Skv; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < D; ++d)
              dot += q[size_t(((b * Hq + h) * Sq + i) * D + d)] * k[size_t(((b * Hkv + kvh) * Skv + j) * D + d)];
            double x = dot * scale + (mask.empty() ? 0.0 : mask[size_t(i * Skv + j)]);
            if (causal_offset && j > i + *causal_offset) x = -INFINITY;
            if (softcap > 0) x = softcap * std::tanh(x / softcap);
            s[size_t(j)] = x;
            mx = std::max(mx, x);
          }
          double sum = 0;
          for (auto& e : s) sum += (e = std::exp(e - mx));
          for (int64_t d = 0; d < Dv; ++d) {
            double acc = 0;
            for (int64_t j = 0; j < Skv; ++j) acc += s[size_t(j)] / sum * v[size_t(((b * Hkv + kvh) * Skv + j) * Dv + d)];
            y[size_t(((b * Hq + h) * Sq + i) * Dv + d)] = acc;
          }
        }
      }
    return y;
  }
};

void expect_near_all(const HostTensor& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.numel(), int64_t(want.size())) << what;
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_NEAR(got.get_f64(i), want[size_t(i)], tol * (1 + std::fabs(want[size_t(i)]))) << what << " at " << i;
}

// A 4-D [B, H, S, D] Attention model without a cache; `extra` inputs follow V (mask, ...).
struct FourD {
  int64_t B, Hq, Hkv, Sq, Skv, D, Dv;
  OneNode model(std::vector<Io> extra = {}, std::vector<std::string> outs = {"Y"}) const {
    std::vector<Io> ins = {{"Q", F, {B, Hq, Sq, D}}, {"K", F, {B, Hkv, Skv, D}}, {"V", F, {B, Hkv, Skv, Dv}}};
    ins.insert(ins.end(), extra.begin(), extra.end());
    return OneNode("Attention", ins, std::move(outs), kOpset);
  }
  HostTensor q(uint64_t seed) const { return HostTensor::random(DType::F32, {B, Hq, Sq, D}, seed, -2, 2); }
  HostTensor k(uint64_t seed) const { return HostTensor::random(DType::F32, {B, Hkv, Skv, D}, seed, -2, 2); }
  HostTensor v(uint64_t seed) const { return HostTensor::random(DType::F32, {B, Hkv, Skv, Dv}, seed, -1, 1); }
  Reference reference(double scale) const { return Reference{B, Hq, Hkv, Sq, Skv, D, Dv, scale, std::nullopt, 0.0, {}}; }
};

TEST(OnnxAttention, Plain4dBecomesOneAttentionNodeAndMatchesLoops) {
  const FourD s{2, 3, 3, 7, 7, 16, 16};
  for (bool with_scale : {false, true})
    for (int causal : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << "causal " << causal << " explicit scale " << with_scale);
      OneNode m = s.model();
      m.attr("is_causal", int64_t(causal));
      if (with_scale) attr_f(m, "scale", 0.3f);
      auto g = import_model(m);
      ASSERT_EQ(count_ops(*g, Op::Attention), 1) << g->to_text();
      EXPECT_EQ(count_ops(*g, Op::Softmax), 0) << g->to_text();
      const Node* n = only_attention_node(*g);
      EXPECT_EQ(n->attrs.get_int("causal"), causal);
      EXPECT_NEAR(n->attrs.get_float("scale"), with_scale ? 0.3 : 0.0, 1e-7);

      HostTensor q = s.q(1), k = s.k(2), v = s.v(3);
      Reference ref = s.reference(with_scale ? double(0.3f) : 1.0 / std::sqrt(double(s.D)));
      if (causal) ref.causal_offset = 0;
      expect_near_all(interp::run(*g, {q, k, v})[0], ref.run(values(q), values(k), values(v)), 1e-5, "Y");
    }
}

TEST(OnnxAttention, MaskStaysComposedAndMatchesLoops) {
  const FourD s{2, 3, 3, 7, 7, 16, 16};
  OneNode m = s.model({{"mask", F, {s.Sq, s.Skv}}});
  auto g = import_model(m);
  EXPECT_EQ(count_ops(*g, Op::Attention), 0) << g->to_text();
  HostTensor q = s.q(4), k = s.k(5), v = s.v(6), mask = HostTensor::random(DType::F32, {s.Sq, s.Skv}, 7, -3, 1);
  Reference ref = s.reference(1.0 / std::sqrt(double(s.D)));
  ref.mask = values(mask);
  expect_near_all(interp::run(*g, {q, k, v, mask})[0], ref.run(values(q), values(k), values(v)), 1e-5, "Y");
}

// Without a cache ONNX aligns the causal mask upper-left (j > i hidden); Kiln's op would align it
// bottom-right (j > i + 2 here), so a short query must not become the attention op.
TEST(OnnxAttention, CausalShortQueryWithoutCacheStaysComposedUpperLeft) {
  const FourD s{2, 3, 3, 3, 5, 6, 5};
  OneNode m = s.model();
  m.attr("is_causal", int64_t(1));
  auto g = import_model(m);
  EXPECT_EQ(count_ops(*g, Op::Attention), 0) << g->to_text();
  HostTensor q = s.q(8), k = s.k(9), v = s.v(10);
  Reference upper_left = s.reference(1.0 / std::sqrt(double(s.D)));
  upper_left.causal_offset = 0;
  HostTensor y = interp::run(*g, {q, k, v})[0];
  expect_near_all(y, upper_left.run(values(q), values(k), values(v)), 1e-5, "Y");
  Reference bottom_right = upper_left;
  bottom_right.causal_offset = s.Skv - s.Sq;
  std::vector<double> wrong = bottom_right.run(values(q), values(k), values(v));
  double largest_gap = 0;
  for (size_t i = 0; i < wrong.size(); ++i) largest_gap = std::max(largest_gap, std::fabs(y.get_f64(int64_t(i)) - wrong[i]));
  EXPECT_GT(largest_gap, 1e-2) << "the test cannot tell the two alignments apart";
}

TEST(OnnxAttention, SoftcapStaysComposedAndMatchesLoops) {
  const FourD s{2, 3, 3, 5, 6, 7, 3};
  OneNode m = s.model();
  attr_f(m, "softcap", 1.5f);
  auto g = import_model(m);
  EXPECT_EQ(count_ops(*g, Op::Attention), 0) << g->to_text();
  HostTensor q = s.q(11), k = s.k(12), v = s.v(13);
  Reference ref = s.reference(1.0 / std::sqrt(double(s.D)));
  ref.softcap = double(1.5f);
  expect_near_all(interp::run(*g, {q, k, v})[0], ref.run(values(q), values(k), values(v)), 1e-5, "Y");
}

// The importer cannot see whether a named qk_matmul_output is consumed, so naming it keeps the
// composed form; a softmax in double precision is not what the op computes; a non-positive scale
// is NaN in ONNX (sqrt of it) but would mean 1/sqrt(D) or a real number to Kiln's op.
TEST(OnnxAttention, QkOutputSoftmaxPrecisionAndNonPositiveScaleStayComposed) {
  const FourD s{1, 2, 2, 4, 4, 8, 8};
  OneNode qk_out = s.model({}, {"Y", "", "", "qk"});
  EXPECT_EQ(count_ops(*import_model(qk_out), Op::Attention), 0);
  OneNode f64_softmax = s.model();
  f64_softmax.attr("softmax_precision", int64_t(onnx::TensorProto::DOUBLE));
  EXPECT_EQ(count_ops(*import_model(f64_softmax), Op::Attention), 0);
  OneNode f32_softmax = s.model();
  f32_softmax.attr("softmax_precision", int64_t(onnx::TensorProto::FLOAT));
  EXPECT_EQ(count_ops(*import_model(f32_softmax), Op::Attention), 1);
  OneNode zero_scale = s.model();
  attr_f(zero_scale, "scale", 0.0f);
  EXPECT_EQ(count_ops(*import_model(zero_scale), Op::Attention), 0);
}

// 3-D packed heads, plain and grouped-query (each kv head serves Hq / Hkv query heads).
TEST(OnnxAttention, Plain3dPackedHeadsIncludingGroupedQueryBecomeAttention) {
  const int64_t B = 2, Sq = 5, Skv = 5, D = 6, Dv = 5;
  for (auto [Hq, Hkv] : {std::pair<int64_t, int64_t>{3, 3}, {4, 2}})
    for (int causal : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << "Hq " << Hq << " Hkv " << Hkv << " causal " << causal);
      OneNode m("Attention", {{"Q", F, {B, Sq, Hq * D}}, {"K", F, {B, Skv, Hkv * D}}, {"V", F, {B, Skv, Hkv * Dv}}},
                {"Y"}, kOpset);
      m.attr("q_num_heads", Hq);
      m.attr("kv_num_heads", Hkv);
      m.attr("is_causal", int64_t(causal));
      auto g = import_model(m);
      ASSERT_EQ(count_ops(*g, Op::Attention), 1) << g->to_text();
      EXPECT_EQ(count_ops(*g, Op::Softmax), 0);
      HostTensor q = HostTensor::random(DType::F32, {B, Sq, Hq * D}, 14, -2, 2);
      HostTensor k = HostTensor::random(DType::F32, {B, Skv, Hkv * D}, 15, -2, 2);
      HostTensor v = HostTensor::random(DType::F32, {B, Skv, Hkv * Dv}, 16, -1, 1);
      Reference ref{B, Hq, Hkv, Sq, Skv, D, Dv, 1.0 / std::sqrt(double(D)), std::nullopt, 0.0, {}};
      if (causal) ref.causal_offset = 0;
      std::vector<double> y = ref.run(unpack_heads(values(q), B, Sq, Hq, D), unpack_heads(values(k), B, Skv, Hkv, D),
                                      unpack_heads(values(v), B, Skv, Hkv, Dv));
      HostTensor got = interp::run(*g, {q, k, v})[0];
      ASSERT_EQ(got.shape(), (std::vector<int64_t>{B, Sq, Hq * Dv}));
      expect_near_all(got, pack_heads(y, B, Hq, Sq, Dv), 1e-5, "Y");
    }
}

// With a KV cache of P keys and as many new keys as queries, ONNX's causal rule (j > i + P) is
// Kiln's bottom-right one, so it becomes the op; the present key/value are the concatenations.
TEST(OnnxAttention, CausalKvCacheBecomesAttentionWithPresentOutputs) {
  const int64_t B = 2, Hq = 4, Hkv = 2, P = 4, S = 3, T = P + S, D = 16, Dv = 7;
  OneNode m("Attention",
            {{"Q", F, {B, Hq, S, D}}, {"K", F, {B, Hkv, S, D}}, {"V", F, {B, Hkv, S, Dv}}, {"", F, {}},
             {"past_k", F, {B, Hkv, P, D}}, {"past_v", F, {B, Hkv, P, Dv}}},
            {"Y", "present_k", "present_v"}, kOpset);
  m.attr("is_causal", int64_t(1));
  attr_f(m, "scale", 0.2f);
  auto g = import_model(m);
  ASSERT_EQ(count_ops(*g, Op::Attention), 1) << g->to_text();
  EXPECT_EQ(count_ops(*g, Op::Softmax), 0);
  HostTensor q = HostTensor::random(DType::F32, {B, Hq, S, D}, 17, -2, 2);
  HostTensor k = HostTensor::random(DType::F32, {B, Hkv, S, D}, 18, -2, 2);
  HostTensor v = HostTensor::random(DType::F32, {B, Hkv, S, Dv}, 19, -1, 1);
  HostTensor pk = HostTensor::random(DType::F32, {B, Hkv, P, D}, 20, -2, 2);
  HostTensor pv = HostTensor::random(DType::F32, {B, Hkv, P, Dv}, 21, -1, 1);
  auto out = interp::run(*g, {q, k, v, pk, pv});
  ASSERT_EQ(out.size(), 3u);
  std::vector<double> keys = concat_seq(values(pk), values(k), B, Hkv, P, S, D);
  std::vector<double> vals = concat_seq(values(pv), values(v), B, Hkv, P, S, Dv);
  expect_near_all(out[1], keys, 0, "present_key");
  expect_near_all(out[2], vals, 0, "present_value");
  Reference ref{B, Hq, Hkv, S, T, D, Dv, double(0.2f), P, 0.0, {}};
  expect_near_all(out[0], ref.run(values(q), keys, vals), 1e-5, "Y");
}

// A cache whose new keys outnumber the queries puts ONNX's diagonal (j > i + P) left of Kiln's
// (j > i + P + 1): composed, and still ONNX's answer.
TEST(OnnxAttention, CausalKvCacheWithMoreNewKeysThanQueriesStaysComposed) {
  const int64_t B = 1, H = 2, P = 2, Sq = 3, Sk = 4, T = P + Sk, D = 5, Dv = 3;
  OneNode m("Attention",
            {{"Q", F, {B, H, Sq, D}}, {"K", F, {B, H, Sk, D}}, {"V", F, {B, H, Sk, Dv}}, {"", F, {}},
             {"past_k", F, {B, H, P, D}}, {"past_v", F, {B, H, P, Dv}}},
            {"Y"}, kOpset);
  m.attr("is_causal", int64_t(1));
  auto g = import_model(m);
  EXPECT_EQ(count_ops(*g, Op::Attention), 0) << g->to_text();
  HostTensor q = HostTensor::random(DType::F32, {B, H, Sq, D}, 22, -2, 2);
  HostTensor k = HostTensor::random(DType::F32, {B, H, Sk, D}, 23, -2, 2);
  HostTensor v = HostTensor::random(DType::F32, {B, H, Sk, Dv}, 24, -1, 1);
  HostTensor pk = HostTensor::random(DType::F32, {B, H, P, D}, 25, -2, 2);
  HostTensor pv = HostTensor::random(DType::F32, {B, H, P, Dv}, 26, -1, 1);
  Reference ref{B, H, H, Sq, T, D, Dv, 1.0 / std::sqrt(double(D)), P, 0.0, {}};
  expect_near_all(interp::run(*g, {q, k, v, pk, pv})[0],
                  ref.run(values(q), concat_seq(values(pk), values(k), B, H, P, Sk, D),
                          concat_seq(values(pv), values(v), B, H, P, Sk, Dv)),
                  1e-5, "Y");
}

}  // namespace
}  // namespace kiln
