// Constant folding: a node whose operands are all constants is evaluated at compile time by the
// reference interpreter and replaced by a constant. Why: shape arithmetic, weight transposes and
// decomposition scalars then cost nothing at run time, and the folded value is exactly what the
// interpreter would compute. Side-effecting ops are never folded, and a result is not materialised
// when it is bigger than OptimizeOptions' caps (an expand of a scalar stays an expand).
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

class ConstantFolding : public Pass {
 public:
  explicit ConstantFolding(const OptimizeOptions& options)
      : max_bytes_(options.max_folded_constant_bytes),
        max_growth_bytes_(options.max_folded_growth_bytes) {}
  std::string_view name() const override { return "constant-folding"; }
  bool run(Graph& g) override;

 private:
  int64_t max_bytes_;
  int64_t max_growth_bytes_;
};

}  // namespace kiln::passes
