// The shrinker: reduces a failing fuzz case to a small one that still fails the same way. Why: a
// 20-node random graph says little; the 3-node graph left after shrinking usually names the bug.
#pragma once

#include <functional>

#include "fuzz/fuzz_case.h"

namespace kiln::fuzz {

struct ShrinkOptions {
  int max_attempts = 250;     // candidate cases checked at most
  double max_seconds = 180;   // wall-clock budget
};

// Greedy to a fixpoint: drop outputs; replace a node's result by one of its same-typed operands or
// by a fresh input (cutting everything above it); turn special values off (all, then per input);
// lower symbol bindings. `still_fails` is asked of every candidate; the smallest failing one is
// returned (`c` itself when nothing smaller fails).
FuzzCase shrink(const FuzzCase& c, const std::function<bool(const FuzzCase&)>& still_fails,
                const ShrinkOptions& options = {});

}  // namespace kiln::fuzz
