// Contraction and pooling reference kernels: hand-checked matmul/conv/pool examples, then random
// inputs against direct loops written here (batch broadcasting, 1-D promotion, strides, pads,
// dilations, groups, ceil_mode, count_include_pad) at odd sizes.
#include <gtest/gtest.h>

#include <limits>

#include "interp_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {
using Ints = std::vector<int64_t>;

// Accumulation order differs from the kernel only through rounding of the final result, but sums
// of many terms can cancel; scale the tolerance with the number of terms.
Tolerance sum_tolerance(DType dt, int64_t terms) {
  Tolerance t = rounding_tolerance(dt);
  double k = dt == DType::F64 ? double(terms) : 2.0;
  return kiln::testing::scaled(t, k);
}
}  // namespace

TEST(RefNN, MatMulHandChecked) {
  HostTensor a = tensor(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor b = tensor(DType::F32, {3, 2}, {7, 8, 9, 10, 11, 12});
  // [[1*7+2*9+3*11, 1*8+2*10+3*12], [4*7+5*9+6*11, 4*8+5*10+6*12]]
  expect_close(run1(Op::MatMul, {}, {a, b}), {58, 64, 139, 154});
  HostTensor v = tensor(DType::F32, {3}, {1, 0, -1});
  HostTensor av = run1(Op::MatMul, {}, {a, v});
  EXPECT_EQ(av.shape(), (Ints{2}));
  expect_close(av, {-2, -2});
  HostTensor va = run1(Op::MatMul, {}, {v, b});
  EXPECT_EQ(va.shape(), (Ints{2}));
  expect_close(va, {-4, -4});
  HostTensor dot = run1(Op::MatMul, {}, {v, v});
  EXPECT_EQ(dot.shape(), (Ints{}));
  expect_close(dot, {2});
  expect_ints(run1(Op::MatMul, {}, {tensor(DType::I32, {1, 2}, {3, -4}), tensor(DType::I32, {2, 1}, {5, 6})}), {-9});
}

TEST(RefNN, MatMulRandomWithBatchBroadcastAndPromotion) {
  struct Case { Ints a, b, out; };
  std::vector<Case> cases = {
      {{7, 13}, {13, 5}, {7, 5}},        {{1, 1}, {1, 1}, {1, 1}},
      {{3, 7, 9}, {9, 11}, {3, 7, 11}},  {{2, 1, 5, 3}, {4, 3, 6}, {2, 4, 5, 6}},
      {{13}, {2, 13, 3}, {2, 3}},        {{2, 5, 13}, {13}, {2, 5}},
  };
  uint64_t seed = 1;
  std::vector<DType> dtypes = kFloatDTypes;
  dtypes.push_back(DType::I32);
  dtypes.push_back(DType::I64);
  for (DType dt : dtypes)
    for (const Case& c : cases) {
      HostTensor a = HostTensor::random(dt, c.a, seed++, -3, 3), b = HostTensor::random(dt, c.b, seed++, -3, 3);
      HostTensor out = run1(Op::MatMul, {}, {a, b});
      ASSERT_EQ(out.shape(), c.out);
      // Promote to [.., M, K] x [.., K, N] explicitly, then loop with broadcast batch coords.
      Ints sa = c.a, sb = c.b;
      if (sa.size() == 1) sa.insert(sa.begin(), 1);
      if (sb.size() == 1) sb.push_back(1);
      int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
      Ints ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
      size_t rank = std::max(ba.size(), bb.size());
      while (ba.size() < rank) ba.insert(ba.begin(), 1);
      while (bb.size() < rank) bb.insert(bb.begin(), 1);
      Ints batch(rank);
      for (size_t d = 0; d < rank; ++d) batch[d] = std::max(ba[d], bb[d]);
      std::vector<double> want;
      for (int64_t bi = 0; bi < numel_of(batch); ++bi) {
        Ints co = coords_of(bi, batch);
        int64_t ia = 0, ib = 0;
        for (size_t d = 0; d < rank; ++d) {
          ia = ia * ba[d] + co[d] % ba[d];
          ib = ib * bb[d] + co[d] % bb[d];
        }
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            double acc = 0;
            for (int64_t k = 0; k < K; ++k) acc += a.get_f64(ia * M * K + m * K + k) * b.get_f64(ib * K * N + k * N + n);
            want.push_back(acc);
          }
      }
      expect_close(out, want, sum_tolerance(dt, K), label(dt, c.a) + " x " + label(dt, c.b));
    }
}

