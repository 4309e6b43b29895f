// Tests for the ONNX ops that the importer decomposes into Kiln primitives (ops_index.cc,
// ops_rnn.cc, ops_signal.cc, ops_vision.cc, and Einsum / 3-D ConvTranspose in ops_nn.cc): each decomposition, run in the interpreter on random
// inputs of odd sizes, against the op's formula written directly as loops here; and malformed nodes
// that must fail with an error naming the node.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>

#include "kiln/interp.h"
#include "kiln/onnx.h"
#include "unit/onnx/one_node_model.h"

namespace kiln {
namespace {

using testing::Io;
using testing::OneNode;

constexpr int F = onnx::TensorProto::FLOAT, I64 = onnx::TensorProto::INT64;

HostTensor ints(std::vector<int64_t> shape, std::vector<int64_t> v) {
  HostTensor t = HostTensor::zeros(DType::I64, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.set_i64(int64_t(i), v[i]);
  return t;
}

void expect_near_all(const HostTensor& got, const std::vector<double>& want, double tol = 1e-4) {
  ASSERT_EQ(got.numel(), int64_t(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got.get_f64(int64_t(i)), want[i], tol) << "at " << i;
}

TEST(OnnxDecomp, ScatterElementsAddWithDuplicatesAndNegativeIndices) {
  OneNode n("ScatterElements", {{"d", F, {3, 5}}, {"i", I64, {3, 2}}, {"u", F, {3, 2}}}, {"y"});
  n.attr("axis", int64_t(1));
  n.attr("reduction", std::string("add"));
  HostTensor d = HostTensor::random(DType::F32, {3, 5}, 1), u = HostTensor::random(DType::F32, {3, 2}, 2);
  HostTensor idx = ints({3, 2}, {0, 0, -1, 2, 4, -5});
  auto y = n.run({d, idx, u});
  std::vector<double> want = d.to_doubles();
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 2; ++j) {
      int64_t col = idx.get_i64(r * 2 + j);
      if (col < 0) col += 5;
      want[size_t(r * 5 + col)] += u.get_f64(r * 2 + j);
    }
  expect_near_all(y[0], want);
}

TEST(OnnxDecomp, ScatterNDReplaceLastWriteWinsAndMax) {
  for (std::string red : {"none", "max"}) {
    OneNode n("ScatterND", {{"d", F, {4, 3, 2}}, {"i", I64, {3, 1}}, {"u", F, {3, 3, 2}}}, {"y"});
    n.attr("reduction", red);
    HostTensor d = HostTensor::random(DType::F32, {4, 3, 2}, 3), u = HostTensor::random(DType::F32, {3, 3, 2}, 4);
    HostTensor idx = ints({3, 1}, {2, 0, 2});
    auto y = n.run({d, idx, u});
    std::vector<double> want = d.to_doubles();
    for (int k = 0; k < 3; ++k)
      for (int e = 0; e < 6; ++e) {
        double& w = want[size_t(idx.get_i64(k) * 6 + e)];
        double v = u.get_f64(k * 6 + e);
        w = red == "none" ? v : std::max(w, v);
      }
    expect_near_all(y[0], want);
  }
}

TEST(OnnxDecomp, GatherNDWithBatchDims) {
  OneNode n("GatherND", {{"d", F, {2, 3, 5}}, {"i", I64, {2, 4, 1}}}, {"y"});
  n.attr("batch_dims", int64_t(1));
  HostTensor d = HostTensor::random(DType::F32, {2, 3, 5}, 5);
  HostTensor idx = ints({2, 4, 1}, {2, 0, 1, 2, 1, 1, 0, 2});
  auto y = n.run({d, idx});
  ASSERT_EQ(y[0].shape(), (std::vector<int64_t>{2, 4, 5}));
  std::vector<double> want;
  for (int b = 0; b < 2; ++b)
    for (int k = 0; k < 4; ++k)
      for (int e = 0; e < 5; ++e) want.push_back(d.get_f64((b * 3 + idx.get_i64(b * 4 + k)) * 5 + e));
  expect_near_all(y[0], want);
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

TEST(OnnxDecomp, LstmUnrolledMatchesRecurrence) {
  const int64_t T = 3, B = 2, I = 3, H = 5;
  OneNode n("LSTM", {{"X", F, {T, B, I}}, {"W", F, {1, 4 * H, I}}, {"R", F, {1, 4 * H, H}}, {"Bias", F, {1, 8 * H}}},
            {"Y", "Y_h", "Y_c"});
  n.attr("hidden_size", H);
  HostTensor x = HostTensor::random(DType::F32, {T, B, I}, 6), w = HostTensor::random(DType::F32, {1, 4 * H, I}, 7);
  HostTensor r = HostTensor::random(DType::F32, {1, 4 * H, H}, 8), bias = HostTensor::random(DType::F32, {1, 8 * H}, 9);
  auto out = n.run({x, w, r, bias});
  ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{T, 1, B, H}));
  std::vector<double> h(size_t(B * H), 0.0), cs(size_t(B * H), 0.0), ys;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> nh(h.size()), nc(h.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j) {
        double g[4];  // i, o, f, c
        for (int q = 0; q < 4; ++q) {
          int64_t row = q * H + j;
          double s = bias.get_f64(row) + bias.get_f64(4 * H + row);
          for (int64_t k = 0; k < I; ++k) s += x.get_f64((t * B + b) * I + k) * w.get_f64(row * I + k);
          for (int64_t k = 0; k < H; ++k) s += h[size_t(b * H + k)] * r.get_f64(row * H + k);
          g[q] = s;
        }
        double c = sigmoid(g[2]) * cs[size_t(b * H + j)] + sigmoid(g[0]) * std::tanh(g[3]);
        nc[size_t(b * H + j)] = c;
        nh[size_t(b * H + j)] = sigmoid(g[1]) * std::tanh(c);
      }
    h = nh;
    cs = nc;
    ys.insert(ys.end(), h.begin(), h.end());
  }
  expect_near_all(out[0], ys);
  expect_near_all(out[1], h);
  expect_near_all(out[2], cs);
}

TEST(OnnxDecomp, GridSampleBilinearZerosMatchesFormula) {
  const int64_t N = 1, C = 2, Hi = 3, Wi = 5, Ho = 2, Wo = 3;
  OneNode n("GridSample", {{"X", F, {N, C, Hi, Wi}}, {"G", F, {N, Ho, Wo, 2}}}, {"Y"}, 16);
  n.attr("mode", std::string("bilinear"));
  HostTensor x = HostTensor::random(DType::F32, {N, C, Hi, Wi}, 10);
  HostTensor g = HostTensor::random(DType::F32, {N, Ho, Wo, 2}, 11, -1.2, 1.2);  // some taps outside
  auto y = n.run({x, g});
  std::vector<double> want;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t p = 0; p < Ho * Wo; ++p) {
      double fx = ((g.get_f64(2 * p) + 1) * Wi - 1) / 2, fy = ((g.get_f64(2 * p + 1) + 1) * Hi - 1) / 2;
      double x0 = std::floor(fx), y0 = std::floor(fy), s = 0;
      for (int dy = 0; dy < 2; ++dy)
        for (int dx = 0; dx < 2; ++dx) {
          int64_t xi = int64_t(x0) + dx, yi = int64_t(y0) + dy;
          if (xi < 0 || xi >= Wi || yi < 0 || yi >= Hi) continue;
          double wgt = (dx ? fx - x0 : 1 - (fx - x0)) * (dy ? fy - y0 : 1 - (fy - y0));
          s += wgt * x.get_f64((c * Hi + yi) * Wi + xi);
        }
      want.push_back(s);
    }
  expect_near_all(y[0], want);
}

