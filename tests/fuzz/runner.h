// Runs the differential fuzzer: N generated cases across worker processes, failures shrunk and
// saved as .kir regressions; and the replay of saved regressions. Why: one entry point for CI
// (bounded count + regressions), scripts/fuzz-diff (any count) and the GPU machine (--jobs 16).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "fuzz/coverage.h"
#include "fuzz/generator.h"

namespace kiln::fuzz {

struct RunOptions {
  int64_t count = 100;
  uint64_t seed = 0;          // case i uses seed + i
  TargetKind target = TargetKind::Cpu;
  int jobs = 1;               // worker processes
  int batch = 40;             // cases per compiler run on the CPU
  int threads = 2;            // threads of the compiled executables
  bool shrink = true;
  std::string save_dir;       // where shrunk failures go as <target>-<seed>.kir (empty: not saved)
  bool verbose = false;
  GenOptions gen;
};

struct RunResult {
  Coverage coverage;
  std::vector<std::string> failures;  // one line per failing case (seed, outcome, saved file)
  bool crashed = false;               // a worker died (the line in failures names its batch)
  double seconds = 0;
};

RunResult run_fuzz(const RunOptions& options);

// Replays .kir regressions (files, or every *.kir in a directory). A failing file listed in
// `known_failing` is reported but not counted; one listed that passes is reported too. Returns the
// number of unexpected failures.
int replay(const std::vector<std::string>& paths, const RunOptions& options,
           const std::set<std::string>& known_failing);

// Compile options for fuzz runs: a private cache directory and small parallel thresholds, so the
// parallel loops run even on the small shapes the generator draws.
CompileOptions fuzz_compile_options(const RunOptions& options);

}  // namespace kiln::fuzz
