// Comparison of eager results against the reference interpreter, with tolerances per (op, dtype).
// Why: one place states what "agrees with the oracle" means for the eager kernels: exact for
// integers and exactly-rounded ops, a few ulps for transcendentals, accumulation error for sums.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "kiln/host_tensor.h"
#include "kiln/ops.h"

namespace kiln::testing {

struct Tolerance {
  double rtol = 0, atol = 0;  // both 0: values must be equal (NaN matches NaN)
  bool exact() const { return rtol == 0 && atol == 0; }
};

// The tolerance for `op` producing `dtype` (see the .cc for the table and why).
Tolerance eager_tolerance(Op op, DType dtype);

// Checks shape, dtype and every element: |got - want| <= atol + rtol * |want|, infinities equal,
// NaN where the reference has NaN. Reports the first few mismatches with their index.
::testing::AssertionResult tensors_match(const HostTensor& got, const HostTensor& want, Tolerance tol);

}  // namespace kiln::testing