TEST(OnnxDecomp, DftMatchesDirectSum) {
  const int64_t L = 7;
  OneNode n("DFT", {{"x", F, {2, L, 2}}}, {"y"}, 17);
  n.attr("axis", int64_t(1));
  n.attr("onesided", int64_t(1));
  HostTensor x = HostTensor::random(DType::F32, {2, L, 2}, 12);
  auto y = n.run({x});
  ASSERT_EQ(y[0].shape(), (std::vector<int64_t>{2, L / 2 + 1, 2}));
  std::vector<double> want;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t k = 0; k <= L / 2; ++k) {
      double re = 0, im = 0;
      for (int64_t t = 0; t < L; ++t) {
        double a = -2 * M_PI * double(k * t) / double(L), xr = x.get_f64((b * L + t) * 2), xi = x.get_f64((b * L + t) * 2 + 1);
        re += xr * std::cos(a) - xi * std::sin(a);
        im += xr * std::sin(a) + xi * std::cos(a);
      }
      want.push_back(re);
      want.push_back(im);
    }
  expect_near_all(y[0], want);
}

TEST(OnnxDecomp, Col2ImMatchesAccumulation) {
  const int64_t C = 2, kh = 2, kw = 3, H = 5, W = 6, s = 2;
  const int64_t bh = (H - kh) / s + 1, bw = (W - kw) / s + 1;
  OneNode n("Col2Im", {{"x", F, {1, C * kh * kw, bh * bw}}, {"img", I64, {2}}, {"blk", I64, {2}}}, {"y"});
  n.attr("strides", std::vector<int64_t>{s, s});
  HostTensor x = HostTensor::random(DType::F32, {1, C * kh * kw, bh * bw}, 13);
  HostTensor img = ints({2}, {H, W}), blk = ints({2}, {kh, kw});
  auto y = n.run({x, img, blk}, {{"img", img}, {"blk", blk}});
  std::vector<double> want(size_t(C * H * W), 0.0);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j)
        for (int64_t by = 0; by < bh; ++by)
          for (int64_t bx = 0; bx < bw; ++bx)
            want[size_t((c * H + by * s + i) * W + bx * s + j)] += x.get_f64(((c * kh + i) * kw + j) * bh * bw + by * bw + bx);
  expect_near_all(y[0], want);
}

