// Sample instances of every op in the op table (input types at odd sizes, attributes, input value
// ranges), for sweeps that must cover every op: round-trip, interpreter, eager, compiled paths.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/graph.h"

namespace kiln::testing {

struct InputRange {
  double lo = -2, hi = 2;     // floats uniform in [lo, hi), ints uniform in [lo, hi]
  bool avoid_zero = false;    // nudge exact zeros (divisors)
};

struct OpSample {
  std::string label;                     // "add/broadcast/f32"
  Op op;
  std::vector<TensorType> input_types;   // static shapes
  Attrs attrs;
  std::vector<InputRange> ranges;        // per input; missing entries use the default
  bool inject_nan = false;               // sprinkle NaNs into float inputs (isnan, max/min)
};

// At least one sample per op, several dtypes per op where the op allows them.
const std::vector<OpSample>& op_samples();
std::vector<OpSample> op_samples_for(Op op);

// A graph with inputs x0..xn-1 and the single node of the sample as its outputs.
std::unique_ptr<Graph> build_sample_graph(const OpSample& s);
// Deterministic random inputs for the sample.
std::vector<HostTensor> sample_inputs(const OpSample& s, uint64_t seed);

}  // namespace kiln::testing
