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
  // CPU row schedule (set by kiln::compile, not by the CUDA target, which stages rows in shared
  // memory itself). A row (the reduced loops of one kept point) stays in L1/L2 between passes, so:
  // a value a reduction pass computes anyway (softmax's exp(x - max)) is written into the f32/f64
  // output row that needs it and read back by the store pass instead of being recomputed.
  // (Dividing by a row value stays a division: x * (1/s) is not bit-exact, and round(x / s) at a
  // tie then differs from the interpreter, as ONNX's DynamicQuantizeLinear tests showed.)
  bool keep_row_values_in_outputs = false;
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