TEST(OnnxDecomp, MaxPool3dSeparableMatchesBoxMax) {
  const int64_t C = 2, D = 5, H = 4, W = 7;
  OneNode n("MaxPool", {{"x", F, {1, C, D, H, W}}}, {"y"});
  n.attr("kernel_shape", std::vector<int64_t>{2, 3, 2});
  n.attr("strides", std::vector<int64_t>{2, 1, 2});
  n.attr("dilations", std::vector<int64_t>{1, 1, 2});
  n.attr("pads", std::vector<int64_t>{1, 0, 1, 0, 1, 0});
  HostTensor x = HostTensor::random(DType::F32, {1, C, D, H, W}, 14);
  auto y = n.run({x});
  const int64_t Do = (D + 1 - 2) / 2 + 1, Ho = (H + 1 - 3) / 1 + 1, Wo = (W + 1 - 3) / 2 + 1;
  ASSERT_EQ(y[0].shape(), (std::vector<int64_t>{1, C, Do, Ho, Wo}));
  std::vector<double> want;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t od = 0; od < Do; ++od)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double m = -INFINITY;
          for (int64_t a = 0; a < 2; ++a)
            for (int64_t b = 0; b < 3; ++b)
              for (int64_t e = 0; e < 2; ++e) {
                int64_t d = od * 2 - 1 + a, h = oh + b, w = ow * 2 - 1 + 2 * e;
                if (d >= 0 && d < D && h < H && w >= 0 && w < W) m = std::max(m, x.get_f64(((c * D + d) * H + h) * W + w));
              }
          want.push_back(m);
        }
  expect_near_all(y[0], want);
}

TEST(OnnxDecomp, AveragePoolWithDilationsMatchesLoops) {
  const int64_t N = 2, C = 3, H = 7, W = 9, kh = 3, kw = 2, dh = 2, dw = 3, sh = 2, sw = 1;
  const int64_t pt = 1, pl = 0, pb = 2, pr = 1;
  for (int64_t cip : {0, 1}) {
    OneNode n("AveragePool", {{"x", F, {N, C, H, W}}}, {"y"});
    n.attr("kernel_shape", std::vector<int64_t>{kh, kw});
    n.attr("dilations", std::vector<int64_t>{dh, dw});
    n.attr("strides", std::vector<int64_t>{sh, sw});
    n.attr("pads", std::vector<int64_t>{pt, pl, pb, pr});
    n.attr("count_include_pad", cip);
    HostTensor x = HostTensor::random(DType::F32, {N, C, H, W}, 11);
    auto y = n.run({x});
    int64_t Oh = (H + pt + pb - dh * (kh - 1) - 1) / sh + 1, Ow = (W + pl + pr - dw * (kw - 1) - 1) / sw + 1;
    std::vector<double> want;
    for (int64_t nc = 0; nc < N * C; ++nc)
      for (int64_t oh = 0; oh < Oh; ++oh)
        for (int64_t ow = 0; ow < Ow; ++ow) {
          double sum = 0;
          int64_t cnt = 0;
          for (int64_t a = 0; a < kh; ++a)
            for (int64_t b = 0; b < kw; ++b) {
              int64_t h = oh * sh - pt + a * dh, w = ow * sw - pl + b * dw;
              bool in = h >= 0 && h < H && w >= 0 && w < W;
              if (in) sum += x.get_f64((nc * H + h) * W + w);
              if (in || cip) ++cnt;
            }
          want.push_back(sum / double(cnt));
        }
    expect_near_all(y[0], want);
  }
}

TEST(OnnxDecomp, MaxPoolIndicesMatchLoops) {
  const int64_t N = 2, C = 3, H = 7, W = 9, kh = 3, kw = 2, dh = 2, dw = 1, sh = 2, sw = 3;
  const int64_t pt = 1, pl = 1, pb = 2, pr = 1;
  for (int64_t order : {0, 1}) {
    OneNode n("MaxPool", {{"x", F, {N, C, H, W}}}, {"y", "i"});
    n.m.mutable_graph()->mutable_output(1)->mutable_type()->mutable_tensor_type()->set_elem_type(I64);
    n.attr("kernel_shape", std::vector<int64_t>{kh, kw});
    n.attr("dilations", std::vector<int64_t>{dh, dw});
    n.attr("strides", std::vector<int64_t>{sh, sw});
    n.attr("pads", std::vector<int64_t>{pt, pl, pb, pr});
    n.attr("storage_order", order);
    HostTensor x = HostTensor::random(DType::F32, {N, C, H, W}, 12);
    auto y = n.run({x});
    int64_t Oh = (H + pt + pb - dh * (kh - 1) - 1) / sh + 1, Ow = (W + pl + pr - dw * (kw - 1) - 1) / sw + 1;
    std::vector<double> want_y, want_i;
    for (int64_t nc = 0; nc < N * C; ++nc)
      for (int64_t oh = 0; oh < Oh; ++oh)
        for (int64_t ow = 0; ow < Ow; ++ow) {
          double best = -INFINITY;
          int64_t at = -1;
          for (int64_t a = 0; a < kh; ++a)
            for (int64_t b = 0; b < kw; ++b) {
              int64_t h = oh * sh - pt + a * dh, w = ow * sw - pl + b * dw;
              if (h < 0 || h >= H || w < 0 || w >= W) continue;
              double v = x.get_f64((nc * H + h) * W + w);
              if (v > best) best = v, at = nc * H * W + (order == 0 ? h * W + w : h + w * H);
            }
          want_y.push_back(best);
          want_i.push_back(double(at));
        }
    ASSERT_EQ(y.size(), 2u);
    expect_near_all(y[0], want_y);
    ASSERT_EQ(y[1].numel(), int64_t(want_i.size()));
    for (size_t k = 0; k < want_i.size(); ++k) EXPECT_EQ(y[1].get_i64(int64_t(k)), int64_t(want_i[k])) << "at " << k;
  }
}

