// Normalisation and attention reference kernels: literal examples (softmax of equal values, -inf,
// known layer norm), then random inputs against float64 loops written here, including attention's
// scale default, causal masks with Tq != Tk, bool and additive masks, and fully masked rows.
#include <gtest/gtest.h>

#include <limits>

#include "interp_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {
using Ints = std::vector<int64_t>;
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

Tolerance loose(DType dt, double factor = 4) {
  return kiln::testing::scaled(rounding_tolerance(dt), factor);
}
}  // namespace

TEST(RefNorm, SoftmaxHandChecked) {
  HostTensor x = tensor(DType::F32, {2, 3}, {1, 1, 1, 0, std::log(2.0), std::log(5.0)});
  expect_close(run1(Op::Softmax, {}, {x}), {1.0 / 3, 1.0 / 3, 1.0 / 3, 0.125, 0.25, 0.625});
  expect_close(run1(Op::LogSoftmax, {}, {x}), {-std::log(3.0), -std::log(3.0), -std::log(3.0),
                                              std::log(0.125), std::log(0.25), std::log(0.625)});
  // axis 0: columns [1, 0], [1, log2], [1, log5].
  HostTensor s0 = run1(Op::Softmax, {{"axis", int64_t(0)}}, {x});
  expect_close(s0, {std::exp(1) / (std::exp(1) + 1), std::exp(1) / (std::exp(1) + 2),
                    std::exp(1) / (std::exp(1) + 5), 1 / (std::exp(1) + 1), 2 / (std::exp(1) + 2), 5 / (std::exp(1) + 5)});
  // Large inputs do not overflow (max subtraction), -inf entries get probability 0.
  HostTensor big = tensor(DType::F32, {3}, {1000, 1000, -kInf});
  expect_close(run1(Op::Softmax, {}, {big}), {0.5, 0.5, 0});
  // All -inf: plain math gives NaN (documented choice).
  expect_close(run1(Op::Softmax, {}, {tensor(DType::F32, {2}, {-kInf, -kInf})}), {kNaN, kNaN});
}

TEST(RefNorm, SoftmaxRandomAgainstLoopsOnEveryAxis) {
  uint64_t seed = 3;
  for (DType dt : kFloatDTypes)
    for (int64_t axis : {0, 1, 2, -1}) {
      Ints shape = {3, 7, 13};
      HostTensor x = HostTensor::random(dt, shape, seed++, -5, 5);
      int ax = int(axis < 0 ? axis + 3 : axis);
      std::vector<double> want(size_t(x.numel())), want_log(size_t(x.numel()));
      for (int64_t i = 0; i < x.numel(); ++i) {
        Ints c = coords_of(i, shape);
        double denom = 0;
        for (int64_t k = 0; k < shape[size_t(ax)]; ++k) {
          Ints ck = c;
          ck[size_t(ax)] = k;
          denom += std::exp(x.get_f64((ck[0] * 7 + ck[1]) * 13 + ck[2]));
        }
        want[size_t(i)] = std::exp(x.get_f64(i)) / denom;
        want_log[size_t(i)] = x.get_f64(i) - std::log(denom);
      }
      std::string what = str(dtype_name(dt), " axis ", axis);
      expect_close(run1(Op::Softmax, {{"axis", axis}}, {x}), want, loose(dt), what);
      expect_close(run1(Op::LogSoftmax, {{"axis", axis}}, {x}), want_log, loose(dt), what);
    }
}

TEST(RefNorm, LayerNormHandChecked) {
  // Row [1, 2, 3]: mean 2, biased var 2/3.
  HostTensor x = tensor(DType::F64, {1, 3}, {1, 2, 3});
  double inv = 1 / std::sqrt(2.0 / 3 + 1e-5);
  expect_close(run1(Op::LayerNorm, {}, {x}), {-inv, 0, inv});
  HostTensor w = tensor(DType::F64, {3}, {1, 2, 3}), b = tensor(DType::F64, {3}, {0, 10, 20});
  expect_close(run1(Op::LayerNorm, {}, {x, w, b}), {-inv, 10, 20 + 3 * inv});
  // rms: sqrt(mean([1, 4, 9])) = sqrt(14/3).
  double rinv = 1 / std::sqrt(14.0 / 3 + 1e-6);
  expect_close(run1(Op::RmsNorm, {}, {x}), {rinv, 2 * rinv, 3 * rinv});
  expect_close(run1(Op::RmsNorm, {{"eps", 0.0}}, {x, w}), {1 / std::sqrt(14.0 / 3), 4 / std::sqrt(14.0 / 3), 9 / std::sqrt(14.0 / 3)});
}

