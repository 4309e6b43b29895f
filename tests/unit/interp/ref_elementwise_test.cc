// Elementwise reference kernels: hand-checked literals for the tricky semantics (integer division,
// Python mod, rounding, NaN propagation, casts), then random inputs in every claimed dtype against a
// float64 loop written here, over odd sizes and broadcasting patterns.
#include <gtest/gtest.h>

#include <limits>

#include "interp_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();
const std::vector<std::vector<int64_t>> kOddShapes = {{1}, {7}, {13, 3}, {2, 5, 9}, {}};
}  // namespace

// ---- hand-checked ----

TEST(RefElementwise, IntegerDivisionTruncatesTowardZero) {
  for (DType dt : {DType::I8, DType::I32, DType::I64}) {
    HostTensor a = tensor(dt, {4}, {7, -7, 7, -7}), b = tensor(dt, {4}, {2, 2, -2, -2});
    expect_ints(run1(Op::Div, {}, {a, b}), {3, -3, -3, 3}, label(dt, {4}));
  }
  expect_ints(run1(Op::Div, {}, {tensor(DType::U8, {2}, {200, 7}), tensor(DType::U8, {2}, {3, 7})}), {66, 1});
}

TEST(RefElementwise, IntegerDivisionAndModByZeroThrow) {
  HostTensor a = tensor(DType::I32, {2}, {1, 2}), zero = tensor(DType::I32, {1}, {0});
  EXPECT_ERROR_CONTAINS(run1(Op::Div, {}, {a, zero}), "integer division by zero");
  EXPECT_ERROR_CONTAINS(run1(Op::Mod, {}, {a, zero}), "integer modulo by zero");
  // Floats follow IEEE: x/0 is inf, 0/0 NaN, fmod by 0 NaN.
  HostTensor f = run1(Op::Div, {}, {tensor(DType::F32, {3}, {1, -1, 0}), tensor(DType::F32, {1}, {0})});
  expect_close(f, {kInf, -kInf, kNaN});
  expect_close(run1(Op::Mod, {}, {tensor(DType::F32, {1}, {1}), tensor(DType::F32, {1}, {0})}), {kNaN});
}

TEST(RefElementwise, ModIsPythonStyleAndFmodIsCStyle) {
  HostTensor a = tensor(DType::I32, {4}, {7, -7, 7, -7}), b = tensor(DType::I32, {4}, {3, 3, -3, -3});
  expect_ints(run1(Op::Mod, {}, {a, b}), {1, 2, -2, -1});
  expect_ints(run1(Op::Mod, {{"fmod", int64_t(1)}}, {a, b}), {1, -1, 1, -1});
  HostTensor fa = tensor(DType::F64, {4}, {7.5, -7.5, 7.5, -7.5}), fb = tensor(DType::F64, {4}, {2, 2, -2, -2});
  expect_close(run1(Op::Mod, {}, {fa, fb}), {1.5, 0.5, -0.5, -1.5});
  expect_close(run1(Op::Mod, {{"fmod", int64_t(1)}}, {fa, fb}), {1.5, -1.5, 1.5, -1.5});
  // An exact multiple gives zero with the divisor's sign.
  HostTensor z = run1(Op::Mod, {}, {tensor(DType::F64, {1}, {4}), tensor(DType::F64, {1}, {-2})});
  EXPECT_TRUE(std::signbit(z.get_f64(0)));
}

TEST(RefElementwise, RoundIsHalfToEven) {
  HostTensor x = tensor(DType::F32, {8}, {0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6, 3.5});
  expect_close(run1(Op::Round, {}, {x}), {0, 2, 2, -0.0, -2, 2, -3, 4});
  expect_close(run1(Op::Floor, {}, {x}), {0, 1, 2, -1, -2, 2, -3, 3});
  expect_close(run1(Op::Ceil, {}, {x}), {1, 2, 3, -0.0, -1, 3, -2, 4});
}

TEST(RefElementwise, MaxMinPropagateNaN) {
  HostTensor a = tensor(DType::F32, {3}, {1, kNaN, 3}), b = tensor(DType::F32, {3}, {kNaN, 2, 1});
  expect_close(run1(Op::Maximum, {}, {a, b}), {kNaN, kNaN, 3});
  expect_close(run1(Op::Minimum, {}, {a, b}), {kNaN, kNaN, 1});
  expect_close(run1(Op::Relu, {}, {tensor(DType::F32, {3}, {-1, kNaN, 2})}), {0, kNaN, 2});
}

