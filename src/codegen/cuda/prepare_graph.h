// The CUDA target's graph rewrites before lowering: what the GPU has no kernel for becomes what it
// has. Why: compile_cuda and `kiln dump` (which writes the CUDA kernels without a GPU) must lower
// the same graph.
#pragma once

#include <cstdint>
#include <utility>

#include "codegen/cuda/attention_kernel.h"
#include "kiln/graph.h"

namespace kiln::codegen::cuda {

// Whether the fused attention kernel (attention_kernel.h) runs this node: f16/bf16 q, k, v of
// equal batch dims and head dim (a multiple of 16 up to 128), no mask or an additive one of q's
// type (q then at most rank 4).
bool fused_attention_supports(const Node& n);

// The fused kernel a node fused_attention_supports runs (the key of fused_attention_kernel_name
// and fused_attention_source).
FusedAttentionKernel fused_attention_kernel(const Node& n);

// split -> slices (views); a conv whose windows tile its input (kernel == stride: patch
// embeddings) -> patches x weight as a matmul; a conv over at most 4 input channels (stems) ->
// weight x im2col columns as a batched matmul; conv2d + bias (symmetric pads) -> conv2d, add (the
// add fuses with what follows); attention the fused kernel cannot run (all of it without
// `fused_attention`) -> primitives; fused attention whose only reader permutes its heads after the
// rows -> attention with heads_last (the kernel writes [B, T, H, D]). Lower the result with
// Op::Attention in CompileOptions::keep_whole, so the attention left stays whole. Returns whether
// the graph changed. The CUDA target's pipeline runs it as pass "cuda-prepare-graph"; compile_cuda
// runs it again for callers that did not optimise first (then it changes nothing).
bool prepare_graph_for_cuda(Graph& g, bool fused_attention = false);

}  // namespace kiln::codegen::cuda
