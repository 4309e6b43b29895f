#!/usr/bin/env bash
# Longer random-graph run of the compiled CPU path against the interpreter.
# Usage: scripts/fuzz_compile.sh [count=3000] [first_seed=100000] [build_dir=build-compile]
# A mismatch prints the graph's text IR and seed: add it as a test in tests/unit/compile/.
set -euo pipefail
count=${1:-3000}
seed=${2:-100000}
build=${3:-build-compile}
cd "$(dirname "$0")/.."
KILN_RANDOM_GRAPHS=$count KILN_RANDOM_SEED=$seed \
  "$build/test_compile" --gtest_filter='RandomGraphs.CompiledMatchesInterpreter'
