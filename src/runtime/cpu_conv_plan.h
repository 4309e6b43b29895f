// Which conv2d steps of a compiled CPU program run on oneDNN, and which elementwise tail each one
// absorbs as post-ops. Why: the program's conv library step is followed by a generated kernel
// (bias-free activations, batch norm's per-channel arithmetic, a residual add, hardswish/silu):
// folding that kernel into the conv writes the output once instead of writing, reading and
// writing it again. The match works on the lowered Program, like the CUDA matmul epilogues.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/onednn_conv.h"
#include "lower/program.h"

namespace kiln::runtime {

struct ConvStepPlan {
  std::shared_ptr<eager::onednn::PreparedConv> conv;
  int folded_step = -1;                            // the epilogue kernel step it replaces, or -1
  const Value* out = nullptr;                      // what the conv writes (the kernel's output when folded)
  std::vector<const Value*> channel_operands;      // the binary post-ops' [C] operands, in order
  const Value* sum_operand = nullptr;              // the residual of a sum post-op
  std::vector<eager::onednn::PostOp> post_ops;
  std::string note;  // for explain: implementation, post-ops, why a tail was not folded
};

// Plans every static f32/bf16 Conv2d library step of `p` (keyed by step index). Moves the first
// write of a folded kernel's arena output to the conv's step. Convs oneDNN cannot build stay on
// the eager kernel (absent from the map).
std::map<size_t, ConvStepPlan> plan_onednn_convs(lower::Program& p);

}  // namespace kiln::runtime
