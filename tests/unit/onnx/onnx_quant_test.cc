// Tests for the ONNX quantization ops (ops_quant.cc), including the integer convolutions: each imported and run in the interpreter on
// random inputs of odd sizes, against the spec's formula written here as loops (round half to
// even, then the zero point, then saturation); and bad nodes that must fail naming the node.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>

#include "kiln/interp.h"
#include "kiln/onnx.h"
#include "unit/onnx/one_node_model.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;

using testing::Io;

// The shared one-node model, outputs left untyped (the importer decides: ints or floats).
struct QuantNode : testing::OneNode {
  QuantNode(const std::string& op, const std::vector<Io>& ins, const std::vector<std::string>& outs, int opset = 21)
      : OneNode(op, ins, outs, opset, /*output_elem=*/0) {}
};

constexpr int kF = onnx::TensorProto::FLOAT, kU8 = onnx::TensorProto::UINT8, kI8 = onnx::TensorProto::INT8,
              kI16 = onnx::TensorProto::INT16;

// Random integers in [lo, hi] of dtype dt.
HostTensor rand_ints(DType dt, Ints shape, int64_t lo, int64_t hi, uint64_t seed) {
  HostTensor r = HostTensor::random(DType::F64, shape, seed);
  HostTensor t = HostTensor::zeros(dt, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set_i64(i, lo + int64_t(std::floor((r.get_f64(i) + 1) / 2 * double(hi - lo + 1))) % (hi - lo + 1));
  return t;
}

double quantize(double scaled, double zp, double lo, double hi) {
  return std::clamp(std::nearbyint(scaled) + zp, lo, hi);  // nearbyint: half to even by default
}

TEST(OnnxQuant, QuantizeDequantizePerAxisAndBlockedMatchFormula) {
  const Ints xs{3, 7, 2};
  {  // per axis 1, int8
    QuantNode n("QuantizeLinear", {{"x", kF, xs}, {"s", kF, {7}}, {"z", kI8, {7}}}, {"y"});
    HostTensor x = HostTensor::random(DType::F32, xs, 61);
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, x.get_f64(i) * 40);
    HostTensor s = HostTensor::random(DType::F32, {7}, 62), z = rand_ints(DType::I8, {7}, -20, 20, 63);
    for (int64_t i = 0; i < 7; ++i) s.set_f64(i, 0.1 + std::fabs(s.get_f64(i)) * 0.3);
    x.set_f64(0, 2.5 * s.get_f64(0));  // a tie: rounds to even
    auto y = n.run({x, s, z});
    ASSERT_EQ(y[0].dtype(), DType::I8);
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t a = (i / 2) % 7;
      float q = float(x.get_f64(i)) / float(s.get_f64(a));
      EXPECT_EQ(y[0].get_i64(i), int64_t(quantize(q, double(z.get_i64(a)), -128, 127))) << i;
    }
  }
  {  // blocked along axis 1 with block 3 (7 = 3 + 3 + 1), int16 in and f32 out
    QuantNode n("DequantizeLinear", {{"x", kI16, xs}, {"s", kF, {3, 3, 2}}, {"z", kI16, {3, 3, 2}}}, {"y"});
    n.attr("axis", int64_t(1));
    n.attr("block_size", int64_t(3));
    HostTensor x = rand_ints(DType::I16, xs, -30000, 30000, 64), z = rand_ints(DType::I16, {3, 3, 2}, -100, 100, 65);
    HostTensor s = HostTensor::random(DType::F32, {3, 3, 2}, 66);
    auto y = n.run({x, s, z});
    ASSERT_EQ(y[0].dtype(), DType::F32);
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t a = i / 14, b = (i / 2) % 7, c = i % 2, p = (a * 3 + b / 3) * 2 + c;
      float want = float(double(x.get_i64(i) - z.get_i64(p))) * float(s.get_f64(p));
      EXPECT_EQ(y[0].get_f64(i), double(want)) << i;
    }
  }
}