TEST(RefNN, Im2ColHandChecked) {
  // 1x1x3x3 input 1..9, 2x2 windows: each row is one window element over the 4 output positions.
  HostTensor x = tensor(DType::F32, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  HostTensor cols = run1(Op::Im2Col, {{"kernel", Ints{2, 2}}}, {x});
  EXPECT_EQ(cols.shape(), (Ints{1, 4, 4}));
  expect_close(cols, {1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9});
  // Padding 1 on top and left only, stride 2: positions (-1,-1), (-1,1), (1,-1), (1,1); zeros outside.
  HostTensor padded = run1(Op::Im2Col, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 0, 0}}}, {x});
  EXPECT_EQ(padded.shape(), (Ints{1, 4, 4}));
  expect_close(padded, {0, 0, 0, 5, 0, 0, 4, 6, 0, 2, 0, 8, 1, 3, 7, 9});
}

// A conv is the weights [O, C*kH*kW] times the columns: checked on random inputs against conv2d
// (two independent reference kernels), with strides, asymmetric pads and dilation.
TEST(RefNN, Im2ColTimesWeightsIsTheConv) {
  const Ints strides{2, 1}, pads{1, 0, 2, 1}, dil{1, 2};
  HostTensor x = HostTensor::random(DType::F64, {2, 3, 9, 8}, 61);
  HostTensor w = HostTensor::random(DType::F64, {5, 3, 3, 2}, 62);
  HostTensor conv = run1(Op::Conv2d, {{"strides", strides}, {"pads", pads}, {"dilations", dil}}, {x, w});
  HostTensor cols = run1(Op::Im2Col, {{"kernel", Ints{3, 2}}, {"strides", strides}, {"pads", pads}, {"dilations", dil}}, {x});
  HostTensor product = run1(Op::MatMul, {}, {w.reshaped({5, 18}), cols});
  ASSERT_EQ(product.numel(), conv.numel());
  for (int64_t i = 0; i < conv.numel(); ++i) EXPECT_NEAR(product.get_f64(i), conv.get_f64(i), 1e-12) << i;
}

TEST(RefNN, Conv2dHandChecked) {
  // 1x1x3x3 input 1..9, 2x2 kernel of ones, no padding: sums of 2x2 windows.
  HostTensor x = tensor(DType::F32, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  HostTensor w = tensor(DType::F32, {1, 1, 2, 2}, {1, 1, 1, 1});
  expect_close(run1(Op::Conv2d, {}, {x, w}), {12, 16, 24, 28});
  // Padding 1 on all sides, stride 2: windows at (-1,-1), (-1,1), (1,-1), (1,1).
  HostTensor y = run1(Op::Conv2d, {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}, {x, w, tensor(DType::F32, {1}, {100})});
  EXPECT_EQ(y.shape(), (Ints{1, 1, 2, 2}));
  expect_close(y, {101, 105, 111, 128});
  // Dilation 2 with a 2x2 kernel picks the corners: 1 + 3 + 7 + 9.
  expect_close(run1(Op::Conv2d, {{"dilations", Ints{2, 2}}}, {x, w}), {20});
}

namespace {
std::vector<double> loop_conv2d(const HostTensor& x, const HostTensor& w, const HostTensor* bias, Ints s, Ints p,
                                Ints d, int64_t groups, Ints out_shape) {
  int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  int64_t O = w.shape()[0], CG = C / groups, KH = w.shape()[2], KW = w.shape()[3];
  int64_t OH = out_shape[2], OW = out_shape[3];
  std::vector<double> out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          double acc = bias ? bias->get_f64(o) : 0;
          int64_t g = o / (O / groups);
          for (int64_t c = g * CG; c < (g + 1) * CG; ++c)
            for (int64_t ky = 0; ky < KH; ++ky)
              for (int64_t kx = 0; kx < KW; ++kx) {
                int64_t iy = oy * s[0] + ky * d[0] - p[0], ix = ox * s[1] + kx * d[1] - p[1];
                if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                  acc += x.get_f64(((n * C + c) * H + iy) * W + ix) * w.get_f64(((o * CG + (c - g * CG)) * KH + ky) * KW + kx);
              }
          out.push_back(acc);
        }
  return out;
}
}  // namespace