TEST(RefElementwise, ClampFloatAndInt) {
  HostTensor x = tensor(DType::F32, {5}, {-3, -1, 0.5, 2, kNaN});
  expect_close(run1(Op::Clamp, {{"min", -1.0}, {"max", 1.0}}, {x}), {-1, -1, 0.5, 1, kNaN});
  expect_close(run1(Op::Clamp, {{"min", 0.0}}, {x}), {0, 0, 0.5, 2, kNaN});
  // Integer bounds are ceil(min) and floor(max).
  HostTensor xi = tensor(DType::I32, {5}, {-3, -1, 0, 2, 5});
  expect_ints(run1(Op::Clamp, {{"min", -1.5}, {"max", 2.5}}, {xi}), {-1, -1, 0, 2, 2});
}

TEST(RefElementwise, CastTruncatesAndSaturates) {
  HostTensor x = tensor(DType::F32, {6}, {2.7, -2.7, 300, -300, kNaN, 0.2});
  expect_ints(run1(Op::Cast, {{"dtype", DType::I8}}, {x}), {2, -2, 127, -128, 0, 0});
  expect_ints(run1(Op::Cast, {{"dtype", DType::U8}}, {x}), {2, 0, 255, 0, 0, 0});
  expect_ints(run1(Op::Cast, {{"dtype", DType::Bool}}, {x}), {1, 1, 1, 1, 1, 1});
  expect_ints(run1(Op::Cast, {{"dtype", DType::I8}}, {tensor(DType::I32, {2}, {300, -129})}), {44, 127});
  HostTensor h = run1(Op::Cast, {{"dtype", DType::F16}}, {tensor(DType::F64, {2}, {1.0 + 1.0 / 4096, 65520})});
  expect_close(h, {1.0, kInf});  // rounds to nearest even; 65520 overflows f16
  expect_close(run1(Op::Cast, {{"dtype", DType::F32}}, {tensor(DType::Bool, {2}, {1, 0})}), {1, 0});
}

TEST(RefElementwise, NarrowFloatRoundingCarriesIntoTheNextBinade) {
  // 1.99951171875 is the largest f16 below 2; halfway to 2 and beyond must round to 2, not 4.
  HostTensor h = run1(Op::Add, {}, {tensor(DType::F16, {2}, {0.999512, 1.0}), tensor(DType::F16, {1}, {1.0})});
  expect_close(h, {2.0, 2.0}, Tolerance{});
  HostTensor b = run1(Op::Cast, {{"dtype", DType::BF16}}, {tensor(DType::F64, {2}, {1.999, 255.9})});
  expect_close(b, {2.0, 256.0}, Tolerance{});
}

TEST(RefElementwise, GeluBothFormsAtKnownPoints) {
  HostTensor x = tensor(DType::F64, {3}, {-1, 0, 1});
  // 0.5*x*(1+erf(x/sqrt2)) at 1 = 0.8413447460685429; odd symmetry part gives -0.15865525393145707.
  expect_close(run1(Op::Gelu, {}, {x}), {-0.15865525393145707, 0, 0.8413447460685429});
  expect_close(run1(Op::Gelu, {{"approximate", std::string("tanh")}}, {x}),
               {-0.15880800939172324, 0, 0.8411919906082768});
  expect_close(run1(Op::Silu, {}, {x}), {-0.2689414213699951, 0, 0.7310585786300049});
  expect_close(run1(Op::Sigmoid, {}, {x}), {0.2689414213699951, 0.5, 0.7310585786300049});
}

TEST(RefElementwise, SignNotIsNanAndLogical) {
  expect_close(run1(Op::Sign, {}, {tensor(DType::F32, {4}, {-2, 0, 3, kNaN})}), {-1, 0, 1, kNaN});
  expect_ints(run1(Op::Sign, {}, {tensor(DType::I16, {3}, {-9, 0, 4})}), {-1, 0, 1});
  expect_ints(run1(Op::IsNan, {}, {tensor(DType::BF16, {3}, {kNaN, kInf, 1})}), {1, 0, 0});
  HostTensor p = tensor(DType::Bool, {4}, {0, 0, 1, 1}), q = tensor(DType::Bool, {4}, {0, 1, 0, 1});
  expect_ints(run1(Op::Not, {}, {p}), {1, 1, 0, 0});
  expect_ints(run1(Op::And, {}, {p, q}), {0, 0, 0, 1});
  expect_ints(run1(Op::Or, {}, {p, q}), {0, 1, 1, 1});
  expect_ints(run1(Op::Xor, {}, {p, q}), {0, 1, 1, 0});
}

