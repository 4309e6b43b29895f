// Common-subexpression elimination: when two nodes apply the same op with the same attributes to
// the same operands, the later one is replaced by the earlier. Why: importers and decompositions
// repeat work (the same constant, the same x - mean); each copy is a kernel and a memory round
// trip. Side-effecting nodes (random) are never merged: two draws are two different tensors.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

class CommonSubexpressionElimination : public Pass {
 public:
  explicit CommonSubexpressionElimination(const OptimizeOptions&) {}
  std::string_view name() const override { return "cse"; }
  bool run(Graph& g) override;
};

}  // namespace kiln::passes
