// The comparison contract of every test that holds a result against an oracle (the reference
// interpreter, values the test computed itself, PyTorch): one definition of "agrees", so that no
// test family quietly accepts what another would reject. Why: a floor of `tol` alone let an
// all-zeros softmax over a wide row pass; 5% relative let wrong integers pass.
//
//  - integers, bools and strings: exactly equal;
//  - floats: NaN exactly where the oracle has NaN, infinities with their sign, else
//      |got - want| <= atol + rtol * |want| + floor * max|want|   (max over the output's finite values)
//    or within `ulps` units in the last place of the output dtype at |want| (f16/bf16/f32/f64).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "kiln/host_tensor.h"

namespace kiln::testing {

// How far a float result may be from the oracle; all zero means bit-for-bit equal values.
struct Tolerance {
  double rtol = 0;   // relative to |want|
  double atol = 0;   // absolute
  double floor = 0;  // absolute, as a fraction of the output's largest finite magnitude
  double ulps = 0;   // units in the last place of the output dtype at |want| (an alternative bound)
  bool exact() const { return rtol == 0 && atol == 0 && floor == 0 && ulps == 0; }
};

// tol with every bound multiplied by `factor` (a looser or tighter version of the same contract).
inline Tolerance scaled(Tolerance tol, double factor) {
  return {tol.rtol * factor, tol.atol * factor, tol.floor * factor, tol.ulps * factor};
}

// The size of one unit in the last place of dtype d at magnitude |v| (0 for dtypes without one).
double ulp_of(DType d, double v);

// Empty when got agrees with want under tol; else a message naming the first bad elements
// (with the bound they broke) and how many differ.
std::string compare_tensors(const HostTensor& got, const HostTensor& want, const Tolerance& tol);

// The same as a gtest assertion result.
::testing::AssertionResult tensors_match(const HostTensor& got, const HostTensor& want, const Tolerance& tol);

// A compiled or GPU result of dtype d against the interpreter (which computes in double and
// rounds once): generated kernels compute in the dtype's compute type, fuse differently and use
// their own exp/log, so a relative tolerance plus a floor at the same fraction of the output's
// magnitude.
Tolerance compiled_tolerance(DType d);

// compare_tensors at compiled_tolerance(want.dtype()).
std::string compare_tensors(const HostTensor& got, const HostTensor& want);

}  // namespace kiln::testing
