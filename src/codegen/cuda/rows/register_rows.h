// Register rows (register_rows.cc plans them, register_rows_emit.cc prints them): a row-block
// kernel whose row loops share one constant extent holds its rows in per-thread register arrays,
// read and written with one vector per chunk, and its row loops unroll over the thread's elements;
// rows longer than a block holds are split over a thread-block cluster (sm_90). Why: staged in
// shared memory, every pass over the row cost a shared load and a conversion per element and the
// block had no loads in flight while it computed; softmax and layer_norm stayed at 1.8-2.7 TB/s.
#pragma once

#include <string>
#include <vector>

#include "codegen/cuda/rows/row_plan.h"

namespace kiln::codegen::cuda {

struct RowFormOptions;

struct RegisterRowOptions {
  int max_threads = 1024;    // block size limit
  // Blocks up to this size are preferred: a row longer than such a block holds is split over a
  // cluster when clusters allow, so several rows share a multiprocessor (one 1024-thread block per
  // multiprocessor left it idle while the block computed).
  int preferred_threads = 256;
  int max_per_thread = 32;   // row elements per thread and buffer
  // Blocks that may share a row (thread-block clusters, sm_90; over 8 uses the non-portable
  // cluster size, 16 on the H100/H200); 1: none. Devices without clusters get 1.
  int max_cluster = 16;
  // Kernels split over clusters launch as many clusters as fit at once, each taking many rows
  // (off: up to 32 rows a multiprocessor's worth of clusters, in waves). Read by the launcher.
  bool persistent_clusters = true;
  int register_words = 48;   // 32-bit registers per thread for row arrays, kept values and weights
  bool prefetch = true;      // load the block's next row while computing this one, if registers allow
  // Threads a multiprocessor should hold at once (the launch bounds' minimum blocks); 1024 leaves
  // 64 registers a thread, 768 leaves 80.
  int occupancy_threads = 1024;
  bool chunks = true;  // chunked weights and stores (RowPlan::chunked, chunked_stores)
  bool weights_in_shared = true;  // RowPlan::chunked_in_shared where shared memory allows
};

// Plans register rows (see RowPlan::in_registers) for a row body whose loops are all simple (no
// nested loop) with one common constant extent, with a bulk ring (bulk_rows.h) where its rows
// qualify and fused reductions (fused_row_reductions.h) where their pattern matches. Returns a
// plan with in_registers false when the body does not qualify or the arrays would not fit
// `register_words`. `forms` are the options with the device's limits applied (select_row_form.cc).
RowPlan plan_register_rows(const std::vector<lower::Stmt>& row_body, const std::vector<std::string>& grid_vars,
                           const std::vector<lower::KernelParam>& params, const RowFormOptions& forms,
                           const RowDevice& device);

}  // namespace kiln::codegen::cuda
