// A fuzz case: a graph plus what regenerates its inputs (per-input ranges, special values, symbol
// bindings, one seed). Why: a failing case must be reproducible from a text file alone, so the
// inputs are a function of what the .kir header records, never of the generator's state.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/graph.h"

namespace kiln::fuzz {

// How one graph input's values are drawn.
struct InputSpec {
  double lo = -2, hi = 2;   // floats uniform in [lo, hi), ints uniform in [lo, hi]
  bool avoid_zero = false;  // divisors
  bool specials = false;    // mix NaN, +-inf, -0 and denormals into a float input
};

struct FuzzCase {
  std::unique_ptr<Graph> graph;
  std::map<std::string, InputSpec> specs;       // by graph input name; missing: the defaults
  std::map<std::string, int64_t> bindings;      // values of the symbolic dims
  uint64_t input_seed = 0;
  double special_rate = 0.08;                   // fraction of elements replaced in special inputs
  std::string note;                             // why it was saved (the mismatch), for the header

  FuzzCase clone() const;
};

// The graph inputs' concrete values. Each input's values depend only on its name, type, spec, the
// bindings and input_seed, so removing other inputs (shrinking) leaves them unchanged.
std::vector<HostTensor> make_inputs(const FuzzCase& c);

// The .kir text: "// fuzz-..." header lines (comments to the parser) and the printed graph.
std::string to_kir(const FuzzCase& c);
// Parses to_kir's text back; throws kiln::Error on a malformed header or graph.
FuzzCase from_kir(const std::string& text);

}  // namespace kiln::fuzz
