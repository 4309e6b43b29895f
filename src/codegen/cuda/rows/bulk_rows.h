// Bulk rows (bulk_rows.cc, a register-row plan's ring): the block's next rows come through a ring
// of 2-3 shared-memory stages that the copy engine fills (cp.async.bulk, sm_90), instead of the
// register prefetch's second array. Why: the loads in flight no longer cost registers, so a whole
// 64 KiB row fits one block of 1024 threads with two rows ahead in flight: softmax [4096x32768]
// went from 3.28 to 3.63 TB/s on the H200, layer_norm from 2.67 to 3.48.
#pragma once

#include <string>
#include <vector>

#include "codegen/cuda/rows/row_plan.h"

namespace kiln::codegen::cuda {

struct RowFormOptions;

struct BulkRowOptions {
  int stages = 3;           // at most this many stages (0 or 1: no bulk rows, the register prefetch)
  int min_per_thread = 32;  // only for rows of at least this many elements a thread
};

// Gives a register-row plan a bulk ring (RowPlan::bulk_stages) where its rows are long enough,
// every per-row input's part of a row is whole 16-byte vectors at 16-byte aligned offsets, and at
// least two stages fit the multiprocessor's shared memory beside the other blocks' and `weights`
// (the row-invariant buffers, left in L1).
void plan_bulk_rows(RowPlan& plan, const std::vector<StagedBuffer>& weights, const RowFormOptions& forms,
                    const RowDevice& device);

// The form "bulk_rows": the whole row in one block of up to max_threads threads with a bulk ring
// (no cluster, no cluster reductions). A plan with in_registers false where it does not apply.
RowPlan plan_whole_row_bulk(const std::vector<lower::Stmt>& row_body, const std::vector<std::string>& grid_vars,
                            const std::vector<lower::KernelParam>& params, const RowFormOptions& forms,
                            const RowDevice& device);

}  // namespace kiln::codegen::cuda
