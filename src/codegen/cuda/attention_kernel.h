// The fused attention kernel's CUDA source: softmax(q k^T * scale, causal) v for f16/bf16 in one
// launch, the scores never leaving the multiprocessor (flash-attention style: tiles of keys, an
// online softmax, tensor-core mma.sync). Why: decomposed, attention writes and reads the whole
// [B, H, Tq, Tk] score matrix (268 MB per GPT-2-medium block at B=8, T=1024) and takes three
// kernels; fused, it reads q, k, v once and writes the output once.
#pragma once

#include <compare>
#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "kiln/dtype.h"

namespace kiln::codegen::cuda {

// Head dims the kernel takes (a multiple of 16, the mma's k; at most 128 for its registers).
bool fused_attention_head_dim_supported(int64_t head_dim);

// One instantiation of the kernel: element type (f16 or bf16), head dim, whether it adds an
// additive mask of the element type to the scores, and whether a row whose softmax is NaN weighs
// every value by 0 (the op's zero_nan_rows).
struct FusedAttentionKernel {
  DType dtype = DType::BF16;
  int64_t head_dim = 0;
  bool mask = false;
  bool zero_nan_rows = false;
  auto operator<=>(const FusedAttentionKernel&) const = default;
};

// Its entry point, e.g. kiln_attention_bf16_d64, kiln_attention_f16_d128_mask_zero_nan.
std::string fused_attention_kernel_name(const FusedAttentionKernel& k);

// CUDA C for the kernels named: the shared template once, one extern "C" entry point each. Needs
// sm_80 or newer (mma.sync m16n8k16 on f16/bf16, cp.async, ldmatrix).
std::string fused_attention_source(const std::set<FusedAttentionKernel>& kernels);

// The launch: blocks of kThreads threads, each kQueryRows query rows of one (batch, head); the
// grid is (batch*heads, ceil(Tq / kQueryRows)); this many bytes of dynamic shared memory.
constexpr int kFusedAttentionThreads = 128;
constexpr int kFusedAttentionQueryRows = 64;
int64_t fused_attention_shared_bytes(int64_t head_dim);

// The kernel's one parameter, passed by value (its layout matches the struct in the source).
struct FusedAttentionArgs {
  const void* q = nullptr;  // [B, H, Tq, D] at the strides below (D contiguous)
  const void* k = nullptr;  // [B, H, Tk, D]
  const void* v = nullptr;  // [B, H, Tk, D]
  void* out = nullptr;      // [B, H, Tq, D], or [B, Tq, H, D] for heads_last; contiguous
  // Element strides of q, k, v and out: between batch indices (the dims before H merged), heads,
  // rows.
  int64_t q_outer = 0, q_head = 0, q_row = 0;
  int64_t k_outer = 0, k_head = 0, k_row = 0;
  int64_t v_outer = 0, v_head = 0, v_row = 0;
  int64_t o_outer = 0, o_head = 0, o_row = 0;
  int heads = 1;  // H: the grid's x is batch * heads + head
  int tq = 0;
  int tk = 0;
  int causal = 0;         // keep key j for query i only when j <= i + causal_offset
  int causal_offset = 0;  // Tk - Tq: the causal mask aligned to the bottom right, as the op says
  float scale_log2 = 0;   // scale * log2(e): the kernel exponentiates with exp2
  // The additive mask (kernels with `mask`), of q's element type: element (batch, head, row, key) at
  // these element strides, 0 along the dims it broadcasts over.
  const void* mask = nullptr;
  int64_t m_outer = 0, m_head = 0, m_row = 0, m_key = 0;
};

}  // namespace kiln::codegen::cuda