TEST(OnnxDecomp, ResizeAntialiasMatchesFilterLoops) {
  const int64_t N = 2, C = 3, H = 11, W = 13, Oh = 4, Ow = 5;
  for (std::string mode : {"linear", "cubic"}) {
    OneNode n("Resize", {{"x", F, {N, C, H, W}}, {"", F, {}}, {"", F, {}}, {"sizes", I64, {4}}}, {"y"}, 18);
    n.attr("mode", mode);
    n.attr("antialias", int64_t(1));
    HostTensor x = HostTensor::random(DType::F32, {N, C, H, W}, 13), sizes = ints({4}, {N, C, Oh, Ow});
    auto y = n.run({x, sizes}, {{"sizes", sizes}});
    const double A = -0.75;
    auto kernel = [&](double t) {  // the filter at distance t (in output pixels)
      t = std::abs(t);
      if (mode == "linear") return std::max(0.0, 1 - t);
      if (t <= 1) return (A + 2) * t * t * t - (A + 3) * t * t + 1;
      return t < 2 ? A * t * t * t - 5 * A * t * t + 8 * A * t - 4 * A : 0.0;
    };
    // Taps along one axis: (clamped input index, weight), weights normalised to sum 1.
    auto taps = [&](int64_t o, int64_t in, int64_t out) {
      double s = double(out) / double(in), xi = (double(o) + 0.5) / s - 0.5;
      std::vector<std::pair<int64_t, double>> t;
      double sum = 0;
      for (int64_t p = int64_t(std::floor(xi - 2 / s)) - 1; p <= int64_t(std::ceil(xi + 2 / s)) + 1; ++p) {
        double w = kernel((double(p) - xi) * s);
        if (w == 0) continue;
        t.push_back({std::clamp<int64_t>(p, 0, in - 1), w});
        sum += w;
      }
      for (auto& e : t) e.second /= sum;
      return t;
    };
    std::vector<double> want;
    for (int64_t nc = 0; nc < N * C; ++nc)
      for (int64_t oh = 0; oh < Oh; ++oh)
        for (int64_t ow = 0; ow < Ow; ++ow) {
          double v = 0;
          for (auto [h, wh] : taps(oh, H, Oh))
            for (auto [w, ww] : taps(ow, W, Ow)) v += wh * ww * x.get_f64((nc * H + h) * W + w);
          want.push_back(v);
        }
    expect_near_all(y[0], want);
  }
}

TEST(OnnxDecomp, EinsumEllipsisDiagonalAndBroadcastMatchLoops) {
  {  // "...ii->...i": the diagonal of each batch matrix
    OneNode n("Einsum", {{"x", F, {3, 2, 5, 5}}}, {"y"}, 12);
    n.attr("equation", std::string("...ii ->...i"));
    HostTensor x = HostTensor::random(DType::F32, {3, 2, 5, 5}, 41);
    auto y = n.run({x});
    ASSERT_EQ(y[0].shape(), (std::vector<int64_t>{3, 2, 5}));
    std::vector<double> want;
    for (int64_t b = 0; b < 6; ++b)
      for (int64_t i = 0; i < 5; ++i) want.push_back(x.get_f64((b * 5 + i) * 5 + i));
    expect_near_all(y[0], want, 0);
  }
  {  // ellipses of different ranks broadcast ([2, 1] with [5]); a repeated letter next to "..."
    OneNode n("Einsum", {{"a", F, {2, 1, 3, 4}}, {"b", F, {5, 4, 4, 2}}}, {"y"}, 12);
    n.attr("equation", std::string("...ij,...jjk->...ki"));
    HostTensor a = HostTensor::random(DType::F32, {2, 1, 3, 4}, 42), b = HostTensor::random(DType::F32, {5, 4, 4, 2}, 43);
    auto y = n.run({a, b});
    ASSERT_EQ(y[0].shape(), (std::vector<int64_t>{2, 5, 2, 3}));
    std::vector<double> want;
    for (int64_t p = 0; p < 2; ++p)
      for (int64_t q = 0; q < 5; ++q)
        for (int64_t k = 0; k < 2; ++k)
          for (int64_t i = 0; i < 3; ++i) {
            double s = 0;
            for (int64_t j = 0; j < 4; ++j) s += a.get_f64((p * 3 + i) * 4 + j) * b.get_f64(((q * 4 + j) * 4 + j) * 2 + k);
            want.push_back(s);
          }
    expect_near_all(y[0], want, 1e-5);
  }
  {  // implicit output: the ellipsis first, then the letters used once
    OneNode n("Einsum", {{"x", F, {4, 3, 3}}}, {"y"}, 12);
    n.attr("equation", std::string("...jj"));
    HostTensor x = HostTensor::random(DType::F32, {4, 3, 3}, 44);
    auto y = n.run({x});
    std::vector<double> want;
    for (int64_t b = 0; b < 4; ++b) want.push_back(x.get_f64(b * 9) + x.get_f64(b * 9 + 4) + x.get_f64(b * 9 + 8));
    expect_near_all(y[0], want, 1e-5);
  }
}

