// Broadcast canonicalization: puts the operands of elementwise ops in one form (docs/passes.md):
//   1. a splat operand (a constant or full whose elements are all equal) becomes a rank-0
//      constant, when that does not change the result's type;
//   2. every other operand whose rank is below the result's is reshaped to the result's rank by
//      prepending size-1 dims.
// Why: afterwards an elementwise operand is either a scalar (a literal in generated code, one
// spelling for CSE and for rules like x*1) or has the result's rank, so the lowering only handles
// per-dim size-1 broadcasting, never rank broadcasting. Both steps are exact: no value changes.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

class BroadcastCanonicalization : public Pass {
 public:
  explicit BroadcastCanonicalization(const OptimizeOptions&) {}
  std::string_view name() const override { return "broadcast-canonicalization"; }
  bool run(Graph& g) override;
};

}  // namespace kiln::passes
