// Tolerances for eager-vs-reference comparisons.
#include "common/eager_tolerance.h"

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
  // The 16-bit floats' absolute part is a fraction of the output's magnitude (compare.h).
  if (op == Op::Conv2d && dtype == DType::F32) return {.rtol = 1e-5, .atol = 3e-5};
  switch (dtype) {
    case DType::F64: return {.rtol = 1e-12, .atol = 1e-12};
    case DType::F32: return {.rtol = 1e-5, .atol = 1e-6};
    case DType::F16: return {.rtol = 4e-3, .floor = 2e-3};
    case DType::BF16: return {.rtol = 1.6e-2, .floor = 1e-2};
    default: return {};
  }
}

}  // namespace kiln::testing
