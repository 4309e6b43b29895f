// The comparison contract (compare.h): the element test, the ulp size per dtype, the report.
#include "common/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kiln/error.h"

namespace kiln::testing {

namespace {

// Mantissa bits and the smallest normal exponent of the IEEE-style dtypes with ulps.
bool float_format(DType d, int* mantissa, int* min_exponent) {
  switch (d) {
    case DType::F64: *mantissa = 52, *min_exponent = -1022; return true;
    case DType::F32: *mantissa = 23, *min_exponent = -126; return true;
    case DType::F16: *mantissa = 10, *min_exponent = -14; return true;
    case DType::BF16: *mantissa = 7, *min_exponent = -126; return true;
    default: return false;
  }
}

std::string show(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

double ulp_of(DType d, double v) {
  int mantissa, min_exponent;
  if (!float_format(d, &mantissa, &min_exponent)) return 0;
  v = std::fabs(v);
  int exponent = (v == 0 || !std::isfinite(v)) ? min_exponent : std::max(min_exponent, std::ilogb(v));
  return std::ldexp(1.0, exponent - mantissa);
}

std::string compare_tensors(const HostTensor& got, const HostTensor& want, const Tolerance& tol) {
  if (got.dtype() != want.dtype())
    return str("dtype ", dtype_name(got.dtype()), " vs the reference's ", dtype_name(want.dtype()));
  if (got.shape() != want.shape())
    return str("shape ", dims_to_string(got.shape()), " vs the reference's ", dims_to_string(want.shape()));
  const bool floating = is_float(want.dtype());
  double magnitude = 0;
  if (floating)
    for (int64_t i = 0; i < want.numel(); ++i)
      if (double w = std::fabs(want.get_f64(i)); std::isfinite(w)) magnitude = std::max(magnitude, w);
  const double floor = tol.floor * magnitude;
  int64_t bad = 0;
  std::string report;
  for (int64_t i = 0; i < want.numel(); ++i) {
    bool ok;
    std::string values;
    if (want.dtype() == DType::Str) {
      ok = got.str_at(i) == want.str_at(i);
      values = str("\"", got.str_at(i), "\" vs \"", want.str_at(i), "\"");
    } else if (!floating) {
      ok = got.get_i64(i) == want.get_i64(i);
      values = str(got.get_i64(i), " vs ", want.get_i64(i));
    } else {
      double g = got.get_f64(i), w = want.get_f64(i);
      values = str(show(g), " vs ", show(w));
      if (std::isnan(w) || std::isnan(g)) ok = std::isnan(w) && std::isnan(g);
      else if (std::isinf(w) || std::isinf(g) || tol.exact()) ok = g == w;
      else {
        double diff = std::fabs(g - w);
        ok = diff <= tol.atol + tol.rtol * std::fabs(w) + floor ||
             (tol.ulps > 0 && diff <= tol.ulps * ulp_of(want.dtype(), w));
      }
    }
    if (!ok && ++bad <= 3) report += str("\n  element ", i, ": ", values);
  }
  if (bad == 0) return "";
  std::string bound = tol.exact() || !floating
                          ? std::string("exact")
                          : str("rtol ", tol.rtol, ", atol ", tol.atol, ", floor ", tol.floor, " x max|want| ",
                                show(magnitude), " = ", show(floor), tol.ulps > 0 ? str(", or ", tol.ulps, " ulps") : "");
  return str(bad, " of ", want.numel(), " elements differ from the reference (", dtype_name(want.dtype()), ", ", bound,
             "):", report);
}

::testing::AssertionResult tensors_match(const HostTensor& got, const HostTensor& want, const Tolerance& tol) {
  std::string diff = compare_tensors(got, want, tol);
  if (diff.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << diff;
}

Tolerance compiled_tolerance(DType d) {
  double t = 0;
  switch (d) {
    case DType::F64: t = 1e-9; break;
    case DType::F32: t = 2e-4; break;
    case DType::F16: t = 2e-2; break;
    case DType::BF16: t = 4e-2; break;
    default: break;  // integers, bools and the 8- and 4-bit floats: exact
  }
  return {.rtol = t, .atol = 0, .floor = t};
}

std::string compare_tensors(const HostTensor& got, const HostTensor& want) {
  return compare_tensors(got, want, compiled_tolerance(want.dtype()));
}

}  // namespace kiln::testing
