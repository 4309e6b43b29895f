// Normalised error against a float64 reference, and per-dtype tolerances.
#include "runtime/cuda/reference_compare.h"

#include <cmath>

#include "kiln/error.h"

namespace kiln::cuda {

ReferenceComparison compare_with_reference(const HostTensor& out,
                                           const std::vector<double>& reference) {
  KILN_CHECK(int64_t(reference.size()) == out.numel(), "reference has ", reference.size(),
             " values for a result of ", out.numel());
  ReferenceComparison result;
  double diff_squares = 0, ref_squares = 0;
  for (int64_t i = 0; i < out.numel(); ++i) {
    const double value = out.get_f64(i);
    const double expected = reference[size_t(i)];
    if (!std::isfinite(value) && std::isfinite(expected)) {
      ++result.non_finite;
      continue;
    }
    diff_squares += (value - expected) * (value - expected);
    ref_squares += expected * expected;
  }
  result.relative_error = ref_squares > 0 ? std::sqrt(diff_squares / ref_squares)
                                          : std::sqrt(diff_squares);
  return result;
}

double chain_tolerance(DType dtype, int roundings) {
  // Independent rounding errors add in quadrature: sqrt(roundings) times one rounding's error
  // (about 2^-11 for f16 and 2^-9 for bf16, relative), with a factor of 4 or so to spare.
  const double growth = std::sqrt(double(roundings < 1 ? 1 : roundings));
  switch (dtype) {
    case DType::F32: return 1e-5;
    case DType::F16: return 1e-3 * growth;
    case DType::BF16: return 6e-3 * growth;
    default: return 0;
  }
}

}  // namespace kiln::cuda