TEST(RefNorm, LayerAndRmsNormRandomOverTrailingDimsWithBroadcastParams) {
  struct Case { Ints x; int64_t axis; Ints w; };
  std::vector<Case> cases = {{{7, 13}, -1, {13}}, {{2, 3, 5}, 1, {3, 5}}, {{2, 3, 5}, 1, {1, 5}}, {{5, 1}, -1, {1}},
                             {{3, 7}, 0, {7}}};
  uint64_t seed = 20;
  for (DType dt : kFloatDTypes)
    for (const Case& c : cases) {
      HostTensor x = HostTensor::random(dt, c.x, seed++, -3, 3);
      HostTensor w = HostTensor::random(dt, c.w, seed++, 0.5, 2), b = HostTensor::random(dt, c.w, seed++);
      int ax = int(c.axis < 0 ? c.axis + int64_t(c.x.size()) : c.axis);
      Ints group_shape(c.x.begin() + ax, c.x.end());
      int64_t G = numel_of(group_shape), rows = x.numel() / G;
      double eps = 1e-3;
      std::vector<double> want_ln, want_rms;
      for (int64_t r = 0; r < rows; ++r) {
        double mean = 0, ms = 0;
        for (int64_t j = 0; j < G; ++j) mean += x.get_f64(r * G + j) / double(G);
        double var = 0;
        for (int64_t j = 0; j < G; ++j) {
          double v = x.get_f64(r * G + j);
          var += (v - mean) * (v - mean) / double(G);
          ms += v * v / double(G);
        }
        for (int64_t j = 0; j < G; ++j) {
          Ints gc = coords_of(j, group_shape);
          double wj = w.get_f64(broadcast_source(w, gc)), bj = b.get_f64(broadcast_source(b, gc));
          double v = x.get_f64(r * G + j);
          want_ln.push_back((v - mean) / std::sqrt(var + eps) * wj + bj);
          want_rms.push_back(v / std::sqrt(ms + eps) * wj);
        }
      }
      Attrs attrs{{"axis", c.axis}, {"eps", eps}};
      std::string what = label(dt, c.x) + " w" + dims_to_string(c.w);
      expect_close(run1(Op::LayerNorm, attrs, {x, w, b}), want_ln, loose(dt, 8), what);
      expect_close(run1(Op::RmsNorm, attrs, {x, w}), want_rms, loose(dt, 8), what);
    }
}

TEST(RefNorm, BatchNormPerChannel) {
  HostTensor x = tensor(DType::F32, {1, 2, 2}, {1, 2, 3, 4});
  HostTensor scale = tensor(DType::F32, {2}, {2, 1}), bias = tensor(DType::F32, {2}, {0, 1});
  HostTensor mean = tensor(DType::F32, {2}, {1, 3}), var = tensor(DType::F32, {2}, {4, 1});
  // channel 0: (x - 1) / 2 * 2 + 0; channel 1: (x - 3) / 1 * 1 + 1.
  expect_close(run1(Op::BatchNorm, {{"eps", 0.0}}, {x, scale, bias, mean, var}), {0, 1, 1, 2});
  for (DType dt : kFloatDTypes) {
    Ints shape = {2, 3, 5, 7};
    HostTensor xr = HostTensor::random(dt, shape, 1), s = HostTensor::random(dt, {3}, 2), bb = HostTensor::random(dt, {3}, 3);
    HostTensor m = HostTensor::random(dt, {3}, 4), v = HostTensor::random(dt, {3}, 5, 0.5, 2);
    std::vector<double> want;
    for (int64_t i = 0; i < xr.numel(); ++i) {
      int64_t c = coords_of(i, shape)[1];
      want.push_back((xr.get_f64(i) - m.get_f64(c)) / std::sqrt(v.get_f64(c) + 1e-5) * s.get_f64(c) + bb.get_f64(c));
    }
    expect_close(run1(Op::BatchNorm, {}, {xr, s, bb, m, v}), want, loose(dt), dtype_name(dt).data());
  }
}

namespace {
// Independent attention: scores, masking, softmax, weighted sum, all written out for [B, T, D].
std::vector<double> loop_attention(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor* mask,
                                   bool causal, double scale) {
  int64_t B = q.shape()[0], Tq = q.shape()[1], D = q.shape()[2], Tk = k.shape()[1], Dv = v.shape()[2];
  if (scale == 0) scale = 1 / std::sqrt(double(D));
  std::vector<double> out;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Tq; ++i) {
      std::vector<double> s(static_cast<size_t>(Tk));
      for (int64_t j = 0; j < Tk; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += q.get_f64((b * Tq + i) * D + d) * k.get_f64((b * Tk + j) * D + d);
        s[size_t(j)] = dot * scale;
        if (mask) {
          double m = mask->get_f64(broadcast_source(*mask, {b, i, j}));
          if (mask->dtype() == DType::Bool) s[size_t(j)] = m != 0 ? s[size_t(j)] : -INFINITY;
          else s[size_t(j)] += m;
        }
        if (causal && j - i > Tk - Tq) s[size_t(j)] = -INFINITY;
      }
      double mx = -INFINITY, sum = 0;
      for (double x : s) mx = std::max(mx, x);
      for (double x : s) sum += std::exp(x - mx);
      for (int64_t e = 0; e < Dv; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < Tk; ++j) acc += std::exp(s[size_t(j)] - mx) / sum * v.get_f64((b * Tk + j) * Dv + e);
        out.push_back(acc);
      }
    }
  return out;
}
}  // namespace

