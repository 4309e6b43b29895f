// Reduction reference kernels: literal examples (keepdim, negative axes, NaN, empty axes, first
// occurrence in argmax) and random inputs against nested float64 loops in every claimed dtype.
#include <gtest/gtest.h>

#include <array>
#include <limits>

#include "interp_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();
Attrs axes_attr(std::vector<int64_t> axes, int64_t keepdim = 0) {
  return Attrs{{"axes", std::move(axes)}, {"keepdim", keepdim}};
}
}  // namespace

TEST(RefReduce, HandCheckedSumsMeansMaxMinProd) {
  // [[1, 2, 3], [4, 5, 6]]
  HostTensor x = tensor(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  expect_close(run1(Op::ReduceSum, axes_attr({1}), {x}), {6, 15});
  expect_close(run1(Op::ReduceSum, axes_attr({0}), {x}), {5, 7, 9});
  expect_close(run1(Op::ReduceSum, {}, {x}), {21});
  expect_close(run1(Op::ReduceMean, axes_attr({-1}), {x}), {2, 5});
  expect_close(run1(Op::ReduceMax, axes_attr({0}), {x}), {4, 5, 6});
  expect_close(run1(Op::ReduceMin, axes_attr({1}), {x}), {1, 4});
  expect_close(run1(Op::ReduceProd, axes_attr({1}), {x}), {6, 120});
  HostTensor kept = run1(Op::ReduceSum, axes_attr({1}, 1), {x});
  EXPECT_EQ(kept.shape(), (std::vector<int64_t>{2, 1}));
  HostTensor all_kept = run1(Op::ReduceMax, axes_attr({}, 1), {x});
  EXPECT_EQ(all_kept.shape(), (std::vector<int64_t>{1, 1}));
  expect_close(all_kept, {6});
}

TEST(RefReduce, IntegerReductionsStayExact) {
  HostTensor x = tensor(DType::I64, {3}, {int64_t(1) << 53, 1, 1});  // not exact in double
  HostTensor s = run1(Op::ReduceSum, {}, {x});
  EXPECT_EQ(s.get_i64(0), (int64_t(1) << 53) + 2);
  expect_ints(run1(Op::ReduceMax, {}, {tensor(DType::I8, {4}, {-5, 3, -128, 2})}), {3});
  expect_ints(run1(Op::ReduceMin, {}, {tensor(DType::U8, {3}, {9, 200, 4})}), {4});
  expect_ints(run1(Op::ReduceProd, {}, {tensor(DType::I32, {4}, {-2, 3, 1, 5})}), {-30});
}

TEST(RefReduce, MaxAndMinPropagateNaN) {
  HostTensor x = tensor(DType::F32, {2, 3}, {1, kNaN, 3, 4, 5, 6});
  expect_close(run1(Op::ReduceMax, axes_attr({1}), {x}), {kNaN, 6});
  expect_close(run1(Op::ReduceMin, axes_attr({1}), {x}), {kNaN, 4});
  expect_close(run1(Op::ReduceSum, axes_attr({1}), {x}), {kNaN, 15});
}

TEST(RefReduce, EmptyReductionsGiveIdentities) {
  HostTensor x = HostTensor::zeros(DType::F32, {2, 0});
  expect_close(run1(Op::ReduceSum, axes_attr({1}), {x}), {0, 0});
  expect_close(run1(Op::ReduceProd, axes_attr({1}), {x}), {1, 1});
  expect_close(run1(Op::ReduceMax, axes_attr({1}), {x}), {-kInf, -kInf});
  expect_close(run1(Op::ReduceMin, axes_attr({1}), {x}), {kInf, kInf});
  expect_close(run1(Op::ReduceMean, axes_attr({1}), {x}), {kNaN, kNaN});  // 0/0
}

TEST(RefReduce, ArgMaxArgMinTakeFirstOccurrenceAndTreatNaNAsExtreme) {
  HostTensor x = tensor(DType::F32, {2, 4}, {3, 7, 7, 1, 2, 2, 9, 2});
  expect_ints(run1(Op::ArgMax, {{"axis", int64_t(1)}}, {x}), {1, 2});
  expect_ints(run1(Op::ArgMin, {{"axis", int64_t(-1)}}, {x}), {3, 0});
  expect_ints(run1(Op::ArgMax, {{"axis", int64_t(0)}}, {x}), {0, 0, 1, 1});
  HostTensor kept = run1(Op::ArgMax, {{"axis", int64_t(1)}, {"keepdim", int64_t(1)}}, {x});
  EXPECT_EQ(kept.shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(kept.dtype(), DType::I64);
  HostTensor nan = tensor(DType::F64, {5}, {1, kNaN, 5, kNaN, 0});
  expect_ints(run1(Op::ArgMax, {}, {nan}), {1});
  expect_ints(run1(Op::ArgMin, {}, {nan}), {1});
  expect_ints(run1(Op::ArgMax, {}, {tensor(DType::I16, {4}, {-3, 8, 8, -9})}), {1});
}

namespace {
// Reduces x (shape [A, B, C]) over the axes set in `mask` with an independent triple loop.
std::vector<double> loop_reduce(const HostTensor& x, std::array<bool, 3> mask, Op op) {
  const auto& s = x.shape();
  int64_t oa = mask[0] ? 1 : s[0], ob = mask[1] ? 1 : s[1], oc = mask[2] ? 1 : s[2];
  double init = op == Op::ReduceMax ? -INFINITY : op == Op::ReduceMin ? INFINITY : op == Op::ReduceProd ? 1 : 0;
  std::vector<double> acc(size_t(oa * ob * oc), init);
  for (int64_t i = 0; i < s[0]; ++i)
    for (int64_t j = 0; j < s[1]; ++j)
      for (int64_t k = 0; k < s[2]; ++k) {
        double v = x.get_f64((i * s[1] + j) * s[2] + k);
        double& r = acc[size_t(((mask[0] ? 0 : i) * ob + (mask[1] ? 0 : j)) * oc + (mask[2] ? 0 : k))];
        if (op == Op::ReduceSum || op == Op::ReduceMean) r += v;
        if (op == Op::ReduceProd) r *= v;
        if (op == Op::ReduceMax) r = std::max(r, v);
        if (op == Op::ReduceMin) r = std::min(r, v);
      }
  if (op == Op::ReduceMean) {
    double n = double((mask[0] ? s[0] : 1) * (mask[1] ? s[1] : 1) * (mask[2] ? s[2] : 1));
    for (double& r : acc) r /= n;
  }
  return acc;
}
}  // namespace

TEST(RefReduce, RandomReductionsMatchLoopsInEveryDtype) {
  std::vector<std::pair<std::vector<int64_t>, std::array<bool, 3>>> axis_sets = {
      {{0}, {true, false, false}}, {{1}, {false, true, false}}, {{-1}, {false, false, true}},
      {{0, 2}, {true, false, true}}, {{}, {true, true, true}}};
  std::vector<DType> dtypes = kFloatDTypes;
  dtypes.insert(dtypes.end(), kIntDTypes.begin(), kIntDTypes.end());
  uint64_t seed = 7;
  for (Op op : {Op::ReduceSum, Op::ReduceMean, Op::ReduceMax, Op::ReduceMin, Op::ReduceProd})
    for (DType dt : dtypes) {
      if (op == Op::ReduceMean && !is_float(dt)) continue;
      for (const auto& shape : std::vector<std::vector<int64_t>>{{7, 5, 13}, {1, 3, 1}, {2, 1, 9}})
        for (const auto& [axes, mask] : axis_sets)
          for (int64_t keepdim : {0, 1}) {
            // Products of many values blow up; keep them near 1 (ints in -1..1).
            bool prod = op == Op::ReduceProd;
            double lo = prod ? (is_float(dt) ? 0.8 : (dt == DType::U8 ? 0 : -1)) : (dt == DType::U8 ? 0 : -4);
            double hi = prod ? (is_float(dt) ? 1.2 : 1) : 4;
            HostTensor x = HostTensor::random(dt, shape, seed++, lo, hi);
            HostTensor out = run1(op, axes_attr(axes, keepdim), {x});
            std::vector<int64_t> want_shape;
            for (int d = 0; d < 3; ++d)
              if (!mask[size_t(d)]) want_shape.push_back(shape[size_t(d)]);
              else if (keepdim) want_shape.push_back(1);
            ASSERT_EQ(out.shape(), want_shape);
            std::vector<double> want = loop_reduce(x, mask, op);
            std::string what = str(op_name(op), " ", label(dt, shape), " axes ", dims_to_string(axes), " keepdim ", keepdim);
            if (is_float(dt)) {
              expect_close(out, want, kiln::testing::scaled(rounding_tolerance(dt), 2), what);
            } else {
              std::vector<int64_t> wi;  // exact in double at these sizes, then wrapped like the dtype
              for (double w : want) wi.push_back(wrap_to(dt, int64_t(w)));
              expect_ints(out, wi, what);
            }
          }
    }
}

TEST(RefReduce, RandomArgReductionsMatchLoops) {
  uint64_t seed = 70;
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32, DType::U8})
    for (int64_t axis : {0, 1, 2, -1}) {
      // A narrow integer range makes ties (first occurrence) common.
      HostTensor x = HostTensor::random(dt, {5, 7, 3}, seed++, 0, 3);
      if (is_float(dt)) x = run1(Op::Floor, {}, {x});
      int ax = int(axis < 0 ? axis + 3 : axis);
      std::vector<int64_t> want_max, want_min;
      std::vector<int64_t> s = x.shape(), out_shape;
      for (int d = 0; d < 3; ++d)
        if (d != ax) out_shape.push_back(s[size_t(d)]);
      for (int64_t o = 0; o < numel_of(out_shape); ++o) {
        auto oc = coords_of(o, out_shape);
        int64_t best_max = 0, best_min = 0;
        double vmax = 0, vmin = 0;
        for (int64_t k = 0; k < s[size_t(ax)]; ++k) {
          std::vector<int64_t> c = oc;
          c.insert(c.begin() + ax, k);
          double v = x.get_f64((c[0] * s[1] + c[1]) * s[2] + c[2]);
          if (k == 0 || v > vmax) { vmax = v; best_max = k; }
          if (k == 0 || v < vmin) { vmin = v; best_min = k; }
        }
        want_max.push_back(best_max);
        want_min.push_back(best_min);
      }
      std::string what = str(label(dt, s), " axis ", axis);
      expect_ints(run1(Op::ArgMax, {{"axis", axis}}, {x}), want_max, "argmax " + what);
      expect_ints(run1(Op::ArgMin, {{"axis", axis}}, {x}), want_min, "argmin " + what);
    }
}
