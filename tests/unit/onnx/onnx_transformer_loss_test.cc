// ONNX Attention, RotaryEmbedding and the losses, imported and run in the interpreter, against
// direct loops written here from the operator specs (not from the importer's composition):
// grouped-query heads with a KV cache, upper-left causal masking, softcap and the qk output;
// interleaved partial rotary embedding; NLL with class weights and ignore_index.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>

#include "kiln/interp.h"
#include "kiln/onnx.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;

void add_io(onnx::ValueInfoProto* vi, const std::string& name, int elem, const Ints& dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}
void attr_i(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void attr_f(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
void attr_s(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

struct Io {
  std::string name;
  int elem;
  Ints dims;
};

// One-node model; returns the node so the test can add attributes.
onnx::NodeProto* one_node(onnx::ModelProto& m, int opset, const std::string& op, const std::vector<Io>& ins,
                          const std::vector<Io>& outs) {
  m.set_ir_version(9);
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("t");
  auto* n = g->add_node();
  n->set_op_type(op);
  for (const auto& i : ins) {
    n->add_input(i.name);
    add_io(g->add_input(), i.name, i.elem, i.dims);
  }
  for (const auto& o : outs) {
    n->add_output(o.name);
    add_io(g->add_output(), o.name, o.elem, o.dims);
  }
  return n;
}

std::vector<HostTensor> run_model(const onnx::ModelProto& m, const std::vector<HostTensor>& feed) {
  std::string bytes;
  m.SerializeToString(&bytes);
  auto g = import_onnx_bytes(bytes, "test.onnx");
  return interp::run(*g, feed);
}

void expect_near_all(const HostTensor& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.numel(), int64_t(want.size())) << what;
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_NEAR(got.get_f64(i), want[size_t(i)], tol * (1 + std::fabs(want[size_t(i)]))) << what << " at " << i;
}

constexpr int kF = onnx::TensorProto::FLOAT;
constexpr int kI64 = onnx::TensorProto::INT64;

TEST(OnnxTransformerOps, AttentionGqaCacheCausalSoftcapMatchesLoops) {
  // 3-D packed heads: Q [B, Sq, Hq*D], K/V [B, Skv, Hkv*D]; a past of P keys per kv head.
  const int64_t B = 2, Sq = 3, Skv = 2, P = 3, Hq = 4, Hkv = 2, D = 5, Dv = 3, T = P + Skv;
  const float softcap = 2.5f;
  onnx::ModelProto m;
  auto* n = one_node(m, 23, "Attention",
                     {{"Q", kF, {B, Sq, Hq * D}}, {"K", kF, {B, Skv, Hkv * D}}, {"V", kF, {B, Skv, Hkv * Dv}},
                      {"mask", kF, {Sq, T}}, {"past_k", kF, {B, Hkv, P, D}}, {"past_v", kF, {B, Hkv, P, Dv}}},
                     {{"Y", kF, {B, Sq, Hq * Dv}}, {"pk", kF, {B, Hkv, T, D}}, {"pv", kF, {B, Hkv, T, Dv}},
                      {"qk", kF, {B, Hq, Sq, T}}});
  attr_i(n, "q_num_heads", Hq);
  attr_i(n, "kv_num_heads", Hkv);
  attr_i(n, "is_causal", 1);
  attr_f(n, "softcap", softcap);
  attr_i(n, "qk_matmul_output_mode", 1);  // scores + bias, before softcap
  HostTensor q = HostTensor::random(DType::F32, {B, Sq, Hq * D}, 1, -1, 1);
  HostTensor k = HostTensor::random(DType::F32, {B, Skv, Hkv * D}, 2, -1, 1);
  HostTensor v = HostTensor::random(DType::F32, {B, Skv, Hkv * Dv}, 3, -1, 1);
  HostTensor mask = HostTensor::random(DType::F32, {Sq, T}, 4, -0.5, 0.5);
  HostTensor pk = HostTensor::random(DType::F32, {B, Hkv, P, D}, 5, -1, 1);
  HostTensor pv = HostTensor::random(DType::F32, {B, Hkv, P, Dv}, 6, -1, 1);
  auto out = run_model(m, {q, k, v, mask, pk, pv});
  ASSERT_EQ(out.size(), 4u);

  // Key t of kv head h: from the past for t < P, else the new K at position t - P.
  auto key = [&](int64_t b, int64_t h, int64_t t, int64_t d) {
    return t < P ? pk.get_f64(((b * Hkv + h) * P + t) * D + d) : k.get_f64((b * Skv + t - P) * Hkv * D + h * D + d);
  };
  auto val = [&](int64_t b, int64_t h, int64_t t, int64_t d) {
    return t < P ? pv.get_f64(((b * Hkv + h) * P + t) * Dv + d) : v.get_f64((b * Skv + t - P) * Hkv * Dv + h * Dv + d);
  };
  std::vector<double> y(size_t(B * Sq * Hq * Dv)), qk(size_t(B * Hq * Sq * T)), present_k, present_v;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t d = 0; d < D; ++d) present_k.push_back(key(b, h, t, d));
        for (int64_t d = 0; d < Dv; ++d) present_v.push_back(val(b, h, t, d));
      }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      int64_t kvh = h / (Hq / Hkv);  // grouped: query heads 0,1 read kv head 0
      for (int64_t i = 0; i < Sq; ++i) {
        std::vector<double> s(static_cast<size_t>(T));
        double mx = -INFINITY;
        for (int64_t t = 0; t < T; ++t) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q.get_f64((b * Sq + i) * Hq * D + h * D + d) * key(b, kvh, t, d);
          double x = dot / std::sqrt(double(D)) + mask.get_f64(i * T + t) + (t > i + P ? -INFINITY : 0.0);
          qk[size_t(((b * Hq + h) * Sq + i) * T + t)] = x;
          s[size_t(t)] = softcap * std::tanh(x / softcap);
          mx = std::max(mx, s[size_t(t)]);
        }
        double sum = 0;
        for (auto& e : s) sum += (e = std::exp(e - mx));
        for (int64_t d = 0; d < Dv; ++d) {
          double acc = 0;
          for (int64_t t = 0; t < T; ++t) acc += s[size_t(t)] / sum * val(b, kvh, t, d);
          y[size_t((b * Sq + i) * Hq * Dv + h * Dv + d)] = acc;
        }
      }
    }
  expect_near_all(out[0], y, 1e-5, "Y");
  expect_near_all(out[1], present_k, 0, "present_key");
  expect_near_all(out[2], present_v, 0, "present_value");
  for (int64_t i = 0; i < out[3].numel(); ++i) {  // -inf where masked, else close
    if (std::isinf(qk[size_t(i)])) ASSERT_TRUE(std::isinf(out[3].get_f64(i)) && out[3].get_f64(i) < 0) << i;
    else ASSERT_NEAR(out[3].get_f64(i), qk[size_t(i)], 1e-5) << i;
  }
}