TEST(OnnxQuant, DynamicQuantizeLinearScaleZeroPointAndValues) {
  QuantNode n("DynamicQuantizeLinear", {{"x", kF, {5, 3}}}, {"y", "scale", "zp"}, 11);
  HostTensor x = HostTensor::random(DType::F32, {5, 3}, 67);
  for (int64_t i = 0; i < 15; ++i) x.set_f64(i, x.get_f64(i) * 3 + 0.7);
  auto y = n.run({x});
  float hi = 0, lo = 0;
  for (int64_t i = 0; i < 15; ++i) hi = std::max(hi, float(x.get_f64(i))), lo = std::min(lo, float(x.get_f64(i)));
  float scale = (hi - lo) / 255.0f;
  double zp = std::nearbyint(std::clamp(double(0.0f - lo / scale), 0.0, 255.0));
  EXPECT_EQ(y[1].get_f64(0), double(scale));
  EXPECT_EQ(y[2].get_i64(0), int64_t(zp));
  for (int64_t i = 0; i < 15; ++i)
    EXPECT_EQ(y[0].get_i64(i), int64_t(quantize(float(x.get_f64(i)) / scale, zp, 0, 255))) << i;
}

TEST(OnnxQuant, MatMulIntegerAndQLinearMatMulMatchLoops) {
  const int64_t M = 3, K = 5, N = 4;
  HostTensor a = rand_ints(DType::U8, {M, K}, 0, 255, 68), b = rand_ints(DType::U8, {K, N}, 0, 255, 69);
  HostTensor az = rand_ints(DType::U8, {M}, 100, 150, 70), bz = rand_ints(DType::U8, {N}, 100, 150, 71);
  auto dot = [&](int64_t i, int64_t j) {
    int64_t s = 0;
    for (int64_t k = 0; k < K; ++k) s += (a.get_i64(i * K + k) - az.get_i64(i)) * (b.get_i64(k * N + j) - bz.get_i64(j));
    return s;
  };
  {  // per-row / per-column zero points
    QuantNode n("MatMulInteger", {{"a", kU8, {M, K}}, {"b", kU8, {K, N}}, {"az", kU8, {M}}, {"bz", kU8, {N}}}, {"y"}, 10);
    auto y = n.run({a, b, az, bz});
    ASSERT_EQ(y[0].dtype(), DType::I32);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) EXPECT_EQ(y[0].get_i64(i * N + j), dot(i, j));
  }
  {
    QuantNode n("QLinearMatMul", {{"a", kU8, {M, K}}, {"as", kF, {}}, {"az", kU8, {M}}, {"b", kU8, {K, N}}, {"bs", kF, {}},
                                  {"bz", kU8, {N}}, {"ys", kF, {}}, {"yz", kU8, {}}}, {"y"});
    HostTensor as = HostTensor::scalar(DType::F32, 0.013), bs = HostTensor::scalar(DType::F32, 0.021);
    HostTensor ys = HostTensor::scalar(DType::F32, 0.37), yz = HostTensor::scalar(DType::U8, 128);
    auto y = n.run({a, as, az, b, bs, bz, ys, yz});
    double ratio = double(float(float(0.013f) * float(0.021f)) / 0.37f);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        EXPECT_EQ(y[0].get_i64(i * N + j), int64_t(quantize(double(dot(i, j)) * ratio, 128, 0, 255))) << i << "," << j;
  }
}

