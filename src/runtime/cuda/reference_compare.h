// Comparison of a device result with a float64 reference. Why: every GPU check (probe and tests)
// judges by the same normalised error ||out - ref|| / ||ref||, and counts non-finite outputs so a
// poisoned (NaN) element that no thread wrote can never pass.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/host_tensor.h"

namespace kiln::cuda {

struct ReferenceComparison {
  double relative_error = 0;
  int64_t non_finite = 0;  // outputs that are NaN or infinite where the reference is finite
  bool passes(double tolerance) const { return non_finite == 0 && relative_error <= tolerance; }
};

ReferenceComparison compare_with_reference(const HostTensor& out,
                                           const std::vector<double>& reference);

// The tolerance for a chain computed in f32 and stored in `dtype` after each of `roundings` steps.
double chain_tolerance(DType dtype, int roundings);

}  // namespace kiln::cuda
