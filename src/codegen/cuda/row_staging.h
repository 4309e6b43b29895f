// Row staging for the CUDA target's row-block kernels: which buffers a block copies into shared
// memory once per row (or once per block, when every row reads the same elements) so the row's
// loops read them on chip, and which outputs the loops write there to be copied out with 16-byte
// stores. Why: softmax reads its row three times and layer_norm twice; done from HBM with one
// 2-byte load per element that held the row kernels at 1.1-1.8 TB/s.
#pragma once

#include <string>
#include <vector>

#include "lower/loop_ir.h"

namespace kiln::codegen::cuda {

// A staged buffer's on-chip copy prints as `p<kStagedParamBase + param>` in the rewritten body.
constexpr int kStagedParamBase = 1000;

struct StagedBuffer {
  int param = -1;             // the kernel parameter staged
  DType dtype = DType::F32;   // its dtype (the shared copy holds the storage type)
  int64_t extent = 0;         // elements per row
  lower::Index base;          // global element offset of the row's first element
  bool row_invariant = false; // the same elements for every row: copied once per block
  bool is_output = false;     // written by the row loops, copied out after them
  int shares_with = -1;       // an output written over this staged input's space (param index)
  int64_t offset = 0;         // byte offset in the block's dynamic shared memory
};

struct RowStaging {
  std::vector<StagedBuffer> buffers;  // empty: nothing staged, `body` is the original
  int64_t shared_bytes = 0;           // dynamic shared memory per block
  std::vector<lower::Stmt> body;      // the row body with staged loads and stores redirected
  bool any_per_row() const {
    for (const auto& b : buffers)
      if (!b.row_invariant) return true;
    return false;
  }
};

// Plans staging for a row body (the statements below the grid-mapped loops). A buffer qualifies
// when every access inside the row loops reads (or, for an output, writes) element `base + i` of
// a loop `for i < N` with a constant N, the same base and N each time, and (outputs) it is never
// read. Rows every row reads are staged only while the total stays within 48 KiB (occupancy);
// stages nothing when the per-row buffers would not fit in `budget_bytes`.
RowStaging plan_row_staging(const std::vector<lower::Stmt>& row_body, const std::vector<std::string>& grid_vars,
                            const std::vector<lower::KernelParam>& params, int64_t budget_bytes);

}  // namespace kiln::codegen::cuda
