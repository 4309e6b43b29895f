// Compiling a graph for an NVIDIA GPU: the same scheduler and Loop IR as kiln::compile, printed as
// CUDA C++, compiled by NVRTC for the device's own architecture, with matmuls as cuBLASLt calls
// and every launch of a run captured once into a CUDA graph and replayed. Why: on a GPU the
// memory round trips and the host's launch overhead that fusion and graphs remove are largest.
// Everything is loaded with dlopen at run time, so this header is usable in every build.
#pragma once

#include <memory>
#include <set>
#include <string>

#include "kiln/compile.h"

namespace kiln {

struct CudaCompileOptions {
  CompileOptions base;     // fuse, decompose, cache_dir, use_cache
  int device = 0;          // CUDA device ordinal
  bool use_graphs = true;  // capture a run's launches into a CUDA graph and replay it
  int block_threads = 256; // threads per block of pointwise kernels
  // Folds act(x @ w + bias) (act: relu, or gelu's tanh form) into the cuBLASLt call's epilogue.
  bool fuse_epilogues = true;
  // Row kernels (softmax, norms, reductions) whose loops share one constant extent keep each row
  // in registers, at most `row_max_per_thread` elements per thread and buffer and
  // `row_max_threads` threads per block; longer rows are split
  // over up to `row_max_cluster` blocks of a thread-block cluster (sm_90 and newer). Off: rows are
  // staged in shared memory (docs/cuda.md).
  bool register_rows = true;
  int row_max_threads = 1024;
  int row_preferred_threads = 256;  // longer rows split over a cluster of blocks this size first
  int row_max_per_thread = 32;
  int row_max_cluster = 16;         // over 8 uses the non-portable cluster size (H100/H200: 16)
  bool row_prefetch = true;         // load a block's next row while it computes this one
  bool row_fuse_reductions = true;  // softmax's and layer norm's two row reductions combined as one
  int row_fuse_norm_max_per_thread = 16;  // layer norm's only up to this many elements a thread
  int row_occupancy_threads = 1024;  // threads per multiprocessor register rows are sized for
  // Row kernels split over clusters launch as many clusters as fit at once, each taking many rows
  // (off: up to 32 rows a multiprocessor's worth of clusters, in waves).
  bool row_persistent_clusters = true;
  // Weights that do not stay in registers are read, and outputs written, a 16-byte chunk at a time
  // inside the row loops (docs/cuda.md).
  bool row_chunks = true;
  // Rows of at least `row_bulk_min_per_thread` elements a thread keep the block's next rows in
  // flight in a ring of up to `row_bulk_stages` shared-memory stages, filled by the copy engine
  // (sm_90 and newer; 0 or 1 stages: off, the register prefetch instead; docs/cuda.md).
  int row_bulk_stages = 3;
  int row_bulk_min_per_thread = 32;
  // Fused row reductions across a cluster exchange partials by mail (st.async + mbarrier) instead
  // of a cluster barrier a row.
  bool row_cluster_mail = true;
  // Split over a cluster, weights read a chunk at a time come from a copy in shared memory.
  bool row_weights_in_shared = true;
  // 32-bit registers a thread may spend on row arrays, kept values and weights (row_staging.h).
  int row_register_words = 48;
  // Pointwise kernels take up to 16 bytes of consecutive points per thread, moving contiguous
  // buffers as vectors.
  bool vector_points = true;
  // Attention on f16/bf16 (no mask operand, head dim a multiple of 16 up to 128) as one fused
  // kernel instead of matmul, softmax and matmul over the materialised scores (sm_80 and newer).
  bool fused_attention = true;
};

// Empty when this build has the CUDA backend and a CUDA device is usable here; otherwise why not
// ("built without the CUDA backend", "no CUDA driver (libcuda.so.1) found", "no CUDA device").
std::string cuda_unavailable_reason();

// Compiles `g` for the GPU. The returned Executable's run() copies inputs to the device, replays
// the captured launches and copies outputs back; Executable::stats() reports the NVRTC compile.
// Throws kiln::Error naming the node for ops the GPU backend has no kernel for.
std::shared_ptr<Executable> compile_cuda(const Graph& g, const CudaCompileOptions& options = {});

// High-level ops compile_cuda runs whole where a kernel of its own can (it decomposes the other
// instances itself): give them to kiln::optimize as OptimizeOptions::target.native_ops, or the
// optimizer turns them into primitives first. gelu and silu are one prelude call each in the
// generated kernels (computed in f32, 1/sqrt(2) not rounded to the input's dtype, a faster erf
// where results are 16-bit), and a tanh-form gelu after a matmul goes into cuBLASLt's epilogue.
// Derived from the CUDA op table (src/runtime/op_support_cuda.def): kiln::native_ops(Cuda).
std::set<Op> cuda_native_ops();

// "cuda: NVIDIA H200 (sm_90)", or "cuda: unavailable".
std::string cuda_device_description(int device = 0);
// The device's copy bandwidth over a `bytes`-sized buffer, GB/s (read + write, best of 6 timed
// cuMemcpyDtoD); throws kiln::Error with cuda_unavailable_reason() where there is no GPU.
double cuda_copy_gbps(int64_t bytes, int device = 0);

}  // namespace kiln
