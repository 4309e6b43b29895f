// The pass interface: a pass has a name and rewrites a graph in place, saying whether it changed
// anything. Why: one small interface lets the pass manager time, verify, dump, disable and repeat
// every pass the same way (the XLA HloPassInterface shape).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "kiln/graph.h"
#include "kiln/passes.h"

namespace kiln::passes {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  // Rewrites g in place; returns true iff the graph changed. Must leave g valid (the verifier
  // checks this between passes in test builds) and must not change what g computes.
  virtual bool run(Graph& g) = 0;
};

// Creates the pass registered under `name` in passes.def, configured by `options`; null when no
// pass has that name.
std::unique_ptr<Pass> create_pass(std::string_view name, const OptimizeOptions& options);
// The pass of options.target_passes named `name`, wrapped as a Pass; null when there is none.
std::unique_ptr<Pass> target_pass(std::string_view name, const OptimizeOptions& options);

}  // namespace kiln::passes
