// One differential check: the case's ORIGINAL graph in the reference interpreter against the graph
// optimised with the target's pipeline and compiled for the target. Why: the interpreter is the
// oracle (STYLE.md habit 7); the optimizer and every target are what is on trial.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_case.h"
#include "kiln/target.h"

namespace kiln::fuzz {

enum class Outcome {
  Match,           // every output within the comparison contract
  Mismatch,        // an output differs: a bug (or a tolerance to discuss)
  CompileError,    // the optimizer or the target threw on a valid graph the target says it supports
  RunError,        // the compiled executable threw where the reference did not
  Rejected,        // the reference itself refused the inputs: nothing to compare
  IllConditioned,  // differs, but a tiny nudge of the inputs moves the reference as much
  NarrowPrecision,  // f16/bf16: differs from the per-op rounded reference, agrees with it run in f32
  Unsupported,      // the target refuses the graph as a whole (Target::refusal): a coverage gap
  Amplified,        // differs, but every node's compiled value is right for its compiled operands
};
const char* outcome_name(Outcome o);
inline bool is_failure(Outcome o) {
  return o == Outcome::Mismatch || o == Outcome::CompileError || o == Outcome::RunError;
}

struct Verdict {
  Outcome outcome = Outcome::Match;
  std::string detail;  // what differed, for failures
};

class Checker {
 public:
  Checker(const Target& target, CompileOptions options) : target_(target), options_(std::move(options)) {}
  // Checks several cases; on the CPU they are compiled in one translation unit (one compiler run).
  std::vector<Verdict> check(const std::vector<const FuzzCase*>& cases) const;
  Verdict check_one(const FuzzCase& c) const { return check({&c}).at(0); }
  const Target& target() const { return target_; }

 private:
  const Target& target_;
  CompileOptions options_;
};

}  // namespace kiln::fuzz