TEST(RefElementwise, IntegerArithmeticWrapsLikeTheDtype) {
  expect_ints(run1(Op::Add, {}, {tensor(DType::I8, {1}, {127}), tensor(DType::I8, {1}, {1})}), {-128});
  expect_ints(run1(Op::Mul, {}, {tensor(DType::U8, {1}, {16}), tensor(DType::U8, {1}, {17})}), {16});
  expect_ints(run1(Op::Neg, {}, {tensor(DType::I8, {1}, {-128})}), {-128});
  expect_ints(run1(Op::Pow, {}, {tensor(DType::I32, {4}, {3, 2, -1, 2}), tensor(DType::I32, {4}, {4, 0, 3, -1})}),
              {81, 1, -1, 0});
  EXPECT_ERROR_CONTAINS(run1(Op::Pow, {}, {tensor(DType::I32, {1}, {0}), tensor(DType::I32, {1}, {-1})}),
                        "division by zero");
}

TEST(RefElementwise, WhereBroadcastsThreeWays) {
  HostTensor cond = tensor(DType::Bool, {2, 1}, {1, 0});
  HostTensor a = tensor(DType::I64, {1, 3}, {1, 2, 3}), b = tensor(DType::I64, {}, {-5});
  HostTensor out = run1(Op::Where, {}, {cond, a, b});
  EXPECT_EQ(out.shape(), (std::vector<int64_t>{2, 3}));
  expect_ints(out, {1, 2, 3, -5, -5, -5});
}

TEST(RefElementwise, ComparisonsTreatNaNAsUnordered) {
  HostTensor a = tensor(DType::F32, {3}, {1, kNaN, 2}), b = tensor(DType::F32, {3}, {1, kNaN, 3});
  expect_ints(run1(Op::Eq, {}, {a, b}), {1, 0, 0});
  expect_ints(run1(Op::Ne, {}, {a, b}), {0, 1, 1});
  expect_ints(run1(Op::Lt, {}, {a, b}), {0, 0, 1});
  expect_ints(run1(Op::Ge, {}, {a, b}), {1, 0, 0});
}

// ---- random inputs against float64 loops ----

namespace {

struct UnaryCase {
  Op op;
  std::function<double(double)> f;
  double lo, hi;  // input range where the op is defined
};

std::vector<UnaryCase> float_unary_cases() {
  return {
      {Op::Neg, [](double x) { return -x; }, -3, 3},
      {Op::Abs, [](double x) { return std::fabs(x); }, -3, 3},
      {Op::Exp, [](double x) { return std::exp(x); }, -3, 3},
      {Op::Log, [](double x) { return std::log(x); }, 0.01, 5},
      {Op::Sqrt, [](double x) { return std::sqrt(x); }, 0, 5},
      {Op::Rsqrt, [](double x) { return 1 / std::sqrt(x); }, 0.01, 5},
      {Op::Reciprocal, [](double x) { return 1 / x; }, 0.1, 5},
      {Op::Tanh, [](double x) { return std::tanh(x); }, -3, 3},
      {Op::Sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, -6, 6},
      {Op::Erf, [](double x) { return std::erf(x); }, -3, 3},
      {Op::Relu, [](double x) { return x > 0 ? x : 0; }, -3, 3},
      {Op::Silu, [](double x) { return x / (1 + std::exp(-x)); }, -6, 6},
      {Op::Gelu, [](double x) { return x * 0.5 * std::erfc(-x / std::sqrt(2.0)); }, -4, 4},
      {Op::Sin, [](double x) { return std::sin(x); }, -4, 4},
      {Op::Cos, [](double x) { return std::cos(x); }, -4, 4},
      {Op::Floor, [](double x) { return std::floor(x); }, -9, 9},
      {Op::Ceil, [](double x) { return std::ceil(x); }, -9, 9},
      {Op::Round, [](double x) { return std::nearbyint(x); }, -9, 9},
      {Op::Sign, [](double x) { return double((x > 0) - (x < 0)); }, -3, 3},
  };
}

}  // namespace