TEST(RefNorm, AttentionHandChecked) {
  // One query attending to two keys with scores 0 and log(3) (scale 1): weights 1/4, 3/4.
  HostTensor q = tensor(DType::F64, {1, 1, 1}, {1});
  HostTensor k = tensor(DType::F64, {1, 2, 1}, {0, std::log(3.0)});
  HostTensor v = tensor(DType::F64, {1, 2, 2}, {4, 8, 0, 4});
  expect_close(run1(Op::Attention, {{"scale", 1.0}}, {q, k, v}), {1, 5});
  // Causal with Tq = Tk = 2: the first query sees only the first key.
  HostTensor q2 = tensor(DType::F64, {1, 2, 1}, {0, 0});
  HostTensor v2 = tensor(DType::F64, {1, 2, 1}, {10, 20});
  expect_close(run1(Op::Attention, {{"causal", int64_t(1)}}, {q2, tensor(DType::F64, {1, 2, 1}, {0, 0}), v2}), {10, 15});
  // A bool mask that hides every key of row 0 gives NaN there (documented choice).
  HostTensor mask = tensor(DType::Bool, {2, 2}, {0, 0, 1, 0});
  expect_close(run1(Op::Attention, {}, {q2, tensor(DType::F64, {1, 2, 1}, {0, 0}), v2, mask}), {kNaN, 10});
}

TEST(RefNorm, AttentionRandomMasksCausalAndScale) {
  struct Case { int64_t B, Tq, Tk, D, Dv; bool causal; int mask_kind; double scale; };  // mask 0 none, 1 bool, 2 float
  std::vector<Case> cases = {
      {2, 7, 7, 8, 8, false, 0, 0},   {1, 5, 13, 3, 7, true, 0, 0},  {3, 1, 9, 5, 2, true, 0, 0.5},
      {2, 7, 7, 4, 4, true, 1, 0},    {1, 6, 11, 8, 5, false, 2, 0}, {1, 13, 13, 1, 1, false, 1, 2.0},
  };
  uint64_t seed = 60;
  for (DType dt : kFloatDTypes)
    for (const Case& c : cases) {
      HostTensor q = HostTensor::random(dt, {c.B, c.Tq, c.D}, seed++), k = HostTensor::random(dt, {c.B, c.Tk, c.D}, seed++);
      HostTensor v = HostTensor::random(dt, {c.B, c.Tk, c.Dv}, seed++);
      HostTensor mask;
      std::vector<HostTensor> in = {q, k, v};
      if (c.mask_kind == 1) {
        mask = HostTensor::random(DType::Bool, {c.Tq, c.Tk}, seed++);
        for (int64_t i = 0; i < c.Tq; ++i) mask.set_i64(i * c.Tk, 1);  // keep key 0 so no row is fully masked
        in.push_back(mask);
      } else if (c.mask_kind == 2) {
        mask = HostTensor::random(dt, {c.B, 1, c.Tk}, seed++, -2, 0);
        in.push_back(mask);
      }
      Attrs attrs{{"causal", int64_t(c.causal)}, {"scale", c.scale}};
      std::vector<double> want = loop_attention(q, k, v, c.mask_kind ? &mask : nullptr, c.causal, c.scale);
      expect_close(run1(Op::Attention, attrs, in), want, loose(dt, 8),
                   str(dtype_name(dt), " Tq ", c.Tq, " Tk ", c.Tk, " causal ", c.causal, " mask ", c.mask_kind));
    }
}

TEST(RefNorm, AttentionWithHeadsBroadcastsMask) {
  // [B, H, T, D] with a [T, T] additive mask and a [B, 1, 1, T] bool mask.
  HostTensor q = HostTensor::random(DType::F32, {2, 3, 5, 4}, 1), k = HostTensor::random(DType::F32, {2, 3, 5, 4}, 2);
  HostTensor v = HostTensor::random(DType::F32, {2, 3, 5, 4}, 3);
  HostTensor keep = HostTensor::random(DType::Bool, {2, 1, 1, 5}, 4);
  keep.set_i64(0, 1);
  keep.set_i64(5, 1);
  HostTensor out = run1(Op::Attention, {}, {q, k, v, keep});
  // Flatten heads into the batch and reuse the 3-D loop with a per-(b*h) mask.
  std::vector<double> want;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 3; ++h) {
      auto slice = [&](const HostTensor& t) {
        std::vector<double> vals(20);
        for (int i = 0; i < 20; ++i) vals[size_t(i)] = t.get_f64((b * 3 + h) * 20 + i);
        return tensor(DType::F32, {1, 5, 4}, vals);
      };
      std::vector<double> m(5);
      for (int j = 0; j < 5; ++j) m[size_t(j)] = double(keep.get_i64(b * 5 + j));
      HostTensor mb = tensor(DType::Bool, {1, 1, 5}, m);
      auto part = loop_attention(slice(q), slice(k), slice(v), &mb, false, 0);
      want.insert(want.end(), part.begin(), part.end());
    }
  expect_close(out, want, loose(DType::F32, 8));
}
