// Staged rows (see staged_rows.h): find the buffers a row-block kernel can keep in shared memory,
// lay them out, redirect the row loops' loads and stores to the copies, and print the copies and
// the row kernel whose loops stride over the block's threads.
#include "codegen/cuda/rows/staged_rows.h"

#include <algorithm>
#include <map>
#include <set>

#include "codegen/common/c_emitter.h"
#include "codegen/cuda/kernel_printer.h"

namespace kiln::codegen::cuda {

using lower::Stmt;

namespace {

int64_t round16(int64_t bytes) { return (bytes + 15) / 16 * 16; }

// A power of two from one warp up to 512 threads giving each thread ~16 elements of the row
// (1024 threads for very long rows). Fewer, busier threads per row means more rows in flight
// per multiprocessor: a row's passes and block reductions are a chain of latencies, hidden
// only by other rows (one thread per element made 1024-wide rows latency-bound).
int staged_threads(const std::vector<Stmt>& row_body) {
  int64_t widest = 1;
  bool known = true;
  for (const Stmt& st : row_body) {
    if (st.kind != Stmt::kFor) continue;
    if (st.extent.is_constant()) widest = std::max(widest, st.extent.constant());
    else known = false;
  }
  int threads = 32;
  while (threads * 16 < widest && threads < 512) threads *= 2;
  if (!known || widest >= 65536) threads = known ? 1024 : 256;
  return threads;
}

}  // namespace

RowPlan plan_staged_rows(const std::vector<Stmt>& row_body, const std::vector<std::string>& grid_vars,
                         const std::vector<lower::KernelParam>& params, int64_t budget_bytes) {
  RowPlan out;
  out.body = row_body;
  out.threads = staged_threads(row_body);
  std::vector<StagedBuffer> inputs, outputs;
  std::map<int, RowCandidate> info;
  for (const RowCandidate& c : row_candidates(row_body, grid_vars, params)) {
    (c.buffer.is_output ? outputs : inputs).push_back(c.buffer);
    info[c.buffer.param] = c;
  }
  // An output written by the last statement of a loop after which its row's input is not read
  // again can take that input's space: each element is read and written by the same thread, in
  // that order, because every row loop strides the same way.
  for (StagedBuffer& o : outputs) {
    const RowCandidate& ao = info.at(o.param);
    if (!ao.store_is_last) continue;
    for (StagedBuffer& in : inputs) {
      if (in.row_invariant || in.shares_with >= 0 || in.extent != o.extent ||
          dtype_size(in.dtype) != dtype_size(o.dtype) || info.at(in.param).last_load_loop > ao.store_loop)
        continue;
      in.shares_with = o.param;
      o.shares_with = in.param;
      break;
    }
  }

  auto layout = [&](bool with_invariant, bool with_unshared_outputs) {
    std::vector<StagedBuffer> chosen;
    int64_t bytes = 0;
    std::map<int, int64_t> offset_of;
    for (StagedBuffer b : inputs) {
      if (b.row_invariant && !with_invariant) continue;
      b.offset = bytes;
      offset_of[b.param] = bytes;
      bytes += round16(b.extent * int64_t(dtype_size(b.dtype)));
      chosen.push_back(b);
    }
    for (StagedBuffer b : outputs) {
      if (b.shares_with >= 0) {
        b.offset = offset_of.at(b.shares_with);
      } else {
        if (!with_unshared_outputs) continue;
        b.offset = bytes;
        bytes += round16(b.extent * int64_t(dtype_size(b.dtype)));
      }
      chosen.push_back(b);
    }
    return std::make_pair(chosen, bytes);
  };
  // Rows every row reads (weights) are a convenience, not a necessity (they stay in L1/L2): staged
  // only while the block's shared memory stays within 48 KiB, so they never cost occupancy.
  for (auto [inv, outs] : {std::pair{true, true}, {false, true}, {false, false}}) {
    auto [chosen, bytes] = layout(inv, outs);
    if (inv && bytes > std::min<int64_t>(budget_bytes, 48 * 1024)) continue;
    if (bytes <= budget_bytes) {
      out.buffers = chosen;
      out.shared_bytes = bytes;
      break;
    }
  }
  if (out.buffers.empty()) return out;

  std::set<int> staged_loads;
  std::set<int> staged_stores;
  for (const StagedBuffer& b : out.buffers) (b.is_output ? staged_stores : staged_loads).insert(b.param);
  redirect_staged(out.body, staged_loads, staged_stores, "");
  return out;
}

// The kernel's body after its parameters: a block per row, grid-stride over rows, its staged
// rows copied in, the row loops strided over the threads, the staged outputs copied out.
void KernelPrinter::emit_staged_row_kernel(const RowPlan& staging, const std::vector<const Stmt*>& nest,
                                           CudaKernelSource& out) {
  // The row loop's bound is the same for every thread of a block, so the block-wide
  // reductions inside are reached by all of them.
  line(1, str("constexpr int kiln_block = ", out.block_threads, ";  // launched with exactly this many threads"));
  emit_staging_declarations(staging, out);
  line(1, "int kiln_parity = 0;  // alternates the block reductions' slots row by row");
  line(1, str("for (", idx, " kiln_row = blockIdx.x; kiln_row < kiln_points; kiln_row += gridDim.x) {"));
  decode(nest, "kiln_row", 2);
  emit_staged_copies(staging, /*outputs=*/false, /*row_invariant=*/false, 2);
  emit_row(staging.body, 2, staging);
  emit_staged_copies(staging, /*outputs=*/true, false, 2);
  if (staging.any_per_row()) line(2, "__syncthreads();  // the next row's staging reuses the shared rows");
  line(2, "kiln_parity ^= 1;");
  line(1, "}");
}

// The dynamic shared memory of staged rows, a pointer per staged buffer (p10NN for pNN), and the
// copy of rows every row reads (once per block, before the row loop).
void KernelPrinter::emit_staging_declarations(const RowPlan& staging, CudaKernelSource& out) {
  if (staging.buffers.empty()) return;
  out.shared_bytes = staging.shared_bytes;
  out.staged_buffers = int(staging.buffers.size());
  line(1, str("extern __shared__ __align__(16) unsigned char kiln_smem[];  // ", staging.shared_bytes,
              " bytes: rows kept on chip"));
  for (const StagedBuffer& b : staging.buffers) {
    std::string t = c_storage_type(b.dtype);
    line(1, str(t, "* const p", kStagedParamBase + b.param, " = reinterpret_cast<", t, "*>(kiln_smem + ", b.offset,
                ");  // p", b.param, b.is_output ? " (out)" : "", b.row_invariant ? ", the same for every row" : "",
                b.shares_with >= 0 && b.is_output ? str(", over p", b.shares_with) : ""));
  }
  emit_staged_copies(staging, false, /*row_invariant=*/true, 1);
}

// Copies staged rows in (inputs) or out (outputs) with the whole block, 16-byte vectors where
// aligned, between __syncthreads() so no thread reads a row before it is complete.
void KernelPrinter::emit_staged_copies(const RowPlan& staging, bool outputs, bool row_invariant, int depth) {
  bool any = false;
  for (const StagedBuffer& b : staging.buffers) {
    if (b.is_output != outputs || b.row_invariant != row_invariant) continue;
    if (outputs && !any) line(depth, "__syncthreads();  // every thread's part of the staged outputs is written");
    any = true;
    std::string global = str("p", b.param, " + (", c_index_expression(b.base), ")");
    std::string shared = str("p", kStagedParamBase + b.param);
    line(depth, str("kiln_copy_row<kiln_block, ", b.extent, ">(", outputs ? global : shared, ", ",
                    outputs ? shared : global, ");"));
  }
  if (any && !outputs) line(depth, "__syncthreads();");
}

}  // namespace kiln::codegen::cuda
