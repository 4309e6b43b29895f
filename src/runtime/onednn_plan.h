// Which conv2d, matmul and pooling steps of a compiled CPU program run on oneDNN, which elementwise
// tail each conv or matmul absorbs as post-ops, and which conv/pool results stay in oneDNN's
// blocked layout for the convs and pools that read them (kernels/cpu/onednn_handoff.h). Why: the program's conv or matmul library step is followed by a
// generated kernel (bias, activations, batch norm's per-channel arithmetic, a residual add,
// hardswish/silu/gelu): folding that kernel into the primitive writes the output once instead of
// writing, reading and writing it again. The match works on the lowered Program, like the CUDA
// matmul epilogues.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/onednn_concat.h"
#include "kernels/cpu/onednn_conv.h"
#include "kernels/cpu/onednn_matmul.h"
#include "kernels/cpu/onednn_pool.h"
#include "lower/program.h"

namespace kiln::runtime {

struct OnednnStepPlan {
  std::shared_ptr<eager::onednn::PreparedConv> conv;      // a Conv2d step, or
  std::shared_ptr<eager::onednn::PreparedMatmul> matmul;  // a MatMul step, or
  std::shared_ptr<eager::onednn::PreparedPool> pool;      // a MaxPool2d / AvgPool2d step, or
  std::shared_ptr<eager::onednn::PreparedConcat> concat;  // a channel Concat step
  int folded_step = -1;                            // the epilogue kernel step it replaces, or -1
  const Value* out = nullptr;                      // what the primitive writes (the kernel's output when folded)
  std::vector<const Value*> broadcast_operands;    // the binary post-ops' per-channel / per-column operands, in order
  const Value* sum_operand = nullptr;              // the residual of a sum post-op
  std::vector<eager::onednn::PostOp> post_ops;
  std::string note;  // for explain: implementation, post-ops, why a tail was not folded
  // Every source of the post-ops is finite whenever the graph's inputs are (finite constants and
  // finite-preserving ops only): the run checks the graph's inputs once instead of these sources
  // (kernels/cpu/onednn_post_ops.h).
  bool sources_finite_with_inputs = false;
  // Whether the run checks the sources before the primitive: post-ops, or a kernel that mishandles
  // non-finite values by itself (PreparedConv/PreparedMatmul::mishandles_nonfinite).
  bool checks_sources() const {
    return folded_step >= 0 || (conv && conv->mishandles_nonfinite()) || (matmul && matmul->mishandles_nonfinite());
  }
  // The conv, pool or concat, which can hand over blocked results; null for a matmul.
  eager::onednn::BlockedIo* blocked() const {
    if (conv) return conv.get();
    if (pool) return pool.get();
    return concat.get();
  }
};

// Plans every static f32/bf16 Conv2d, MatMul, 2-D pooling and channel Concat library step of `p` that oneDNN can run (keyed by
// step index). Moves the first write of a folded kernel's arena output to the primitive's step.
// Steps oneDNN cannot build stay on the eager kernels (absent from the map).
std::map<size_t, OnednnStepPlan> plan_onednn_steps(lower::Program& p);

}  // namespace kiln::runtime
