// Decomposition: rewrites every high-level op the target does not declare native (TargetCaps)
// into the primitives its ops.def decomposition emits. Why: the lowering and code generators only
// need to know primitives, while a backend with a good fused kernel (attention, layer_norm) keeps
// that op by listing it in TargetCaps::native_ops. Decompositions are not bit-exact (a softmax in
// several rounded steps differs from the interpreter's float64 softmax in the last bits).
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

class Decomposition : public Pass {
 public:
  explicit Decomposition(const OptimizeOptions& options) : target_(options.target) {}
  std::string_view name() const override { return "decomposition"; }
  bool run(Graph& g) override;

 private:
  TargetCaps target_;
};

}  // namespace kiln::passes
