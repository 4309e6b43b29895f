// Dead-code elimination: erases nodes whose results no node and no graph output reads. Why:
// importers and other passes leave unread nodes behind; each one would still cost a kernel.
// Side-effecting nodes (random) stay: their trait promises they run even when unread.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

class DeadCodeElimination : public Pass {
 public:
  explicit DeadCodeElimination(const OptimizeOptions&) {}
  std::string_view name() const override { return "dce"; }
  bool run(Graph& g) override;
};

}  // namespace kiln::passes