TEST(RefElementwise, FloatUnaryOpsMatchFloat64LoopsInEveryFloatDtype) {
  uint64_t seed = 1;
  for (const UnaryCase& c : float_unary_cases())
    for (DType dt : kFloatDTypes)
      for (const auto& shape : kOddShapes) {
        HostTensor x = HostTensor::random(dt, shape, seed++, c.lo, c.hi);
        std::vector<double> want;
        for (int64_t i = 0; i < x.numel(); ++i) want.push_back(c.f(x.get_f64(i)));
        // Gelu via erfc differs from erf in the last bits: allow a few ulps in f64.
        expect_close(run1(c.op, {}, {x}), want, kiln::testing::scaled(rounding_tolerance(dt), 4),
                     str(op_name(c.op), " ", label(dt, shape)));
      }
}

TEST(RefElementwise, NumericUnaryOpsOnIntegers) {
  uint64_t seed = 100;
  for (DType dt : kIntDTypes)
    for (const auto& shape : kOddShapes) {
      bool is_unsigned = dt == DType::U8;
      HostTensor x = HostTensor::random(dt, shape, seed++, is_unsigned ? 0 : -50, 50);
      std::vector<int64_t> neg, abs, relu, sign;
      for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t v = x.get_i64(i);
        neg.push_back(is_unsigned ? (256 - v) % 256 : -v);
        abs.push_back(v < 0 ? -v : v);
        relu.push_back(v > 0 ? v : 0);
        sign.push_back(v > 0 ? 1 : (v < 0 ? -1 : 0));
      }
      std::string what = label(dt, shape);
      expect_ints(run1(Op::Neg, {}, {x}), neg, what);
      expect_ints(run1(Op::Abs, {}, {x}), abs, what);
      expect_ints(run1(Op::Relu, {}, {x}), relu, what);
      expect_ints(run1(Op::Sign, {}, {x}), sign, what);
    }
}

namespace {

struct BroadcastPattern {
  std::vector<int64_t> a, b;
};
const std::vector<BroadcastPattern> kBroadcasts = {
    {{7}, {7}},        {{13, 3}, {3}},       {{1}, {5, 11}},    {{7, 1, 13}, {1, 5, 13}},
    {{}, {2, 3}},      {{2, 5, 9}, {5, 1}},  {{1, 1}, {1, 1}},  {{3, 1, 1, 2}, {4, 1}},
};

std::vector<int64_t> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

struct BinaryCase {
  Op op;
  std::function<double(double, double)> f;
  double lo, hi;  // operand range
};

}  // namespace

TEST(RefElementwise, FloatBinaryOpsBroadcastAndMatchFloat64Loops) {
  std::vector<BinaryCase> cases = {
      {Op::Add, [](double x, double y) { return x + y; }, -3, 3},
      {Op::Sub, [](double x, double y) { return x - y; }, -3, 3},
      {Op::Mul, [](double x, double y) { return x * y; }, -3, 3},
      {Op::Div, [](double x, double y) { return x / y; }, 0.5, 3},
      {Op::Pow, [](double x, double y) { return std::exp(y * std::log(x)); }, 0.5, 3},
      {Op::Maximum, [](double x, double y) { return x > y ? x : y; }, -3, 3},
      {Op::Minimum, [](double x, double y) { return x < y ? x : y; }, -3, 3},
      {Op::Mod, [](double x, double y) { return x - y * std::floor(x / y); }, -3, 3},
  };
  uint64_t seed = 500;
  for (const BinaryCase& c : cases)
    for (DType dt : kFloatDTypes)
      for (const auto& p : kBroadcasts) {
        HostTensor a = HostTensor::random(dt, p.a, seed++, c.lo, c.hi);
        HostTensor b = HostTensor::random(dt, p.b, seed++, c.lo, c.hi);
        std::vector<int64_t> out_shape = broadcast_shape(p.a, p.b);
        HostTensor out = run1(c.op, {}, {a, b});
        ASSERT_EQ(out.shape(), out_shape);
        std::vector<double> want;
        for (int64_t i = 0; i < numel_of(out_shape); ++i) {
          auto co = coords_of(i, out_shape);
          want.push_back(c.f(a.get_f64(broadcast_source(a, co)), b.get_f64(broadcast_source(b, co))));
        }
        Tolerance tol = rounding_tolerance(dt);
        if (c.op == Op::Pow || c.op == Op::Mod) tol = kiln::testing::scaled(tol, 16);  // formula differs
        expect_close(out, want, tol, str(op_name(c.op), " ", label(dt, p.a), " ", label(dt, p.b)));
      }
}