TEST(OnnxDecomp, ConvTranspose3dMatchesScatterLoops) {
  const int64_t N = 2, C = 4, D = 3, H = 4, W = 3, G = 2, Og = 3, KD = 2, KH = 3, KW = 2;
  const std::vector<int64_t> s{2, 1, 2}, dl{1, 2, 1}, p{1, 0, 1, 0, 1, 0}, op{1, 0, 1};
  OneNode n("ConvTranspose", {{"x", F, {N, C, D, H, W}}, {"w", F, {C, Og, KD, KH, KW}}, {"b", F, {G * Og}}}, {"y"});
  n.attr("strides", s);
  n.attr("dilations", dl);
  n.attr("pads", p);
  n.attr("output_padding", op);
  n.attr("group", G);
  HostTensor x = HostTensor::random(DType::F32, {N, C, D, H, W}, 45), w = HostTensor::random(DType::F32, {C, Og, KD, KH, KW}, 46);
  HostTensor b = HostTensor::random(DType::F32, {G * Og}, 47);
  auto y = n.run({x, w, b});
  const int64_t in[3] = {D, H, W}, k[3] = {KD, KH, KW};
  int64_t out[3];
  for (int i = 0; i < 3; ++i) out[i] = s[size_t(i)] * (in[i] - 1) + op[size_t(i)] + (k[i] - 1) * dl[size_t(i)] + 1 - p[size_t(i)] - p[size_t(i + 3)];
  ASSERT_EQ(y[0].shape(), (std::vector<int64_t>{N, G * Og, out[0], out[1], out[2]}));
  const int64_t O = G * Og, OD = out[0], OH = out[1], OW = out[2];
  std::vector<double> want(size_t(N * O * OD * OH * OW), 0.0);
  for (int64_t i = 0; i < int64_t(want.size()); ++i) want[size_t(i)] = b.get_f64((i / (OD * OH * OW)) % O);
  for (int64_t nn = 0; nn < N; ++nn)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t d = 0; d < D; ++d)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t x0 = 0; x0 < W; ++x0)
            for (int64_t oc = 0; oc < Og; ++oc)
              for (int64_t kd = 0; kd < KD; ++kd)
                for (int64_t kh = 0; kh < KH; ++kh)
                  for (int64_t kw = 0; kw < KW; ++kw) {
                    int64_t od = d * s[0] + kd * dl[0] - p[0], oh = h * s[1] + kh * dl[1] - p[1], ow = x0 * s[2] + kw * dl[2] - p[2];
                    if (od < 0 || od >= OD || oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                    int64_t o = (c / (C / G)) * Og + oc;
                    want[size_t((((nn * O + o) * OD + od) * OH + oh) * OW + ow)] +=
                        x.get_f64((((nn * C + c) * D + d) * H + h) * W + x0) * w.get_f64((((c * Og + oc) * KD + kd) * KH + kh) * KW + kw);
                  }
  expect_near_all(y[0], want, 1e-4);
}

TEST(OnnxDecomp, LpPool3dMatchesWindowLoops) {
  const int64_t C = 2, D = 5, H = 4, W = 6;
  const std::vector<int64_t> k{2, 3, 2}, s{2, 1, 2}, p{1, 1, 0, 0, 1, 1};
  OneNode n("LpPool", {{"x", F, {1, C, D, H, W}}}, {"y"});
  n.attr("kernel_shape", k);
  n.attr("strides", s);
  n.attr("pads", p);
  n.attr("p", int64_t(3));
  HostTensor x = HostTensor::random(DType::F32, {1, C, D, H, W}, 48);
  auto y = n.run({x});
  const int64_t in[3] = {D, H, W};
  int64_t out[3];
  for (int i = 0; i < 3; ++i) out[i] = (in[i] + p[size_t(i)] + p[size_t(i + 3)] - k[size_t(i)]) / s[size_t(i)] + 1;
  ASSERT_EQ(y[0].shape(), (std::vector<int64_t>{1, C, out[0], out[1], out[2]}));
  std::vector<double> want;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t a = 0; a < out[0]; ++a)
      for (int64_t b = 0; b < out[1]; ++b)
        for (int64_t e = 0; e < out[2]; ++e) {
          double sum = 0;
          for (int64_t i = 0; i < k[0]; ++i)
            for (int64_t j = 0; j < k[1]; ++j)
              for (int64_t l = 0; l < k[2]; ++l) {
                int64_t d = a * s[0] + i - p[0], h = b * s[1] + j - p[1], w = e * s[2] + l - p[2];
                if (d < 0 || d >= D || h < 0 || h >= H || w < 0 || w >= W) continue;
                sum += std::pow(std::fabs(x.get_f64(((c * D + d) * H + h) * W + w)), 3.0);
              }
          want.push_back(std::cbrt(sum));
        }
  expect_near_all(y[0], want, 1e-4);
}

