// Creates passes by name from passes.def.
#include "passes/activation_recognition.h"
#include "passes/algebraic_simplification.h"
#include "passes/attention_recognition.h"
#include "passes/broadcast_canonicalization.h"
#include "passes/common_subexpression_elimination.h"
#include "passes/constant_folding.h"
#include "passes/dead_code_elimination.h"
#include "passes/decomposition.h"
#include "passes/pass.h"
#include "passes/shape_folding.h"

namespace kiln::passes {

std::unique_ptr<Pass> create_pass(std::string_view name, const OptimizeOptions& options) {
#define PASS(cls, text, why) \
  if (name == text) return std::make_unique<cls>(options);
#include "passes/passes.def"
#undef PASS
  return nullptr;
}

namespace {
class TargetPassAdapter final : public Pass {
 public:
  explicit TargetPassAdapter(TargetPass p) : p_(std::move(p)) {}
  std::string_view name() const override { return p_.name; }
  bool run(Graph& g) override { return p_.run(g); }

 private:
  TargetPass p_;
};
}  // namespace

std::unique_ptr<Pass> target_pass(std::string_view name, const OptimizeOptions& options) {
  for (const TargetPass& p : options.target_passes)
    if (p.name == name) return std::make_unique<TargetPassAdapter>(p);
  return nullptr;
}

}  // namespace kiln::passes

namespace kiln {

std::vector<std::pair<std::string, std::string>> registered_passes() {
  return {
#define PASS(cls, text, why) {text, why},
#include "passes/passes.def"
#undef PASS
  };
}

}  // namespace kiln
