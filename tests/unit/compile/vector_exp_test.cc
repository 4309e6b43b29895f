// The generated code's vectorisable exp (kiln_exp in src/codegen/common/c_prelude.cc) against
// std::exp: ulp error over a wide sweep of floats, the special inputs (-inf, inf, NaN, -0, the
// overflow and underflow edges, denormal results), and the ops built on it (sigmoid, silu,
// softmax) against the interpreter at odd sizes. Why: kiln_exp replaced libm's expf to make
// softmax vectorise; it must not trade accuracy for it.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

// Distance in units in the last place of `want` (the float nearest the exact value).
double ulp_error(float got, double exact) {
  float want = float(exact);
  if (std::isnan(want) || std::isinf(want) || want == 0) return got == want ? 0 : 1e9;
  double ulp = want < std::numeric_limits<float>::min() ? std::ldexp(1.0, -149)
                                                        : std::ldexp(1.0, std::ilogb(want) - 23);
  return std::fabs(double(got) - exact) / ulp;
}

TEST(VectorExp, WithinTwoUlpOfLibmOverTheWholeRangeAndSpecials) {
  std::vector<double> xs = {0.0, -0.0, 1.0, -1.0, 1e-30, -1e-30, 1e-45, 88.0, 88.72, 88.7228, 88.73, 89.0, 100.0,
                            1e30, -87.3, -87.4, -88.0, -100.0, -103.0, -103.9, -103.98, -104.0, -110.0, -1e30,
                            0.3465, -0.3466, 0.5 * std::log(2.0), 1.5 * std::log(2.0)};
  // Every 997th float bit pattern in [-110, 90] plus a dense sweep of [-20, 20].
  for (uint32_t b = 0; b < 0xff800000u; b += 997) {
    float f;
    std::memcpy(&f, &b, 4);
    if (std::fabs(f) < 110 && xs.size() < 200000) xs.push_back(f);
  }
  for (int i = -20000; i <= 20000; ++i) xs.push_back(i * 1e-3);
  const int64_t n = int64_t(xs.size());
  Graph g("exp");
  Value* x = g.add_input("x", f32({n}));
  g.set_outputs({g.add(Op::Exp, {x})});
  HostTensor in = HostTensor::empty(DType::F32, {n});
  for (int64_t i = 0; i < n; ++i) in.data<float>()[i] = float(xs[size_t(i)]);
  auto exe = compile(g, test_options());
  ASSERT_NE(exe->source().find("kiln_exp("), std::string::npos);
  HostTensor out = exe->run({in})[0];
  double worst = 0;
  float worst_x = 0;
  for (int64_t i = 0; i < n; ++i) {
    float xi = in.data<float>()[i];
    double e = ulp_error(out.data<float>()[i], std::exp(double(xi)));
    if (e > worst) worst = e, worst_x = xi;
  }
  EXPECT_LE(worst, 2.0) << "worst at x = " << worst_x;

  const float inf = std::numeric_limits<float>::infinity();
  HostTensor special = HostTensor::empty(DType::F32, {5});
  float sp[5] = {-inf, inf, std::numeric_limits<float>::quiet_NaN(), -0.0f, -100.0f};
  std::memcpy(special.data<float>(), sp, sizeof sp);
  Graph g5("exp5");
  Value* x5 = g5.add_input("x", f32({5}));
  g5.set_outputs({g5.add(Op::Exp, {x5})});
  HostTensor o = compile(g5, test_options())->run({special})[0];
  EXPECT_EQ(o.data<float>()[0], 0.0f);
  EXPECT_EQ(o.data<float>()[1], inf);
  EXPECT_TRUE(std::isnan(o.data<float>()[2]));
  EXPECT_EQ(o.data<float>()[3], 1.0f);
  EXPECT_EQ(o.data<float>()[4], std::exp(-100.0f));  // a denormal result, correctly rounded
}

TEST(VectorExp, SigmoidSiluSoftmaxMatchTheInterpreterOnWideInputs) {
  for (DType d : {DType::F32, DType::F16, DType::F64}) {
    Graph g("exp_users");
    Value* x = g.add_input("x", typed(d, {7, 131}));
    g.set_outputs({g.add(Op::Sigmoid, {x}), g.add(Op::Silu, {x}), g.add(Op::Softmax, {x}),
                   g.add(Op::LogSoftmax, {x}, {{"axis", int64_t(0)}})});
    compile_and_check(g, {HostTensor::random(d, {7, 131}, 21, -60, 60)}, str("exp users ", dtype_name(d)));
  }
}

