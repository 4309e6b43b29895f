// Tolerances for eager-vs-reference comparisons and the element-wise matcher.
#include "unit/eager/eager_compare.h"

#include <cmath>

#include "kiln/error.h"

namespace kiln::testing {

namespace {

// Ops whose float results are correctly rounded from the same math in both implementations:
// +, -, *, / and sqrt are exactly rounded in float and in double (and rounding a double result to
// float again is innocuous for them); the rest only select, compare, copy or convert.
bool exactly_rounded(Op op) {
  switch (op) {
    case Op::Neg: case Op::Abs: case Op::Sqrt: case Op::Reciprocal: case Op::Relu: case Op::Floor:
    case Op::Ceil: case Op::Round: case Op::Sign: case Op::Not: case Op::IsNan: case Op::Cast:
    case Op::Clamp: case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Maximum:
    case Op::Minimum: case Op::Mod: case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt:
    case Op::Ge: case Op::And: case Op::Or: case Op::Xor: case Op::Where: case Op::ReduceMax:
    case Op::ReduceMin: case Op::ArgMax: case Op::ArgMin: case Op::BatchNorm:
      return true;
    default:
      return has_trait(op, kMovement) || has_trait(op, kIndexing) || has_trait(op, kSource) ||
             has_trait(op, kShapeOnly);
  }
}

}  // namespace

Tolerance eager_tolerance(Op op, DType dtype) {
  if (!is_float(dtype)) return {};
  // batch_norm is exact only in f32/f64 (the eager f16 path rounds through float first).
  if (exactly_rounded(op) && !(op == Op::BatchNorm && dtype_size(dtype) == 2)) return {};
  // One or two ulps of the output type from a different evaluation order or a float-precision
  // libm call, plus accumulated rounding for sums, products and GEMMs of a few thousand terms.
  // conv2d sums C/groups * kH * kW products (hundreds) with cancellation: f32 rounding of the
  // partial sums is absolute, of the order of eps times the sum of |terms|, not of the result.
  if (op == Op::Conv2d && dtype == DType::F32) return {1e-5, 3e-5};
  switch (dtype) {
    case DType::F64: return {1e-12, 1e-12};
    case DType::F32: return {1e-5, 1e-6};
    case DType::F16: return {4e-3, 2e-3};
    case DType::BF16: return {1.6e-2, 1e-2};
    default: return {};
  }
}

::testing::AssertionResult tensors_match(const HostTensor& got, const HostTensor& want, Tolerance tol) {
  if (got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << "dtype " << dtype_name(got.dtype()) << " vs reference "
                                         << dtype_name(want.dtype());
  if (got.shape() != want.shape())
    return ::testing::AssertionFailure() << "shape " << dims_to_string(got.shape()) << " vs reference "
                                         << dims_to_string(want.shape());
  int mismatches = 0;
  std::string report;
  for (int64_t i = 0; i < got.numel(); ++i) {
    bool ok;
    std::string values;
    if (is_float(got.dtype())) {
      double a = got.get_f64(i), b = want.get_f64(i);
      if (std::isnan(b) || std::isnan(a)) ok = std::isnan(a) && std::isnan(b);
      else if (std::isinf(b) || std::isinf(a) || tol.exact()) ok = a == b;
      else ok = std::fabs(a - b) <= tol.atol + tol.rtol * std::fabs(b);
      char buf[96];
      std::snprintf(buf, sizeof buf, "%.17g vs reference %.17g", a, b);
      values = buf;
    } else {
      int64_t a = got.get_i64(i), b = want.get_i64(i);
      ok = a == b;
      values = str(a, " vs reference ", b);
    }
    if (!ok && ++mismatches <= 5) report += str("\n  element ", i, ": ", values);
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << mismatches << " of " << got.numel() << " elements differ (rtol "
                                       << tol.rtol << ", atol " << tol.atol << "):" << report;
}

}  // namespace kiln::testing
