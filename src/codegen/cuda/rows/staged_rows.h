// Staged rows (staged_rows.cc): the form every row-block kernel can take. Each buffer the row
// loops read as `base + i` is copied into dynamic shared memory once per row (once per block when
// every row reads the same elements) and the loops read it there; outputs are written there and
// copied out with 16-byte stores. The loops stride over the block's threads. Why: softmax reads
// its row three times and layer_norm twice; done from HBM with one 2-byte load per element that
// held the row kernels at 1.1-1.8 TB/s. It has no options: its budget is the device's.
#pragma once

#include <string>
#include <vector>

#include "codegen/cuda/rows/row_plan.h"

namespace kiln::codegen::cuda {

// Plans staging for a row body (the statements below the grid-mapped loops). A buffer qualifies
// when every access inside the row loops reads (or, for an output, writes) element `base + i` of
// a loop `for i < N` with a constant N, the same base and N each time, and (outputs) it is never
// read. Rows every row reads are staged only while the total stays within 48 KiB (occupancy);
// stages nothing when the per-row buffers would not fit in `budget_bytes` (the kernel then reads
// HBM once per pass). Always applies: the plan's `threads` is set either way.
RowPlan plan_staged_rows(const std::vector<lower::Stmt>& row_body, const std::vector<std::string>& grid_vars,
                         const std::vector<lower::KernelParam>& params, int64_t budget_bytes);

}  // namespace kiln::codegen::cuda
