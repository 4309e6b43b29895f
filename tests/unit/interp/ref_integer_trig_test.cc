// Reference kernels added for ONNX conformance: inverse/hyperbolic trig against identities that
// do not use the same libm call (sin(asin x) = x, cosh^2 - sinh^2 = 1, ...), bitwise ops and
// shifts against hand-written values per integer dtype, det against hand-expanded cofactors.
#include <gtest/gtest.h>

#include "interp_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {
using Ints = std::vector<int64_t>;

std::vector<double> values_of(const HostTensor& t) { return t.to_doubles(); }
}  // namespace

TEST(RefIntegerTrig, InverseTrigInvertsForwardTrig) {
  std::vector<double> xs = {-0.9, -0.37, 0.0, 0.21, 0.73, 0.95};
  HostTensor x = tensor(DType::F64, {6}, xs);
  auto asin_x = values_of(run1(Op::Asin, {}, {x})), acos_x = values_of(run1(Op::Acos, {}, {x}));
  auto atan_x = values_of(run1(Op::Atan, {}, {x})), atanh_x = values_of(run1(Op::Atanh, {}, {x}));
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_NEAR(std::sin(asin_x[i]), xs[i], 1e-12);
    EXPECT_NEAR(std::cos(acos_x[i]), xs[i], 1e-12);
    EXPECT_NEAR(asin_x[i] + acos_x[i], M_PI / 2, 1e-12);
    EXPECT_NEAR(std::tan(atan_x[i]), xs[i], 1e-12);
    EXPECT_NEAR(std::tanh(atanh_x[i]), xs[i], 1e-12);
  }
}

TEST(RefIntegerTrig, HyperbolicIdentities) {
  std::vector<double> xs = {-2.5, -0.3, 0.0, 0.001, 1.7, 3.0};
  HostTensor x = tensor(DType::F64, {2, 3}, xs);
  auto sh = values_of(run1(Op::Sinh, {}, {x})), ch = values_of(run1(Op::Cosh, {}, {x}));
  auto ash = values_of(run1(Op::Asinh, {}, {tensor(DType::F64, {2, 3}, sh)}));
  auto ach = values_of(run1(Op::Acosh, {}, {tensor(DType::F64, {2, 3}, ch)}));
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_NEAR(sh[i], (std::exp(xs[i]) - std::exp(-xs[i])) / 2, 1e-12 * (1 + std::fabs(sh[i])));
    EXPECT_NEAR(ch[i] * ch[i] - sh[i] * sh[i], 1.0, 1e-9);
    EXPECT_NEAR(ash[i], xs[i], 1e-12);
    EXPECT_NEAR(ach[i], std::fabs(xs[i]), 1e-6);  // acosh(cosh x) = |x|; ill-conditioned near 0
  }
  EXPECT_TRUE(std::isnan(values_of(run1(Op::Acosh, {}, {tensor(DType::F32, {1}, {0.5})}))[0]));
}

TEST(RefIntegerTrig, BitwiseOpsPerDtype) {
  std::vector<DType> ints = kIntDTypes;
  ints.push_back(DType::U16);
  ints.push_back(DType::U32);
  for (DType dt : ints) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    HostTensor a = tensor(dt, {2, 2}, {12, 10, 7, 0}), b = tensor(dt, {2}, {10, 6});
    expect_ints(run1(Op::BitAnd, {}, {a, b}), {8, 2, 2, 0});
    expect_ints(run1(Op::BitOr, {}, {a, b}), {14, 14, 15, 6});
    expect_ints(run1(Op::BitXor, {}, {a, b}), {6, 12, 13, 6});
    HostTensor n = run1(Op::BitNot, {}, {tensor(dt, {2}, {0, 5})});
    if (dt == DType::U8) expect_ints(n, {255, 250});
    else if (dt == DType::U16) expect_ints(n, {65535, 65530});
    else if (dt == DType::U32) expect_ints(n, {4294967295, 4294967290});
    else expect_ints(n, {-1, -6});
    HostTensor s = tensor(dt, {3}, {1, 2, 3});
    expect_ints(run1(Op::BitShift, {{"left", int64_t(1)}}, {tensor(dt, {3}, {16, 4, 1}), s}), {32, 16, 8});
    expect_ints(run1(Op::BitShift, {{"left", int64_t(0)}}, {tensor(dt, {3}, {16, 4, 100}), s}), {8, 1, 12});
    int64_t width = dtype_size(dt) * 8;  // shifting out every bit gives 0
    expect_ints(run1(Op::BitShift, {{"left", int64_t(1)}}, {tensor(dt, {1}, {1}), tensor(dt, {1}, {double(width)})}), {0});
  }
  // u8 shifts are logical: 200 >> 1 = 100; i8 shifts keep the sign: -8 >> 1 = -4.
  expect_ints(run1(Op::BitShift, {{"left", int64_t(0)}}, {tensor(DType::U8, {1}, {200}), tensor(DType::U8, {1}, {1})}), {100});
  expect_ints(run1(Op::BitShift, {{"left", int64_t(0)}}, {tensor(DType::I8, {1}, {-8}), tensor(DType::I8, {1}, {1})}), {-4});
  EXPECT_ERROR_CONTAINS(run1(Op::BitAnd, {}, {tensor(DType::F32, {1}, {1}), tensor(DType::F32, {1}, {1})}),
                        "integer dtype");
}

TEST(RefIntegerTrig, UnsignedDtypesWrapAndCompareAsUnsigned) {
  // u32 values above 2^31 stay positive (they would be negative as i32); sums wrap mod 2^32.
  HostTensor a = tensor(DType::U32, {3}, {4000000000.0, 7, 65535}), b = tensor(DType::U32, {3}, {500000000, 9, 1});
  expect_ints(run1(Op::Add, {}, {a, b}), {205032704, 16, 65536});
  expect_ints(run1(Op::Gt, {}, {a, b}), {1, 0, 1});
  expect_ints(run1(Op::Div, {}, {a, b}), {8, 0, 65535});
  expect_ints(run1(Op::Add, {}, {tensor(DType::U16, {1}, {65535}), tensor(DType::U16, {1}, {2})}), {1});
  expect_close(run1(Op::Cast, {{"dtype", DType::F64}}, {a}), {4000000000.0, 7, 65535});
}

TEST(RefIntegerTrig, DetMatchesCofactorExpansion) {
  // [[2, -1, 0], [1, 3, 2], [0, 1, 4]]: 2*(12-2) - (-1)*(4-0) + 0 = 24; then a row swap of it
  // (det negates) and a singular matrix.
  HostTensor m = tensor(DType::F64, {3, 3, 3}, {2, -1, 0, 1, 3, 2, 0, 1, 4,
                                                 1, 3, 2, 2, -1, 0, 0, 1, 4,
                                                 1, 2, 3, 2, 4, 6, 0, 1, 1});
  HostTensor d = run1(Op::Det, {}, {m});
  EXPECT_EQ(d.shape(), (Ints{3}));
  expect_close(d, {24, -24, 0});
  // A leading zero pivot needs pivoting: [[0, 1], [1, 0]] -> -1.
  expect_close(run1(Op::Det, {}, {tensor(DType::F32, {2, 2}, {0, 1, 1, 0})}), {-1});
  EXPECT_ERROR_CONTAINS(run1(Op::Det, {}, {tensor(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6})}), "det");
}
