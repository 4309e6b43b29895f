// The differential fuzzer's graph generator: random valid graphs composed from the op samples
// (tests/common/op_samples.h, one or more instances of every op of the table), chained where
// types allow, with dtype swaps, numpy broadcasting, view ops in between, symbolic dims and special
// float values. Why: compiler bugs live in combinations that no hand-written test composes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_case.h"
#include "kiln/target.h"

namespace kiln::fuzz {

struct GenOptions {
  TargetKind target = TargetKind::Cpu;
  int max_steps = 10;          // op samples drawn per graph (view ops come on top)
  double symbolic_rate = 0.3;  // fraction of cases whose fresh inputs may have symbolic dims
  double specials_rate = 0.6;  // fraction of cases with special values in some float inputs
};

// Deterministic in (seed, options): the same seed gives the same case.
FuzzCase generate_case(uint64_t seed, const GenOptions& options);

// The ops the generator draws for `target`: every op with a sample that the target supports.
std::vector<Op> menu_ops(TargetKind target);
// Why `op` is never drawn for `target` ("" when it is in the menu).
std::string why_not_drawn(TargetKind target, Op op);

}  // namespace kiln::fuzz