TEST(OnnxQuant, ConvIntegerAndQLinearConvMatchLoops) {
  const int64_t C = 3, O = 2, H = 5, W = 6, KH = 2, KW = 3, OH = H + 2 - KH + 1, OW = W - KW + 1;
  HostTensor x = rand_ints(DType::U8, {1, C, H, W}, 0, 255, 72), w = rand_ints(DType::U8, {O, C, KH, KW}, 0, 255, 73);
  HostTensor xz = HostTensor::scalar(DType::U8, 119), wz = rand_ints(DType::U8, {O}, 110, 140, 74);
  auto conv = [&](int64_t o, int64_t r, int64_t q) {  // pads: one row above and below
    int64_t s = 0;
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t i = 0; i < KH; ++i)
        for (int64_t j = 0; j < KW; ++j) {
          int64_t h = r + i - 1;
          if (h < 0 || h >= H) continue;
          s += (x.get_i64((ch * H + h) * W + q + j) - 119) * (w.get_i64(((o * C + ch) * KH + i) * KW + j) - wz.get_i64(o));
        }
    return s;
  };
  {
    QuantNode n("ConvInteger", {{"x", kU8, {1, C, H, W}}, {"w", kU8, {O, C, KH, KW}}, {"xz", kU8, {}}, {"wz", kU8, {O}}}, {"y"}, 10);
    auto* a = n.node->add_attribute();
    a->set_name("pads");
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : {1, 0, 1, 0}) a->add_ints(v);
    auto y = n.run({x, w, xz, wz});
    ASSERT_EQ(y[0].shape(), (Ints{1, O, OH, OW}));
    for (int64_t o = 0; o < O; ++o)
      for (int64_t r = 0; r < OH; ++r)
        for (int64_t q = 0; q < OW; ++q) EXPECT_EQ(y[0].get_i64((o * OH + r) * OW + q), conv(o, r, q));
  }
  {
    QuantNode n("QLinearConv", {{"x", kU8, {1, C, H, W}}, {"xs", kF, {}}, {"xz", kU8, {}}, {"w", kU8, {O, C, KH, KW}},
                                {"ws", kF, {O}}, {"wz", kU8, {O}}, {"ys", kF, {}}, {"yz", kU8, {}},
                                {"b", onnx::TensorProto::INT32, {O}}}, {"y"}, 10);
    auto* a = n.node->add_attribute();
    a->set_name("pads");
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : {1, 0, 1, 0}) a->add_ints(v);
    HostTensor xs = HostTensor::scalar(DType::F32, 0.02), ys = HostTensor::scalar(DType::F32, 0.9);
    HostTensor ws = HostTensor::from_doubles(DType::F32, {O}, {0.011, 0.017});
    HostTensor yz = HostTensor::scalar(DType::U8, 100), b = HostTensor::zeros(DType::I32, {O});
    b.set_i64(0, -700);
    b.set_i64(1, 1234);
    auto y = n.run({x, xs, xz, w, ws, wz, ys, yz, b});
    for (int64_t o = 0; o < O; ++o) {
      double ratio = double(float(0.02f * float(ws.get_f64(o))) / 0.9f);
      for (int64_t r = 0; r < OH; ++r)
        for (int64_t q = 0; q < OW; ++q)
          EXPECT_EQ(y[0].get_i64((o * OH + r) * OW + q), int64_t(quantize(double(conv(o, r, q) + b.get_i64(o)) * ratio, 100, 0, 255)));
    }
  }
}

TEST(OnnxQuant, BadNodesNameTheNode) {
  {  // a block_size that does not match the scale's shape
    QuantNode n("DequantizeLinear", {{"x", kI8, {4, 6}}, {"s", kF, {4, 2}}}, {"y"});
    n.attr("axis", int64_t(1));
    n.attr("block_size", int64_t(2));  // 6 / 2 = 3 blocks, the scale has 2
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_DequantizeLinear"), std::string::npos) << e;
    EXPECT_NE(e.find("block_size"), std::string::npos) << e;
  }
  {  // quantizing to a type that is no quantization target
    QuantNode n("QuantizeLinear", {{"x", kF, {4}}, {"s", kF, {}}}, {"y"});
    n.attr("output_dtype", int64_t(24));  // FLOAT8E8M0: a scale type (newer than the libonnx headers)
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_QuantizeLinear"), std::string::npos) << e;
    EXPECT_NE(e.find("f8e8m0"), std::string::npos) << e;
  }
  {  // a zero point of another type than its operand
    QuantNode n("MatMulInteger", {{"a", kU8, {2, 3}}, {"b", kU8, {3, 2}}, {"az", kI8, {}}}, {"y"}, 10);
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_MatMulInteger"), std::string::npos) << e;
    EXPECT_NE(e.find("zero point"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace kiln