TEST(VectorExp, GeluBothFormsAreRelativelyAccurateIncludingTheNegativeTail) {
  const int64_t n = 30001;
  Graph g("gelu");
  Value* x = g.add_input("x", f32({n}));
  g.set_outputs({g.add(Op::Gelu, {x}), g.add(Op::Gelu, {x}, {{"approximate", std::string("tanh")}})});
  HostTensor in = HostTensor::empty(DType::F32, {n});
  for (int64_t i = 0; i < n; ++i) in.data<float>()[i] = float(-15.0 + 1e-3 * double(i));
  auto exe = compile(g, test_options());
  const std::string& src = exe->source();
  ASSERT_EQ(src.find("std::erf", src.find("extern \"C\"")), std::string::npos) << "kernels must not call libm's erf";
  auto out = exe->run({in});
  double worst_erf = 0, worst_tanh = 0;
  for (int64_t i = 0; i < n; ++i) {
    double xd = in.data<float>()[i];
    double exact = 0.5 * xd * std::erfc(-xd / std::sqrt(2.0));
    double u = 0.7978845608028654 * (xd + 0.044715 * xd * xd * xd);
    double exact_tanh = xd / (1 + std::exp(-2 * u));  // = 0.5 x (1 + tanh u), without cancellation
    if (std::fabs(exact) > 1e-30)
      worst_erf = std::max(worst_erf, std::fabs(out[0].data<float>()[i] - exact) / std::fabs(exact));
    if (std::fabs(exact_tanh) > 1e-30)
      worst_tanh = std::max(worst_tanh, std::fabs(out[1].data<float>()[i] - exact_tanh) / std::fabs(exact_tanh));
  }
  EXPECT_LT(worst_erf, 5e-5);
  EXPECT_LT(worst_tanh, 5e-5);
  for (DType d : {DType::F64, DType::BF16}) {
    Graph h("gelu_dtypes");
    Value* y = h.add_input("x", typed(d, {3, 77}));
    h.set_outputs({h.add(Op::Gelu, {y}), h.add(Op::Gelu, {y}, {{"approximate", std::string("tanh")}})});
    compile_and_check(h, {HostTensor::random(d, {3, 77}, 22, -6, 6)}, str("gelu ", dtype_name(d)));
  }
}

TEST(VectorExp, ErfIsWithinAFewUlpOfLibmIncludingTinyInputs) {
  std::vector<float> xs = {0.0f, -0.0f, 1e-30f, -1e-20f, 1e-8f, 0.4999f, 0.5f, 0.5001f, 9.0f, -9.0f, 30.0f};
  for (int i = -120000; i <= 120000; ++i) xs.push_back(float(i) * 1e-4f);
  const int64_t n = int64_t(xs.size());
  Graph g("erf");
  Value* x = g.add_input("x", f32({n}));
  g.set_outputs({g.add(Op::Erf, {x})});
  HostTensor in = HostTensor::empty(DType::F32, {n});
  std::copy(xs.begin(), xs.end(), in.data<float>());
  auto exe = compile(g, test_options());
  const std::string& src = exe->source();
  ASSERT_EQ(src.find("std::erf", src.find("extern \"C\"")), std::string::npos) << "kernels must not call libm's erf";
  HostTensor out = exe->run({in})[0];
  double worst = 0;
  float worst_x = 0;
  for (int64_t i = 0; i < n; ++i) {
    double exact = std::erf(double(xs[size_t(i)]));
    if (exact == 0) {
      EXPECT_EQ(out.data<float>()[i], 0.0f);
      continue;
    }
    double rel = std::fabs(out.data<float>()[i] - exact) / std::fabs(exact);
    if (rel > worst) worst = rel, worst_x = xs[size_t(i)];
  }
  EXPECT_LT(worst, 1e-6) << "worst at x = " << worst_x;
}

}  // namespace
}  // namespace kiln::testing
