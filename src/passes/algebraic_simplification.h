// Algebraic simplification: applies the rewrite rules of src/passes/rules/ (identities such as
// x*1, x-0, x/1, merged cast/reshape/permute chains, identity movement ops) to every node. Why:
// importers and decompositions emit such no-ops, and each one would be a kernel or would hide a
// fusion or CSE opportunity. Rules are exact in IEEE arithmetic unless fast_math is set.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

class AlgebraicSimplification : public Pass {
 public:
  explicit AlgebraicSimplification(const OptimizeOptions& options) : options_(options) {}
  std::string_view name() const override { return "algebraic-simplification"; }
  bool run(Graph& g) override;

 private:
  OptimizeOptions options_;
};

}  // namespace kiln::passes