TEST(OnnxDecomp, Col2Im3dMatchesAccumulation) {
  const int64_t C = 2;
  const std::vector<int64_t> img{4, 5, 6}, blk{2, 2, 3}, s{1, 2, 1}, dl{2, 1, 1}, p{1, 0, 0, 1, 0, 1};
  int64_t nb[3], L = 1, K = 1;
  for (int i = 0; i < 3; ++i) {
    nb[i] = (img[size_t(i)] + p[size_t(i)] + p[size_t(i + 3)] - dl[size_t(i)] * (blk[size_t(i)] - 1) - 1) / s[size_t(i)] + 1;
    L *= nb[i];
    K *= blk[size_t(i)];
  }
  OneNode n("Col2Im", {{"x", F, {1, C * K, L}}, {"img", I64, {3}}, {"blk", I64, {3}}}, {"y"});
  n.attr("strides", s);
  n.attr("dilations", dl);
  n.attr("pads", p);
  HostTensor x = HostTensor::random(DType::F32, {1, C * K, L}, 49);
  HostTensor ti = ints({3}, img), tb = ints({3}, blk);
  auto y = n.run({x, ti, tb}, {{"img", ti}, {"blk", tb}});
  ASSERT_EQ(y[0].shape(), (std::vector<int64_t>{1, C, img[0], img[1], img[2]}));
  std::vector<double> want(size_t(C * img[0] * img[1] * img[2]), 0.0);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t t = 0; t < K; ++t)
      for (int64_t l = 0; l < L; ++l) {
        int64_t tap[3] = {t / (blk[1] * blk[2]), (t / blk[2]) % blk[1], t % blk[2]};
        int64_t bl[3] = {l / (nb[1] * nb[2]), (l / nb[2]) % nb[1], l % nb[2]};
        int64_t pos[3];
        bool in = true;
        for (int i = 0; i < 3; ++i) {
          pos[i] = bl[i] * s[size_t(i)] + tap[i] * dl[size_t(i)] - p[size_t(i)];
          in = in && pos[i] >= 0 && pos[i] < img[size_t(i)];
        }
        if (in) want[size_t(((c * img[0] + pos[0]) * img[1] + pos[1]) * img[2] + pos[2])] += x.get_f64((c * K + t) * L + l);
      }
  expect_near_all(y[0], want, 1e-5);
}

TEST(OnnxDecomp, TensorScatterLinearAndCircularMatchWrites) {
  const int64_t B = 3, M = 7, S = 3, D = 5;
  for (const char* mode : {"linear", "circular"}) {
    OneNode n("TensorScatter", {{"past", F, {B, M, D}}, {"upd", F, {B, S, D}}, {"w", I64, {B}}}, {"present"}, 24);
    n.attr("mode", std::string(mode));
    n.attr("axis", int64_t(1));
    bool circular = std::string(mode) == "circular";
    HostTensor past = HostTensor::random(DType::F32, {B, M, D}, 50), upd = HostTensor::random(DType::F32, {B, S, D}, 51);
    HostTensor w = ints({B}, circular ? std::vector<int64_t>{0, 5, 6} : std::vector<int64_t>{0, 2, 4});
    auto y = n.run({past, upd, w});
    std::vector<double> want = past.to_doubles();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) {
        int64_t p = (w.get_i64(b) + s) % M;
        for (int64_t d = 0; d < D; ++d) want[size_t((b * M + p) * D + d)] = upd.get_f64((b * S + s) * D + d);
      }
    expect_near_all(y[0], want, 0);
  }
}

