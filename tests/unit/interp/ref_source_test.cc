// Source ops and shape_of: constants, arange, full, the counter-based random ops (checked against
// kiln/random.h directly and against their distributions), and shape_of with bound symbols.
#include <gtest/gtest.h>

#include "interp_test_util.h"
#include "kiln/random.h"

using namespace kiln;
using namespace kiln::test;

namespace {
using Ints = std::vector<int64_t>;
}

TEST(RefSource, ConstantCopiesItsTensorBitExactly) {
  for (DType dt : {DType::F16, DType::BF16, DType::I8, DType::Bool, DType::F64}) {
    HostTensor value = HostTensor::random(dt, {3, 5}, 9);
    HostTensor out = run1(Op::Constant, {{"value", value}}, {});
    EXPECT_TRUE(out.bit_equal(value)) << dtype_name(dt);
  }
}

TEST(RefSource, ArangeAndFull) {
  expect_ints(run1(Op::Arange, {{"size", Shape{5}}}, {}), {0, 1, 2, 3, 4});
  expect_close(run1(Op::Arange, {{"size", Shape{4}}, {"start", 1.5}, {"step", -0.5}, {"dtype", DType::F32}}, {}),
               {1.5, 1.0, 0.5, 0.0});
  expect_ints(run1(Op::Arange, {{"size", Shape{3}}, {"start", 0.5}, {"step", 1.0}, {"dtype", DType::I32}}, {}),
              {0, 1, 2});  // 0.5, 1.5, 2.5 truncate toward zero
  EXPECT_EQ(run1(Op::Arange, {{"size", Shape{0}}}, {}).numel(), 0);
  HostTensor f = run1(Op::Full, {{"shape", Shape{2, 3}}, {"value", 2.5}, {"dtype", DType::BF16}}, {});
  EXPECT_EQ(f.shape(), (Ints{2, 3}));
  expect_close(f, {2.5, 2.5, 2.5, 2.5, 2.5, 2.5});
  expect_ints(run1(Op::Full, {{"shape", Shape{2}}, {"value", -3.0}, {"dtype", DType::I64}}, {}), {-3, -3});
}

TEST(RefSource, RandomOpsFollowTheCounterBasedGenerator) {
  for (DType dt : kFloatDTypes) {
    HostTensor u = run1(Op::RandomUniform, {{"shape", Shape{7, 13}}, {"low", -2.0}, {"high", 3.0}, {"seed", int64_t(42)}, {"dtype", dt}}, {});
    std::vector<double> want;
    for (uint64_t i = 0; i < 91; ++i) want.push_back(-2.0 + 5.0 * random_uniform01(42, i));
    expect_close(u, want, Tolerance{}, dtype_name(dt).data());
    HostTensor n = run1(Op::RandomNormal, {{"shape", Shape{91}}, {"mean", 1.0}, {"std", 0.5}, {"seed", int64_t(7)}, {"dtype", dt}}, {});
    std::vector<double> want_n;
    for (uint64_t i = 0; i < 91; ++i) want_n.push_back(1.0 + 0.5 * random_normal01(7, i));
    expect_close(n, want_n, Tolerance{}, dtype_name(dt).data());
  }
  // Same seed, same tensor; another seed, another tensor.
  Attrs a{{"shape", Shape{16}}, {"seed", int64_t(1)}};
  Attrs b{{"shape", Shape{16}}, {"seed", int64_t(2)}};
  EXPECT_TRUE(run1(Op::RandomUniform, a, {}).bit_equal(run1(Op::RandomUniform, a, {})));
  EXPECT_FALSE(run1(Op::RandomUniform, a, {}).bit_equal(run1(Op::RandomUniform, b, {})));
}

TEST(RefSource, RandomDistributionsHaveTheRightMoments) {
  HostTensor u = run1(Op::RandomUniform, {{"shape", Shape{20000}}, {"seed", int64_t(3)}, {"dtype", DType::F64}}, {});
  HostTensor n = run1(Op::RandomNormal, {{"shape", Shape{20000}}, {"seed", int64_t(3)}, {"dtype", DType::F64}}, {});
  double su = 0, sn = 0, sn2 = 0, lo = 1, hi = 0;
  for (int64_t i = 0; i < 20000; ++i) {
    double x = u.get_f64(i), y = n.get_f64(i);
    su += x;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sn += y;
    sn2 += y * y;
  }
  EXPECT_NEAR(su / 20000, 0.5, 0.01);
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_NEAR(sn / 20000, 0.0, 0.03);
  EXPECT_NEAR(sn2 / 20000, 1.0, 0.04);
}

TEST(RefSource, ShapeOfAndSymbolicSourceShapes) {
  expect_ints(run1(Op::ShapeOf, {}, {HostTensor::zeros(DType::F16, {2, 7, 1})}), {2, 7, 1});
  expect_ints(run1(Op::ShapeOf, {}, {HostTensor::zeros(DType::F32, {})}), {});
  // Sources sized by a symbol bound from an input.
  Graph g;
  SymInt T = SymInt::symbol("T");
  Value* x = g.add_input("x", TensorType{DType::F32, {T, 2}, Device::CPU});
  Value* r = g.add(Op::Arange, {}, {{"size", Shape{T}}, {"dtype", DType::I64}});
  Value* f = g.add(Op::Full, {}, {{"shape", Shape{T * SymInt(2)}}, {"value", 1.0}});
  g.set_outputs({g.add(Op::ShapeOf, {x}), r, f});
  auto out = interp::run(g, {HostTensor::zeros(DType::F32, {5, 2})});
  expect_ints(out[0], {5, 2});
  expect_ints(out[1], {0, 1, 2, 3, 4});
  EXPECT_EQ(out[2].numel(), 10);
}
