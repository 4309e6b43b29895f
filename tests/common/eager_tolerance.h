// Tolerances of eager results against the reference interpreter per (op, dtype), under the
// comparison contract of tests/common/compare.h (tensors_match).
// Why: one place states what "agrees with the oracle" means for the eager kernels: exact for
// integers and exactly-rounded ops, a few ulps for transcendentals, accumulation error for sums.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "common/compare.h"
#include "kiln/host_tensor.h"
#include "kiln/ops.h"

namespace kiln::testing {

// The tolerance for `op` producing `dtype` (see the .cc for the table and why).
Tolerance eager_tolerance(Op op, DType dtype);

}  // namespace kiln::testing