TEST(OnnxTransformerOps, RotaryEmbeddingInterleavedPartialMatchesLoops) {
  const int64_t B = 2, H = 3, S = 4, D = 10, R = 6, half = R / 2, maxpos = 7;
  onnx::ModelProto m;
  auto* n = one_node(m, 23, "RotaryEmbedding",
                     {{"x", kF, {B, H, S, D}}, {"cos", kF, {maxpos, half}}, {"sin", kF, {maxpos, half}},
                      {"pos", kI64, {B, S}}},
                     {{"y", kF, {B, H, S, D}}});
  attr_i(n, "interleaved", 1);
  attr_i(n, "rotary_embedding_dim", R);
  HostTensor x = HostTensor::random(DType::F32, {B, H, S, D}, 7, -1, 1);
  HostTensor cs = HostTensor::random(DType::F32, {maxpos, half}, 8, -1, 1);
  HostTensor sn = HostTensor::random(DType::F32, {maxpos, half}, 9, -1, 1);
  HostTensor pos = HostTensor::random(DType::I64, {B, S}, 10, 0, maxpos - 1);
  auto out = run_model(m, {x, cs, sn, pos});
  std::vector<double> want(size_t(x.numel()));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s) {
        int64_t base = ((b * H + h) * S + s) * D, p = pos.get_i64(b * S + s);
        for (int64_t d = R; d < D; ++d) want[size_t(base + d)] = x.get_f64(base + d);
        for (int64_t j = 0; j < half; ++j) {  // pairs (2j, 2j+1) rotate by the angle of row p
          double c = cs.get_f64(p * half + j), si = sn.get_f64(p * half + j);
          double x1 = x.get_f64(base + 2 * j), x2 = x.get_f64(base + 2 * j + 1);
          want[size_t(base + 2 * j)] = c * x1 - si * x2;
          want[size_t(base + 2 * j + 1)] = si * x1 + c * x2;
        }
      }
  expect_near_all(out[0], want, 1e-6, "rotary");
}