TEST(RefNN, Conv2dRandomStridesPadsDilationsGroups) {
  struct Case { Ints x, w; Ints strides, pads, dil; int64_t groups; };
  std::vector<Case> cases = {
      {{1, 3, 7, 7}, {5, 3, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {{2, 4, 13, 9}, {6, 2, 3, 2}, {2, 1}, {1, 0, 2, 1}, {1, 2}, 2},
      {{1, 6, 5, 11}, {6, 1, 3, 3}, {1, 3}, {1, 1, 1, 1}, {2, 1}, 6},  // depthwise
      {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
  };
  uint64_t seed = 40;
  for (DType dt : kFloatDTypes)
    for (const Case& c : cases)
      for (bool with_bias : {false, true}) {
        HostTensor x = HostTensor::random(dt, c.x, seed++), w = HostTensor::random(dt, c.w, seed++);
        HostTensor b = HostTensor::random(dt, {c.w[0]}, seed++);
        Attrs attrs{{"strides", c.strides}, {"pads", c.pads}, {"dilations", c.dil}, {"groups", c.groups}};
        std::vector<HostTensor> in = {x, w};
        if (with_bias) in.push_back(b);
        HostTensor out = run1(Op::Conv2d, attrs, in);
        std::vector<double> want = loop_conv2d(x, w, with_bias ? &b : nullptr, c.strides, c.pads, c.dil, c.groups, out.shape());
        int64_t expected_h = (c.x[2] + c.pads[0] + c.pads[2] - c.dil[0] * (c.w[2] - 1) - 1) / c.strides[0] + 1;
        EXPECT_EQ(out.shape()[2], expected_h);
        expect_close(out, want, sum_tolerance(dt, c.w[1] * c.w[2] * c.w[3]), label(dt, c.x));
      }
}

TEST(RefNN, MaxPoolIgnoresPaddingAndHandlesCeilMode) {
  HostTensor x = tensor(DType::F32, {1, 1, 3, 3}, {-1, -2, -3, -4, -5, -6, -7, -8, -9});
  // 2x2 windows, stride 2, pad 1 everywhere: padding must not win even though it would be 0.
  HostTensor y = run1(Op::MaxPool2d, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, {x});
  EXPECT_EQ(y.shape(), (Ints{1, 1, 2, 2}));
  expect_close(y, {-1, -2, -4, -5});
  // ceil_mode: 3x3 input, kernel 2 stride 2 -> 2x2 windows with the last ones clipped.
  HostTensor z = run1(Op::MaxPool2d, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t(1)}},
                      {tensor(DType::I32, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})});
  EXPECT_EQ(z.shape(), (Ints{1, 1, 2, 2}));
  expect_ints(z, {5, 6, 8, 9});
  HostTensor nan = tensor(DType::F32, {1, 1, 1, 2}, {std::numeric_limits<double>::quiet_NaN(), 1});
  expect_close(run1(Op::MaxPool2d, {{"kernel", Ints{1, 2}}}, {nan}), {std::numeric_limits<double>::quiet_NaN()});
}