TEST(RefElementwise, IntegerBinaryOpsBroadcastAndMatchInt64Loops) {
  uint64_t seed = 900;
  for (DType dt : kIntDTypes)
    for (const auto& p : kBroadcasts) {
      bool is_unsigned = dt == DType::U8;
      HostTensor a = HostTensor::random(dt, p.a, seed++, is_unsigned ? 0 : -9, 9);
      HostTensor b = HostTensor::random(dt, p.b, seed++, 1, 9);  // nonzero divisors
      std::vector<int64_t> out_shape = broadcast_shape(p.a, p.b);
      std::vector<int64_t> add, sub, mul, div, mod, mx, lt;
      for (int64_t i = 0; i < numel_of(out_shape); ++i) {
        auto co = coords_of(i, out_shape);
        int64_t x = a.get_i64(broadcast_source(a, co)), y = b.get_i64(broadcast_source(b, co));
        add.push_back(x + y);
        sub.push_back(is_unsigned ? ((x - y) % 256 + 256) % 256 : x - y);
        mul.push_back(x * y);
        div.push_back(x / y);  // C++ truncates toward zero
        int64_t m = x % y;
        mod.push_back(m < 0 ? m + y : m);  // y > 0 here
        mx.push_back(std::max(x, y));
        lt.push_back(x < y);
      }
      std::string what = label(dt, p.a) + " " + label(dt, p.b);
      expect_ints(run1(Op::Add, {}, {a, b}), add, "add " + what);
      expect_ints(run1(Op::Sub, {}, {a, b}), sub, "sub " + what);
      expect_ints(run1(Op::Mul, {}, {a, b}), mul, "mul " + what);
      expect_ints(run1(Op::Div, {}, {a, b}), div, "div " + what);
      expect_ints(run1(Op::Mod, {}, {a, b}), mod, "mod " + what);
      expect_ints(run1(Op::Maximum, {}, {a, b}), mx, "max " + what);
      expect_ints(run1(Op::Lt, {}, {a, b}), lt, "lt " + what);
    }
}

TEST(RefElementwise, ComparisonsInEveryDtypeAgainstLoops) {
  std::vector<DType> all = kFloatDTypes;
  all.insert(all.end(), kIntDTypes.begin(), kIntDTypes.end());
  all.push_back(DType::Bool);
  std::vector<std::pair<Op, std::function<bool(double, double)>>> cmps = {
      {Op::Eq, [](double x, double y) { return x == y; }}, {Op::Ne, [](double x, double y) { return x != y; }},
      {Op::Lt, [](double x, double y) { return x < y; }},  {Op::Le, [](double x, double y) { return x <= y; }},
      {Op::Gt, [](double x, double y) { return x > y; }},  {Op::Ge, [](double x, double y) { return x >= y; }}};
  uint64_t seed = 1300;
  for (DType dt : all) {
    // Small integer-valued inputs make equality common.
    HostTensor a = HostTensor::random(dt, {7, 1, 13}, seed++, 0, 3);
    HostTensor b = HostTensor::random(dt, {5, 13}, seed++, 0, 3);
    if (is_float(dt)) {
      a = run1(Op::Floor, {}, {a});
      b = run1(Op::Floor, {}, {b});
    }
    std::vector<int64_t> out_shape = {7, 5, 13};
    for (const auto& [op, f] : cmps) {
      std::vector<int64_t> want;
      for (int64_t i = 0; i < numel_of(out_shape); ++i) {
        auto co = coords_of(i, out_shape);
        want.push_back(f(a.get_f64(broadcast_source(a, co)), b.get_f64(broadcast_source(b, co))));
      }
      expect_ints(run1(op, {}, {a, b}), want, str(op_name(op), " ", dtype_name(dt)));
    }
  }
}

TEST(RefElementwise, CastBetweenEveryPairOfDtypes) {
  std::vector<DType> all = kFloatDTypes;
  all.insert(all.end(), kIntDTypes.begin(), kIntDTypes.end());
  all.push_back(DType::Bool);
  for (DType from : all) {
    // Values every dtype can hold exactly (bool aside): 0, 1, 2, 5, 100.
    std::vector<double> values = from == DType::Bool ? std::vector<double>{0, 1} : std::vector<double>{0, 1, 2, 5, 100};
    HostTensor x = tensor(from, {int64_t(values.size())}, values);
    for (DType to : all) {
      HostTensor y = run1(Op::Cast, {{"dtype", to}}, {x});
      ASSERT_EQ(y.dtype(), to);
      std::vector<double> want;
      for (double v : values) want.push_back(to == DType::Bool ? double(v != 0) : v);
      expect_close(y, want, str(dtype_name(from), "->", dtype_name(to)));
    }
  }
}
