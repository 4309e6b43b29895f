// The fused attention kernel (see attention_kernel.h). One block of 4 warps takes 64 query rows of
// one (batch, head), 16 a warp, and walks the keys 64 at a time: k and v tiles arrive in shared
// memory by cp.async two tiles deep, S = q k^T and O += P v run on the tensor cores
// (mma.sync.m16n8k16, f32 accumulators), and each row keeps a running max and sum (the online
// softmax) so the scores stay in registers. Masked keys (causal, or past Tk) score -inf; a row
// with every key masked comes out NaN, as the decomposed form and the reference give — unless the
// kernel is built for zero_nan_rows, where a row whose softmax is NaN (every key masked, a NaN or
// +inf score) is sum_j 0 * v[j], read in a slow loop over v (0, or NaN where v is not finite). An
// additive mask (kernels built with one) is read per score from global memory (L2: one [Tq, Tk]
// plane is shared by every head it broadcasts over).
#include "codegen/cuda/attention_kernel.h"

#include "kiln/error.h"

namespace kiln::codegen::cuda {

namespace {

// The template, written once per translation unit that uses it.
const char* kAttentionTemplate = R"CUDA(
// ---- fused attention (src/codegen/cuda/attention_kernel.cc) ----
struct KilnAttentionArgs {
  const uint16_t* q;
  const uint16_t* k;
  const uint16_t* v;
  uint16_t* out;
  long long q_outer, q_head, q_row;  // element strides: merged batch, head, row (D is contiguous)
  long long k_outer, k_head, k_row;
  long long v_outer, v_head, v_row;
  long long o_outer, o_head, o_row;  // the output's ([B, H, Tq, D], or [B, Tq, H, D] heads last)
  int heads;  // blockIdx.x = batch * heads + head
  int tq, tk, causal, causal_offset;
  float scale_log2;
  const uint16_t* mask;  // the additive mask (kernels built with one), at these element strides
  long long m_outer, m_head, m_row, m_key;
};
extern __shared__ __align__(16) uint16_t kiln_attention_smem[];

template <bool kBf16> __device__ __forceinline__ unsigned kiln_att_pack(float lo, float hi) {
  unsigned r;
  if (kBf16) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <bool kBf16> __device__ __forceinline__ void kiln_att_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if (kBf16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <bool kBf16> __device__ __forceinline__ float kiln_att_to_float(uint16_t x) {
  if (kBf16) return __uint_as_float(unsigned(x) << 16);
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
  return f;
}
// 16 bytes global -> shared without passing through registers; zeros where `valid` is false.
__device__ __forceinline__ void kiln_att_copy16(uint16_t* to, const uint16_t* from, bool valid) {
  const unsigned s = unsigned(__cvta_generic_to_shared(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(from), "r"(valid ? 16 : 0) : "memory");
}
// 2^x by the special-function unit (relative error ~2^-22; exp2f adds range handling around it).
__device__ __forceinline__ float kiln_att_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// Four 8x8 b16 matrices from shared memory, lanes 8i..8i+7 giving matrix i's rows; kTrans: each
// transposed (v's columns as the mma's B fragments).
template <bool kTrans> __device__ __forceinline__ void kiln_att_ldmatrix(unsigned (&r)[4], const uint16_t* p) {
  const unsigned a = unsigned(__cvta_generic_to_shared(p));
  if (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void kiln_att_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void kiln_att_wait_all_but_newest() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }

// rows [row0, row0 + 64) of a [rows, kD] matrix whose rows lie `stride` elements apart into a
// [64][kD + 8] tile (rows past `rows` zero).
template <int kD> __device__ __forceinline__ void kiln_att_load_tile(uint16_t* tile, const uint16_t* m, int row0, int rows,
                                                                     long long stride) {
  constexpr int kChunks = kD / 8, kLd = kD + 8;
  for (int c = int(threadIdx.x); c < 64 * kChunks; c += 128) {
    const int r = c / kChunks, col = c % kChunks * 8;
    const bool valid = row0 + r < rows;
    kiln_att_copy16(tile + r * kLd + col, valid ? m + (row0 + r) * stride + col : m, valid);
  }
}

template <int kD, bool kBf16, bool kMask, bool kZeroNan> __device__ void kiln_attention(const KilnAttentionArgs& a) {
  constexpr int kLd = kD + 8;  // padded rows: the fragment loads below hit 32 different banks
  uint16_t* const qs = kiln_attention_smem;
  uint16_t* const ks = qs + 64 * kLd;     // two stages
  uint16_t* const vs = ks + 2 * 64 * kLd;  // two stages
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int q0 = (int(gridDim.y) - 1 - int(blockIdx.y)) * 64;  // the longest causal rows first
  const size_t head = blockIdx.x;
  const long long b = (long long)(head / unsigned(a.heads)), h = (long long)(head % unsigned(a.heads));
  const uint16_t* q = a.q + b * a.q_outer + h * a.q_head;
  const uint16_t* k = a.k + b * a.k_outer + h * a.k_head;
  const uint16_t* v = a.v + b * a.v_outer + h * a.v_head;
  uint16_t* out = a.out + b * a.o_outer + h * a.o_head;
  const uint16_t* mask = kMask ? a.mask + b * a.m_outer + h * a.m_head : nullptr;
  int keys = a.tk;  // keys any row of this block keeps
  if (a.causal) keys = min(keys, max(0, q0 + 63 + a.causal_offset + 1));
  const int tiles = (keys + 63) / 64;

  kiln_att_load_tile<kD>(qs, q, q0, a.tq, a.q_row);
  if (tiles > 0) kiln_att_load_tile<kD>(ks, k, 0, a.tk, a.k_row), kiln_att_load_tile<kD>(vs, v, 0, a.tk, a.v_row);
  kiln_att_commit();

  const float inf = __int_as_float(0x7f800000);
  float acc[kD / 8][4];  // O: rows g and g + 8 of the warp's 16, columns 8j + 2t and + 1
  #pragma unroll
  for (int j = 0; j < kD / 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
  float row_max[2] = {-inf, -inf}, row_sum[2] = {0.f, 0.f};
  int nan_score[2] = {0, 0};  // zero_nan_rows: a NaN score seen in the row (fmaxf skips NaN)
  const int row_a = q0 + warp * 16 + g;  // this thread's two rows: row_a and row_a + 8

  for (int tile = 0; tile < tiles; ++tile) {
    const int stage = tile & 1;
    if (tile + 1 < tiles) {
      kiln_att_load_tile<kD>(ks + (stage ^ 1) * 64 * kLd, k, (tile + 1) * 64, a.tk, a.k_row);
      kiln_att_load_tile<kD>(vs + (stage ^ 1) * 64 * kLd, v, (tile + 1) * 64, a.tk, a.v_row);
    }
    kiln_att_commit();
    kiln_att_wait_all_but_newest();  // this tile (and q) have landed
    __syncthreads();
    const uint16_t* kt = ks + stage * 64 * kLd;
    const uint16_t* vt = vs + stage * 64 * kLd;
    float s[8][4];  // S: the 64 keys of the tile as 8 groups of 8 columns
    #pragma unroll
    for (int j = 0; j < 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
    #pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      // q's A fragment for these 16 of D, from shared memory each tile (registers held in q for the
      // whole walk would leave room for only 3 blocks a multiprocessor).
      unsigned qa[4];
      kiln_att_ldmatrix<false>(qa, qs + (warp * 16 + lane % 8 + 8 * (lane / 8 % 2)) * kLd + kk * 16 + 8 * (lane / 16));
      #pragma unroll
      for (int j = 0; j < 8; j += 2) {
        // k's rows are the mma's B columns as stored: ldmatrix gives groups j and j + 1, both k halves.
        unsigned b[4];
        kiln_att_ldmatrix<false>(b, kt + (8 * (j + lane / 16) + lane % 8) * kLd + kk * 16 + 8 * (lane / 8 % 2));
        kiln_att_mma<kBf16>(s[j], qa, b[0], b[1]);
        kiln_att_mma<kBf16>(s[j + 1], qa, b[2], b[3]);
      }
    }
    const int key0 = tile * 64;
    // Only tiles that reach past Tk or past the block's first row's causal limit test each key.
    const bool masked = kMask || key0 + 63 >= a.tk || (a.causal && key0 + 63 > q0 + a.causal_offset);
    #pragma unroll
    for (int j = 0; j < 8; ++j)
      #pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = row_a + (e >> 1) * 8, key = key0 + 8 * j + 2 * t + (e & 1);
        const bool keep = !masked || (key < a.tk && (!a.causal || key <= row + a.causal_offset));
        float x = keep ? s[j][e] * a.scale_log2 : -inf;
        if (kMask && keep && row < a.tq)
          x += kiln_att_to_float<kBf16>(mask[row * a.m_row + key * a.m_key]) * 1.4426950408889634f;  // log2(e)
        if (kZeroNan) nan_score[e >> 1] |= x != x;
        s[j][e] = x;
      }
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      float m = -inf;
      #pragma unroll
      for (int j = 0; j < 8; ++j) m = fmaxf(m, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      const float m_new = fmaxf(row_max[r], m);
      const float shift = m_new == -inf ? 0.f : m_new;  // every key so far masked: exp2(-inf) = 0
      const float rescale = kiln_att_exp2(row_max[r] - shift);
      row_max[r] = m_new;
      float sum = 0.f;
      #pragma unroll
      for (int j = 0; j < 8; ++j) {
        s[j][2 * r] = kiln_att_exp2(s[j][2 * r] - shift);
        s[j][2 * r + 1] = kiln_att_exp2(s[j][2 * r + 1] - shift);
        sum += s[j][2 * r] + s[j][2 * r + 1];
      }
      row_sum[r] = row_sum[r] * rescale + sum;
      #pragma unroll
      for (int j = 0; j < kD / 8; ++j) acc[j][2 * r] *= rescale, acc[j][2 * r + 1] *= rescale;
    }
    // O += P v: P's accumulator layout is the mma's A layout for 16 keys at a time; v's columns
    // come transposed out of shared memory by ldmatrix.
    #pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const unsigned pa[4] = {kiln_att_pack<kBf16>(s[2 * kk][0], s[2 * kk][1]), kiln_att_pack<kBf16>(s[2 * kk][2], s[2 * kk][3]),
                              kiln_att_pack<kBf16>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              kiln_att_pack<kBf16>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      #pragma unroll
      for (int j = 0; j < kD / 8; j += 2) {
        const int which = lane / 8;  // matrices: (keys +0..7, cols j), (+8..15, j), (+0..7, j+1), (+8..15, j+1)
        unsigned b[4];
        kiln_att_ldmatrix<true>(b, vt + (16 * kk + (which & 1) * 8 + lane % 8) * kLd + 8 * (j + (which >> 1)));
        kiln_att_mma<kBf16>(acc[j], pa, b[0], b[1]);
        kiln_att_mma<kBf16>(acc[j + 1], pa, b[2], b[3]);
      }
    }
    __syncthreads();  // every warp is done with this stage before the next tile refills it
  }
  #pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = row_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = 1.f / sum;  // 0 keys kept: 0 * inf = NaN, as softmax over only -inf
    const int row = row_a + 8 * r;
    int nan_row = 0;
    if (kZeroNan) {  // the softmax row is NaN: every key masked, a NaN score, or a +inf score
      nan_row = nan_score[r] | (row_max[r] == -inf) | (row_max[r] == inf);
      nan_row |= __shfl_xor_sync(0xffffffffu, nan_row, 1);
      nan_row |= __shfl_xor_sync(0xffffffffu, nan_row, 2);
    }
    if (row >= a.tq) continue;
    if (kZeroNan && nan_row) {  // every weight 0: sum_j 0 * v[j] over all keys (NaN where v is not)
      for (int j = 0; j < kD / 8; ++j) {
        float z0 = 0.f, z1 = 0.f;
        for (int key = 0; key < a.tk; ++key) {
          z0 += 0.f * kiln_att_to_float<kBf16>(v[key * a.v_row + 8 * j + 2 * t]);
          z1 += 0.f * kiln_att_to_float<kBf16>(v[key * a.v_row + 8 * j + 2 * t + 1]);
        }
        *reinterpret_cast<unsigned*>(out + row * a.o_row + 8 * j + 2 * t) = kiln_att_pack<kBf16>(z0, z1);
      }
      continue;
    }
    #pragma unroll
    for (int j = 0; j < kD / 8; ++j)
      *reinterpret_cast<unsigned*>(out + row * a.o_row + 8 * j + 2 * t) =
          kiln_att_pack<kBf16>(acc[j][2 * r] * inv, acc[j][2 * r + 1] * inv);
  }
}
)CUDA";

}  // namespace

bool fused_attention_head_dim_supported(int64_t head_dim) { return head_dim >= 16 && head_dim <= 128 && head_dim % 16 == 0; }

std::string fused_attention_kernel_name(const FusedAttentionKernel& k) {
  KILN_CHECK(k.dtype == DType::BF16 || k.dtype == DType::F16, "fused attention takes f16 or bf16, not ", dtype_name(k.dtype));
  KILN_CHECK(fused_attention_head_dim_supported(k.head_dim), "fused attention: head dim ", k.head_dim,
             " is not a multiple of 16 up to 128");
  return str("kiln_attention_", dtype_name(k.dtype), "_d", k.head_dim, k.mask ? "_mask" : "", k.zero_nan_rows ? "_zero_nan" : "");
}

int64_t fused_attention_shared_bytes(int64_t head_dim) {
  return int64_t(kFusedAttentionQueryRows + 4 * 64) * (head_dim + 8) * 2;  // q, and k and v two stages deep
}

std::string fused_attention_source(const std::set<FusedAttentionKernel>& kernels) {
  if (kernels.empty()) return "";
  std::string src = kAttentionTemplate;
  auto flag = [](bool b) { return b ? "true" : "false"; };
  for (const FusedAttentionKernel& k : kernels)
    // Four blocks a multiprocessor (128 registers a thread) up to head dim 64.
    src += str("extern \"C\" __global__ void __launch_bounds__(", kFusedAttentionThreads, k.head_dim <= 64 ? ", 4" : "",
               ") ", fused_attention_kernel_name(k), "(const KilnAttentionArgs a) { kiln_attention<", k.head_dim, ", ",
               flag(k.dtype == DType::BF16), ", ", flag(k.mask), ", ", flag(k.zero_nan_rows), ">(a); }\n");
  return src;
}

}  // namespace kiln::codegen::cuda