// RoiAlign written from the spec: per bin, G x G bilinear samples (zero off the map, clamped at
// the last row/column), then their mean or the max over samples and corners of weight * pixel.
TEST(OnnxDecomp, RoiAlignAvgAndMaxMatchSampleLoops) {
  const int64_t N = 2, C = 3, H = 7, W = 9, R = 3, PH = 3, PW = 4, G = 2;
  const double scale = 0.5;
  for (const char* mode : {"avg", "max"}) {
    OneNode n("RoiAlign", {{"X", F, {N, C, H, W}}, {"rois", F, {R, 4}}, {"bi", I64, {R}}}, {"Y"}, 22);
    n.attr("mode", std::string(mode));
    n.attr("output_height", PH);
    n.attr("output_width", PW);
    n.attr("sampling_ratio", G);
    auto* a = n.node->add_attribute();
    a->set_name("spatial_scale");
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(float(scale));
    HostTensor X = HostTensor::random(DType::F32, {N, C, H, W}, 52);
    HostTensor rois = HostTensor::from_doubles(DType::F32, {R, 4}, {1, 2, 13, 11, -4, -3, 5, 20, 6.5, 0.5, 19, 5});
    HostTensor bi = ints({R}, {1, 0, 1});
    auto y = n.run({X, rois, bi});
    bool avg = std::string(mode) == "avg";
    std::vector<double> want;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t ch = 0; ch < C; ++ch)
        for (int64_t ph = 0; ph < PH; ++ph)
          for (int64_t pw = 0; pw < PW; ++pw) {
            double x0 = double(float(rois.get_f64(r * 4))) * scale - 0.5, y0 = double(float(rois.get_f64(r * 4 + 1))) * scale - 0.5;
            double bw = (double(float(rois.get_f64(r * 4 + 2))) * scale - 0.5 - x0) / double(PW);
            double bh = (double(float(rois.get_f64(r * 4 + 3))) * scale - 0.5 - y0) / double(PH);
            double acc = avg ? 0.0 : -1e300;
            for (int64_t iy = 0; iy < G; ++iy)
              for (int64_t ix = 0; ix < G; ++ix) {
                double yy = y0 + double(ph) * bh + (double(iy) + 0.5) * bh / double(G);
                double xx = x0 + double(pw) * bw + (double(ix) + 0.5) * bw / double(G);
                double v[4] = {0, 0, 0, 0};
                if (!(yy < -1 || yy > double(H) || xx < -1 || xx > double(W))) {
                  yy = std::max(yy, 0.0), xx = std::max(xx, 0.0);
                  int64_t yl = int64_t(yy), xl = int64_t(xx), yh = yl + 1, xh = xl + 1;
                  if (yl >= H - 1) yl = yh = H - 1, yy = double(yl);
                  if (xl >= W - 1) xl = xh = W - 1, xx = double(xl);
                  double ly = yy - double(yl), lx = xx - double(xl);
                  auto px = [&](int64_t i, int64_t j) { return X.get_f64(((bi.get_i64(r) * C + ch) * H + i) * W + j); };
                  v[0] = (1 - ly) * (1 - lx) * px(yl, xl), v[1] = (1 - ly) * lx * px(yl, xh);
                  v[2] = ly * (1 - lx) * px(yh, xl), v[3] = ly * lx * px(yh, xh);
                }
                if (avg) acc += (v[0] + v[1] + v[2] + v[3]) / double(G * G);
                else acc = std::max({acc, v[0], v[1], v[2], v[3]});
              }
            want.push_back(acc);
          }
    expect_near_all(y[0], want, 1e-5);
  }
}

