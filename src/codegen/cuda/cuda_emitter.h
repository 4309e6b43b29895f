// The CUDA target of the C-like emitter: prints a Loop IR kernel as a CUDA C++ __global__ function
// for NVRTC. Why: the scheduler and Loop IR are shared with the CPU; only the mapping of loops to
// the grid differs — pointwise nests become one grid-stride loop over threads, reductions become
// one block per kept point with threads striding the reduced loops and a warp-shuffle +
// shared-memory combine of each accumulator. Every scalar expression is the CPU emitter's.
#pragma once

#include <string>
#include <vector>

#include "codegen/cuda/rows/select_row_form.h"
#include "lower/loop_ir.h"

namespace kiln::codegen::cuda {

// Kernel arguments travel by value in one struct (no device-side argument arrays to upload, and
// CUDA graph capture records them as they are).
constexpr int kMaxKernelBuffers = 48;
constexpr int kMaxKernelSymbols = 16;

// How a generated kernel maps onto the grid, for the launcher.
enum class GridMapping {
  kPointwise,  // one thread per point of the flattened loop nest (grid-stride)
  kRowBlock,   // one block per kept point ("row"); threads share each row's inner loops
};

struct CudaKernelSource {
  std::string name;
  std::string source;               // the __global__ function (needs cuda_prelude() before it)
  GridMapping mapping = GridMapping::kPointwise;
  std::vector<lower::Index> outer_extents;  // loops mapped to the grid; their product = points/rows
  std::vector<lower::Index> row_extents;    // kRowBlock: extents of the loops threads share
  // kRowBlock: the block size the kernel was written for (its loops stride by this constant, so
  // static trip counts unroll); the launcher must use exactly this many threads.
  int block_threads = 0;
  // kRowBlock: dynamic shared memory per block (staged rows, a bulk ring, weights); 0 when none.
  int64_t shared_bytes = 0;
  int staged_buffers = 0;
  // kRowBlock with register rows split over a thread-block cluster: blocks per cluster (compiled
  // into the kernel with __cluster_dims__); the grid must be a multiple of it. 1: no cluster.
  int cluster = 1;
  // kRowBlock with bulk rows (RowPlan::bulk_stages): each block keeps a ring of this many rows
  // in flight, so the grid should hold only as many blocks as run at once (each takes many rows).
  int bulk_stages = 0;
  // kPointwise: consecutive points each thread takes (vector_points.h); the launcher sizes the grid
  // for points / points_per_thread threads.
  int points_per_thread = 1;
};

struct CudaEmitOptions {
  // The GPU row kernels are planned for: clusters, bulk copies and mail need compute_major >= 9, and
  // shared_per_block bounds staged rows. The default is a GPU without those and the 48 KiB every
  // kernel gets without opting in; compile_cuda passes the device's own (`kiln dump --sm90` an H200's).
  RowDevice device;
  // Each row form's options, and a form to force (rows/select_row_form.h).
  RowFormOptions rows;
  // Pointwise kernels take several consecutive points a thread with vector loads and stores.
  bool vector_points = true;
};

// Device helpers every CUDA translation unit starts with: fixed-width integer types, the same
// helper names as the CPU prelude (f16/bf16 conversions, NaN-propagating folds, integer division
// semantics), a `kstd` namespace standing in for the std:: math the shared expressions call, the
// argument struct, and the block-wide reduction.
std::string cuda_prelude();

// Throws kiln::Error naming the kernel when it has more buffers or symbols than the argument
// struct holds.
CudaKernelSource emit_cuda_kernel(const lower::LoopKernel& k, const CudaEmitOptions& options = {});

// One NVRTC program: the prelude followed by each distinct kernel once. Kernels whose code is the
// same up to their name and comments (every layer of a transformer, a ResNet's repeated blocks)
// are written once and run through the first one's entry point. Why: NVRTC's time grows with the
// source (GPT-2: 234 kernels, ~9 s cold, most of them twelve copies of one layer).
struct CudaTranslationUnit {
  std::string source;
  std::vector<std::string> function_of;  // function_of[i]: the entry point that runs kernels[i]
  int distinct_kernels = 0;
};
CudaTranslationUnit cuda_translation_unit(const std::vector<CudaKernelSource>& kernels);

}  // namespace kiln::codegen::cuda