TEST(RefNN, AvgPoolCountIncludePadAndCeilMode) {
  HostTensor x = tensor(DType::F64, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Attrs base{{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}};
  // Windows: {1}, {2,3}, {4,7}, {5,6,8,9}.
  expect_close(run1(Op::AvgPool2d, base, {x}), {1, 2.5, 5.5, 7});
  Attrs incl = base;
  incl.set("count_include_pad", int64_t(1));
  expect_close(run1(Op::AvgPool2d, incl, {x}), {0.25, 1.25, 2.75, 7});
  // ceil_mode without padding: the clipped windows divide by their in-bounds size either way.
  Attrs ceil{{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t(1)}, {"count_include_pad", int64_t(1)}};
  expect_close(run1(Op::AvgPool2d, ceil, {x}), {3, 4.5, 7.5, 9});
}

TEST(RefNN, PoolingRandomAgainstLoops) {
  struct Case { Ints x, k, s, p; int64_t ceil; };
  std::vector<Case> cases = {
      {{2, 3, 7, 13}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0},
      {{1, 2, 13, 7}, {2, 3}, {3, 2}, {0, 1, 1, 0}, 1},
      {{1, 1, 5, 5}, {5, 5}, {1, 1}, {0, 0, 0, 0}, 0},
      {{1, 1, 8, 9}, {3, 2}, {2, 3}, {1, 0, 0, 1}, 1},
  };
  uint64_t seed = 80;
  for (DType dt : kFloatDTypes)
    for (const Case& c : cases)
      for (int64_t include_pad : {0, 1}) {
        HostTensor x = HostTensor::random(dt, c.x, seed++);
        Attrs attrs{{"kernel", c.k}, {"strides", c.s}, {"pads", c.p}, {"ceil_mode", c.ceil}};
        HostTensor mx = run1(Op::MaxPool2d, attrs, {x});
        attrs.set("count_include_pad", include_pad);
        HostTensor av = run1(Op::AvgPool2d, attrs, {x});
        int64_t H = c.x[2], W = c.x[3], OH = mx.shape()[2], OW = mx.shape()[3];
        std::vector<double> want_max, want_avg;
        for (int64_t nc = 0; nc < c.x[0] * c.x[1]; ++nc)
          for (int64_t oy = 0; oy < OH; ++oy)
            for (int64_t ox = 0; ox < OW; ++ox) {
              // Window rows [y0, y0 + k) clipped to the padded extent [-pad, H + pad_end).
              int64_t y0 = oy * c.s[0] - c.p[0], x0 = ox * c.s[1] - c.p[1];
              int64_t y1 = std::min(y0 + c.k[0], H + c.p[2]), x1 = std::min(x0 + c.k[1], W + c.p[3]);
              double best = -INFINITY, sum = 0;
              int64_t valid = 0;
              for (int64_t iy = std::max<int64_t>(y0, 0); iy < std::min(y1, H); ++iy)
                for (int64_t ix = std::max<int64_t>(x0, 0); ix < std::min(x1, W); ++ix) {
                  double v = x.get_f64((nc * H + iy) * W + ix);
                  best = std::max(best, v);
                  sum += v;
                  ++valid;
                }
              want_max.push_back(best);
              want_avg.push_back(sum / double(include_pad ? (y1 - y0) * (x1 - x0) : valid));
            }
        std::string what = str(label(dt, c.x), " ceil ", c.ceil, " include_pad ", include_pad);
        expect_close(mx, want_max, what);
        expect_close(av, want_avg, sum_tolerance(dt, c.k[0] * c.k[1]), what);
      }
  // Max pooling of integers.
  HostTensor xi = HostTensor::random(DType::I8, {1, 2, 5, 7}, 3, -100, 100);
  HostTensor yi = run1(Op::MaxPool2d, {{"kernel", Ints{5, 7}}}, {xi});
  for (int64_t c = 0; c < 2; ++c) {
    int64_t best = -1000;
    for (int64_t i = 0; i < 35; ++i) best = std::max(best, xi.get_i64(c * 35 + i));
    EXPECT_EQ(yi.get_i64(c), best);
  }
}

TEST(RefNN, GlobalAvgPoolMeansSpatialDims) {
  HostTensor x = tensor(DType::F32, {1, 2, 2, 2}, {1, 2, 3, 4, 10, 20, 30, 41});
  HostTensor y = run1(Op::GlobalAvgPool, {}, {x});
  EXPECT_EQ(y.shape(), (Ints{1, 2, 1, 1}));
  expect_close(y, {2.5, 25.25});
  for (DType dt : kFloatDTypes) {
    HostTensor r = HostTensor::random(dt, {2, 3, 7, 13}, 5);
    std::vector<double> want;
    for (int64_t nc = 0; nc < 6; ++nc) {
      double s = 0;
      for (int64_t i = 0; i < 91; ++i) s += r.get_f64(nc * 91 + i);
      want.push_back(s / 91);
    }
    expect_close(run1(Op::GlobalAvgPool, {}, {r}), want, sum_tolerance(dt, 91), dtype_name(dt).data());
    HostTensor r1 = HostTensor::random(dt, {1, 2, 5}, 6);  // 1-D spatial
    expect_close(run1(Op::GlobalAvgPool, {}, {r1}),
                 {(r1.get_f64(0) + r1.get_f64(1) + r1.get_f64(2) + r1.get_f64(3) + r1.get_f64(4)) / 5,
                  (r1.get_f64(5) + r1.get_f64(6) + r1.get_f64(7) + r1.get_f64(8) + r1.get_f64(9)) / 5},
                 sum_tolerance(dt, 5));
  }
}