TEST(OnnxDecomp, MalformedNodesNameTheNode) {
  {
    // Found by scripts/fuzz-onnx: a Col2Im without its image_shape/block_shape inputs used to
    // abort inside protobuf instead of failing with a message.
    OneNode n("Col2Im", {{"input", F, {1, 5, 5}}}, {"output"});
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_Col2Im"), std::string::npos) << e;
    EXPECT_NE(e.find("missing"), std::string::npos) << e;
  }
  {
    OneNode n("ScatterND", {{"d", F, {4, 3}}, {"i", I64, {2, 1}}, {"u", F, {2, 4}}}, {"y"});
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_ScatterND"), std::string::npos) << e;
    EXPECT_NE(e.find("updates"), std::string::npos) << e;
  }
  {
    OneNode n("GridSample", {{"X", F, {1, 1, 3, 3}}, {"G", F, {1, 2, 2, 2}}}, {"Y"});
    n.attr("mode", std::string("quadratic"));
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_GridSample"), std::string::npos) << e;
    EXPECT_NE(e.find("quadratic"), std::string::npos) << e;
  }
  {
    OneNode n("LSTM", {{"X", F, {2, 1, 3}}, {"W", F, {1, 8, 3}}, {"R", F, {1, 8, 2}}}, {"Y"});
    n.attr("hidden_size", int64_t(3));  // W should be [1, 12, 3]
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_LSTM"), std::string::npos) << e;
    EXPECT_NE(e.find("W must be"), std::string::npos) << e;
  }
  {
    // Declared dims that would make the decomposition's constant table absurdly large: a clear
    // error naming the node, not an allocation failure.
    OneNode n("DFT", {{"x", F, {1, int64_t(3) << 30, 1}}}, {"y"}, 17);
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_DFT"), std::string::npos) << e;
    EXPECT_NE(e.find("DFT cosine table"), std::string::npos) << e;
  }
  {
    OneNode n("DFT", {{"x", F, {4, 3}}}, {"y"}, 17);  // last dim must be 1 or 2
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_DFT"), std::string::npos) << e;
    EXPECT_NE(e.find("last dim"), std::string::npos) << e;
  }
  {
    OneNode n("GatherND", {{"d", F, {2, 3}}, {"i", I64, {2, 3}}}, {"y"});  // 3 > rank 2
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_GatherND"), std::string::npos) << e;
  }
  {
    OneNode n("AveragePool", {{"x", F, {1, 1, 5, 5}}}, {"y"});
    n.attr("kernel_shape", std::vector<int64_t>{2, 2});
    n.attr("dilations", std::vector<int64_t>{2, 0});
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_AveragePool"), std::string::npos) << e;
    EXPECT_NE(e.find("dilations"), std::string::npos) << e;
  }
  {
    OneNode n("MaxPool", {{"x", F, {1, 1, 5, 5}}}, {"y", "i"});
    n.attr("kernel_shape", std::vector<int64_t>{2, 2});
    n.attr("storage_order", int64_t(2));
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_MaxPool"), std::string::npos) << e;
    EXPECT_NE(e.find("storage_order"), std::string::npos) << e;
  }
  {
    OneNode n("Resize", {{"x", F, {1, 1, 5, 5}}, {"", F, {}}, {"s", F, {4}}}, {"y"}, 18);
    n.attr("mode", std::string("bicubic"));
    n.attr("antialias", int64_t(1));
    HostTensor sc = HostTensor::from_doubles(DType::F32, {4}, {1, 1, 0.5, 0.5});
    std::string b;
    n.m.SerializeToString(&b);
    ImportOptions o;
    o.static_input_values = {{"s", sc}};
    std::string e;
    try {
      import_onnx_bytes(b, "decomp.onnx", o);
    } catch (const Error& err) {
      e = err.what();
    }
    EXPECT_NE(e.find("the_Resize"), std::string::npos) << e;
    EXPECT_NE(e.find("bicubic"), std::string::npos) << e;
  }
  {  // ellipsis dims 3 and 4 do not broadcast
    OneNode n("Einsum", {{"a", F, {3, 2, 2}}, {"b", F, {4, 2, 2}}}, {"y"}, 12);
    n.attr("equation", std::string("...ij,...jk->...ik"));
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_Einsum"), std::string::npos) << e;
    EXPECT_NE(e.find("broadcast"), std::string::npos) << e;
  }
  {  // a diagonal over dims of different sizes
    OneNode n("Einsum", {{"a", F, {3, 4}}}, {"y"}, 12);
    n.attr("equation", std::string("ii->i"));
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_Einsum"), std::string::npos) << e;
    EXPECT_NE(e.find("different sizes"), std::string::npos) << e;
  }
  {  // 3-D ConvTranspose whose group does not divide the channels
    OneNode n("ConvTranspose", {{"x", F, {1, 3, 2, 2, 2}}, {"w", F, {3, 1, 2, 2, 2}}}, {"y"});
    n.attr("group", int64_t(2));
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_ConvTranspose"), std::string::npos) << e;
    EXPECT_NE(e.find("group"), std::string::npos) << e;
  }
  {  // auto_pad SAME with a zero stride: an error, not a division by zero
    OneNode n("AveragePool", {{"x", F, {1, 1, 5, 5}}}, {"y"});
    n.attr("kernel_shape", std::vector<int64_t>{2, 2});
    n.attr("dilations", std::vector<int64_t>{2, 1});
    n.attr("strides", std::vector<int64_t>{0, 1});
    n.attr("auto_pad", std::string("SAME_UPPER"));
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_AveragePool"), std::string::npos) << e;
    EXPECT_NE(e.find("strides"), std::string::npos) << e;
  }
  {  // a 3-D Col2Im with a non-positive block
    OneNode n("Col2Im", {{"x", F, {1, 4, 9}}, {"img", I64, {3}}, {"blk", I64, {3}}}, {"y"});
    std::string b;
    n.m.SerializeToString(&b);
    ImportOptions o;
    o.static_input_values = {{"img", ints({3}, {3, 3, 3})}, {"blk", ints({3}, {2, -1, -2})}};
    std::string e;
    try {
      import_onnx_bytes(b, "decomp.onnx", o);
    } catch (const Error& err) {
      e = err.what();
    }
    EXPECT_NE(e.find("the_Col2Im"), std::string::npos) << e;
    EXPECT_NE(e.find("positive"), std::string::npos) << e;
  }
  {  // adaptive sampling would make the sample count depend on the ROI values
    OneNode n("RoiAlign", {{"X", F, {1, 1, 4, 4}}, {"rois", F, {1, 4}}, {"bi", I64, {1}}}, {"Y"}, 22);
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_RoiAlign"), std::string::npos) << e;
    EXPECT_NE(e.find("sampling_ratio"), std::string::npos) << e;
  }
  {  // an update longer than the cache
    OneNode n("TensorScatter", {{"past", F, {2, 3, 4}}, {"upd", F, {2, 5, 4}}}, {"present"}, 24);
    std::string e = n.import_error();
    EXPECT_NE(e.find("the_TensorScatter"), std::string::npos) << e;
    EXPECT_NE(e.find("more than the cache"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace kiln