TEST(OnnxTransformerOps, NllWeightedIgnoreIndexMeanAndSoftmaxCrossEntropyNone) {
  const int64_t N = 3, C = 4, L = 5, ignore = 2;
  HostTensor x = HostTensor::random(DType::F32, {N, C, L}, 11, -2, 2);
  HostTensor target = HostTensor::random(DType::I64, {N, L}, 12, 0, C - 1);
  target.set_i64(0, ignore);  // at least one ignored element
  HostTensor w = HostTensor::random(DType::F32, {C}, 13, 0.5, 2);
  onnx::ModelProto m;
  auto* n = one_node(m, 22, "NegativeLogLikelihoodLoss", {{"x", kF, {N, C, L}}, {"t", kI64, {N, L}}, {"w", kF, {C}}},
                     {{"loss", kF, {}}});
  attr_i(n, "ignore_index", ignore);
  attr_s(n, "reduction", "mean");
  double num = 0, den = 0;
  for (int64_t i = 0; i < N; ++i)
    for (int64_t l = 0; l < L; ++l) {
      int64_t t = target.get_i64(i * L + l);
      if (t == ignore) continue;
      num += -x.get_f64((i * C + t) * L + l) * w.get_f64(t);
      den += w.get_f64(t);
    }
  expect_near_all(run_model(m, {x, target, w})[0], {num / den}, 1e-5, "nll mean");

  onnx::ModelProto m2;
  auto* n2 = one_node(m2, 13, "SoftmaxCrossEntropyLoss", {{"x", kF, {N, C, L}}, {"t", kI64, {N, L}}},
                      {{"loss", kF, {N, L}}, {"log_prob", kF, {N, C, L}}});
  attr_s(n2, "reduction", "none");
  auto out = run_model(m2, {x, target});
  std::vector<double> loss, log_prob(size_t(N * C * L));
  for (int64_t i = 0; i < N; ++i)
    for (int64_t l = 0; l < L; ++l) {
      double sum = 0;
      for (int64_t c = 0; c < C; ++c) sum += std::exp(x.get_f64((i * C + c) * L + l));
      for (int64_t c = 0; c < C; ++c) log_prob[size_t((i * C + c) * L + l)] = x.get_f64((i * C + c) * L + l) - std::log(sum);
      loss.push_back(-log_prob[size_t((i * C + target.get_i64(i * L + l)) * L + l)]);
    }
  expect_near_all(out[0], loss, 1e-5, "sce loss");
  expect_near_all(out[1], log_prob, 1e-5, "sce log_prob");
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// UINT32 initializers keep their values in uint64_data (UINT16 in int32_data); values above 2^31
// must come through unchanged and add as unsigned.
TEST(OnnxUnsigned, Uint16AndUint32TypedDataImportAndAdd) {
  onnx::ModelProto m;
  one_node(m, 14, "Add", {{"x", onnx::TensorProto::UINT32, {2}}, {"c", onnx::TensorProto::UINT32, {2}}},
           {{"y", onnx::TensorProto::UINT32, {2}}});
  auto* init = m.mutable_graph()->add_initializer();
  init->set_name("c");
  init->set_data_type(onnx::TensorProto::UINT32);
  init->add_dims(2);
  init->add_uint64_data(4000000000u);
  init->add_uint64_data(5);
  m.mutable_graph()->mutable_input()->RemoveLast();  // c is an initializer, not a graph input
  auto out = run_model(m, {HostTensor::from_doubles(DType::U32, {2}, {1, 4294967295.0})});
  ASSERT_EQ(out[0].dtype(), DType::U32);
  EXPECT_EQ(out[0].get_i64(0), 4000000001);
  EXPECT_EQ(out[0].get_i64(1), 4);  // wraps mod 2^32

  onnx::ModelProto m16;
  one_node(m16, 14, "Sub", {{"a", onnx::TensorProto::UINT16, {1}}, {"b", onnx::TensorProto::UINT16, {1}}},
           {{"d", onnx::TensorProto::UINT16, {1}}});
  auto d = run_model(m16, {HostTensor::from_doubles(DType::U16, {1}, {3}), HostTensor::from_doubles(DType::U16, {1}, {5})});
  EXPECT_EQ(d[0].get_i64(0), 65534);
}

}  // namespace
}  // namespace kiln
