// Lowers one fused group to a Loop IR kernel and schedules it for the CPU: kept dims outside
// (parallel), reduced dims inside (one pass per reduction, then one pass for the stores),
// adjacent dims merged where every access allows it, innermost loops vectorised. Why: this is
// where "one kernel per group" becomes concrete loops with one read per input and one write per
// output.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lower/fusion.h"
#include "lower/loop_ir.h"

namespace kiln::lower {

struct LowerContext {
  std::string kernel_name;
  // Graph dim symbols, in order; kernels read symbol k as run-time extent "s<k>".
  std::vector<std::string> symbols;
  int64_t parallel_threshold = 32768;
};

struct LoweredKernel {
  LoopKernel kernel;
  std::vector<const Value*> param_values;  // the buffer value behind each kernel param
};

// The fold of a reduction op, and whether it divides by the element count (mean); nullopt for
// reductions that are not folds (argmax).
std::optional<Fold> reduction_fold(Op op, bool* divide_by_count);

LoweredKernel lower_group(const Schedule& s, const FusionGroup& grp, const LowerContext& ctx);

}  // namespace kiln::lower
