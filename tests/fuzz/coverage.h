// Op x dtype coverage and outcome counts of a fuzz run. Why: "zero mismatches" means little
// without saying what was generated; the table shows which ops and dtypes the run exercised.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "fuzz/check.h"
#include "kiln/graph.h"
#include "kiln/target.h"

namespace kiln::fuzz {

struct Coverage {
  std::map<std::pair<Op, DType>, int64_t> nodes;  // generated nodes by op and main operand dtype
  std::map<Outcome, int64_t> outcomes;            // checked graphs by outcome
  int64_t graphs = 0, symbolic_graphs = 0, zero_size_graphs = 0, special_graphs = 0;

  void add(const FuzzCase& c, Outcome o);
  void merge(const Coverage& other);
  // A line-based form for passing counts between processes, and back.
  std::string serialize() const;
  static Coverage parse(const std::string& text);
  // The op x dtype table (markdown), the outcome counts and the ops never generated, with why.
  std::string markdown(TargetKind target) const;
};

}  // namespace kiln::fuzz
