// Printing register rows (see register_rows.h): the row kernel's loop over the block's rows, the
// per-thread arrays and their loads, the unrolled row loops, the next row's prefetch, chunked
// weights (from shared memory where split over a cluster) and the stores.
#include <algorithm>
#include <map>
#include <string>

#include "codegen/common/c_emitter.h"
#include "codegen/cuda/kernel_printer.h"

namespace kiln::codegen::cuda {

using lower::Stmt;

namespace {

std::string ct(DType t) { return std::string(lower::compute_type_name(t)); }

}  // namespace

// The kernel's body after its parameters: each block (or cluster, block kiln_rank holding part
// kiln_rank) takes every G-th row, its arrays loaded, computed and stored.
void KernelPrinter::emit_register_row_kernel(const RowPlan& staging, const std::vector<const Stmt*>& nest,
                                             CudaKernelSource& out) {
  line(1, str("constexpr int kiln_block = ", out.block_threads, ";  // launched with exactly this many threads"));
  std::string first_row = "blockIdx.x", row_step = "gridDim.x";
  if (staging.cluster > 1) {
    // Every block of a cluster works on the same rows; block kiln_rank holds part kiln_rank.
    line(1, "const int kiln_rank = kiln_cluster_rank();");
    line(1, str("const ", idx, " kiln_first = ", idx, "(kiln_rank) * ", staging.block_elements, ";"));
    line(1, str("const int kiln_valid = int(", staging.row_elements, " - kiln_first < ", staging.block_elements, " ? ",
                staging.row_elements, " - kiln_first : ", staging.block_elements, ");"));
    line(1, str("const ", idx, " kiln_end = kiln_first + kiln_valid; (void)kiln_end;"));
    first_row = str("blockIdx.x / ", staging.cluster), row_step = str("(gridDim.x / ", staging.cluster, ")");
    single_writer_test = "threadIdx.x == 0 && kiln_rank == 0";
  } else {
    line(1, str("constexpr int kiln_valid = ", staging.row_elements, ";"));
    line(1, str("constexpr ", idx, " kiln_end = ", staging.row_elements, "; (void)kiln_end;"));
  }
  emit_register_arrays(staging, /*row_invariant=*/true, 1);
  if (staging.chunked_in_shared) emit_weights_to_shared(staging, out);
  if (staging.prefetch) emit_prefetch_start(staging, nest, first_row, 1);
  if (staging.bulk_stages > 0) {
    out.shared_bytes = staging.shared_bytes;
    out.bulk_stages = staging.bulk_stages;
    emit_bulk_start(staging, nest, first_row, row_step, 1);
  }
  // Reductions alternate between two slots row by row (kiln_parity), so no barrier separates
  // one row's reads from the next row's writes. The last barrier keeps every block's shared
  // memory alive until the cluster has read it.
  if (staging.mail) emit_mail_init(staging);
  line(1, "int kiln_parity = 0;  // the row count: bit 0 picks the reductions' slots, bit 1 a mail barrier's phase");
  line(1, str("for (", idx, " kiln_row = ", first_row, "; kiln_row < kiln_points; kiln_row += ", row_step, ") {"));
  decode(nest, "kiln_row", 2);
  if (staging.prefetch) emit_prefetch_next(staging, nest, row_step, 2);
  if (staging.bulk_stages > 0) emit_bulk_fill(staging, nest, row_step, 2);
  emit_register_arrays(staging, /*row_invariant=*/false, 2);
  emit_row(staging.body, 2, staging);
  if (pending_refill_) {
    line(2, "__syncthreads();  // every thread has read the stage");
    emit_pending_refill(2);
  }
  emit_register_stores(staging, 2);
  if (staging.prefetch) emit_prefetch_rotate(staging, 2);
  if (staging.bulk_stages > 0)
    line(2, str("if (++kiln_stage == ", staging.bulk_stages, ") kiln_stage = 0, kiln_phase ^= 1;"));
  line(2, "++kiln_parity;");
  line(1, "}");
  if (staging.cluster > 1) line(1, "kiln_cluster_sync();  // no block leaves while the cluster reads it");
}

// One row loop of a register-row kernel: unrolled over the thread's elements kiln_e; the loop
// variable is the element's position in the row (for loads and stores that stay global).
void KernelPrinter::emit_register_loop(const Stmt& st, int depth, int loop, const RowPlan& staging) {
  for (const RowReciprocal& r : staging.reciprocals)
    if (r.loop == loop) line(depth, str("const float ", r.name, " = 1.0f / ", r.of, ";"));
  const bool exact = staging.block_elements == int64_t(staging.threads) * staging.per_thread &&
                     staging.row_elements == staging.cluster * staging.block_elements;
  line(depth, "#pragma unroll");
  line(depth, str("for (int kiln_e = 0; kiln_e < ", staging.per_thread, "; ++kiln_e) {"));
  line(depth + 1, str("const ", idx, " ", st.var, " = ", staging.cluster > 1 ? "kiln_first + " : "", "(kiln_e / ",
                      staging.vector, " * kiln_block + ", idx, "(threadIdx.x)) * ", staging.vector, " + kiln_e % ",
                      staging.vector, "; (void)", st.var, ";"));
  int inner = depth + 1;
  if (!exact) {
    line(depth + 1, str("if (", st.var, " < kiln_end) {"));
    ++inner;
  }
  for (const StagedBuffer& b : staging.chunked) {
    bool read = false;
    for (const Stmt& leaf : st.body)
      visit_loads(leaf.value, [&](const lower::Scalar& l) { read |= l.param == kStagedParamBase + b.param; });
    if (read && staging.chunked_in_shared)
      line(inner, str("if (kiln_e % ", staging.vector, " == 0) kiln_load_chunk<", staging.vector, ">(p",
                      kStagedParamBase + b.param, ", kiln_e, kiln_w", b.param, " + (", st.var, " - kiln_first));"));
    else if (read)
      line(inner, str("if (kiln_e % ", staging.vector, " == 0) kiln_load_chunk<", staging.vector, ">(p",
                      kStagedParamBase + b.param, ", kiln_e, p", b.param, " + (", c_index_expression(b.base), ") + ",
                      st.var, ");"));
  }
  for (const Stmt& leaf : st.body) {
    if (staging.fast_exp) fast16_ = true;
    emit_leaf(leaf, inner, false);
    fast16_ = false;
    if (leaf.kind != Stmt::kLet) continue;
    for (const KeptValue& kv : staging.kept)
      if (kv.let == leaf.name) line(inner, str(kv.array, "[kiln_e] = ", leaf.name, ";"));
  }
  if (staging.chunked_stores) {
    for (const StagedBuffer& b : staging.buffers) {
      if (!b.is_output) continue;
      bool stored = false;
      for (const Stmt& leaf : st.body) stored |= leaf.kind == Stmt::kStore && leaf.param == kStagedParamBase + b.param;
      if (stored)
        line(inner, str("if (kiln_e % ", staging.vector, " == ", staging.vector - 1, ") kiln_store_chunk<", staging.vector,
                        ">(p", b.param, " + (", c_index_expression(b.base), ") + (", st.var, " - ", staging.vector - 1,
                        "), p", kStagedParamBase + b.param, ", kiln_e - ", staging.vector - 1, ");"));
    }
  }
  if (!exact) line(depth + 1, "}");
  line(depth, "}");
}

// RowPlan::chunked_in_shared: the block's part of each chunked weight copied into shared
// memory once (kiln_w<param>, indexed from kiln_first), before any row reads it.
void KernelPrinter::emit_weights_to_shared(const RowPlan& staging, CudaKernelSource& out) {
  out.shared_bytes = staging.shared_bytes;
  line(1, str("extern __shared__ __align__(16) unsigned char kiln_smem[];  // ", staging.shared_bytes,
              " bytes: the block's part of the weights"));
  for (const StagedBuffer& b : staging.chunked) {
    const std::string t = c_storage_type(b.dtype);
    line(1, str(t, "* const kiln_w", b.param, " = reinterpret_cast<", t, "*>(kiln_smem + ", b.offset, ");  // p", b.param));
    line(1, str("for (int kiln_i = int(threadIdx.x); kiln_i < kiln_valid; kiln_i += kiln_block) kiln_w", b.param,
                "[kiln_i] = p", b.param, "[(", c_index_expression(b.base), ") + kiln_first + kiln_i];"));
  }
  line(1, "__syncthreads();  // the weights are in shared memory");
}

// Register rows: arrays declared (and inputs loaded) per row, or once per block for rows every
// row reads; outputs stored after the row's loops.
void KernelPrinter::emit_register_arrays(const RowPlan& staging, bool row_invariant, int depth) {
  for (const StagedBuffer& b : staging.buffers) {
    if (b.row_invariant != row_invariant) continue;
    // With prefetch, a per-row input's array lives across rows: declared and first loaded by
    // emit_prefetch_start, refilled from kiln_nextNN at the end of each row. Bulk rows fill it
    // from the ring (emit_bulk_fill).
    if ((staging.prefetch || staging.bulk_stages > 0) && !row_invariant && !b.is_output) continue;
    line(depth, str("__align__(16) ", c_storage_type(b.dtype), " p", kStagedParamBase + b.param, "[",
                    staging.per_thread, "];  // p", b.param, b.is_output ? " (out)" : "", "'s part of the row"));
    if (!b.is_output) line(depth, load_regs(staging, b, str("p", kStagedParamBase + b.param), b.base));
  }
  if (row_invariant) return;
  for (const StagedBuffer& b : staging.chunked)
    line(depth, str("__align__(16) ", c_storage_type(b.dtype), " p", kStagedParamBase + b.param, "[", staging.per_thread,
                    "];  // p", b.param, ", the same for every row, read a chunk at a time"));
  for (const KeptValue& kv : staging.kept)
    line(depth, str(ct(kv.dtype), " ", kv.array, "[", staging.per_thread, "];  // ", kv.let, " of every element"));
}

std::string KernelPrinter::load_regs(const RowPlan& staging, const StagedBuffer& b, const std::string& array,
                                     const lower::Index& base) {
  return str("kiln_load_regs<kiln_block, ", staging.vector, ">(", array, ", p", b.param, " + (", c_index_expression(base),
             ")", staging.cluster > 1 ? " + kiln_first" : "", ", kiln_valid);");
}

// The grid variables' names in the prefetched (next) row.
std::map<std::string, lower::Index> KernelPrinter::next_names(const std::vector<const Stmt*>& nest) {
  std::map<std::string, lower::Index> m;
  for (const Stmt* l : nest) m[l->var] = lower::Index::symbol(l->var + "_next");
  return m;
}

// Before the row loop: the first row's per-row inputs.
void KernelPrinter::emit_prefetch_start(const RowPlan& staging, const std::vector<const Stmt*>& nest,
                                        const std::string& first_row, int depth) {
  for (const StagedBuffer& b : staging.buffers)
    if (!b.is_output && !b.row_invariant)
      line(depth, str("__align__(16) ", c_storage_type(b.dtype), " p", kStagedParamBase + b.param, "[",
                      staging.per_thread, "];  // p", b.param, "'s part of the row (loaded one row ahead)"));
  line(depth, str("if (", idx, "(", first_row, ") < kiln_points) {"));
  decode(nest, str(idx, "(", first_row, ")"), depth + 1, "", "_next");
  for (const StagedBuffer& b : staging.buffers)
    if (!b.is_output && !b.row_invariant)
      line(depth + 1, load_regs(staging, b, str("p", kStagedParamBase + b.param), b.base.substitute(next_names(nest))));
  line(depth, "}");
}

// Inside the row loop, before its loops: the next row's per-row inputs into kiln_nextNN.
void KernelPrinter::emit_prefetch_next(const RowPlan& staging, const std::vector<const Stmt*>& nest,
                                       const std::string& row_step, int depth) {
  for (const StagedBuffer& b : staging.buffers)
    if (!b.is_output && !b.row_invariant)
      line(depth, str("__align__(16) ", c_storage_type(b.dtype), " kiln_next", b.param, "[", staging.per_thread, "];"));
  line(depth, str("if (kiln_row + ", row_step, " < kiln_points) {"));
  decode(nest, str("kiln_row + ", row_step), depth + 1, "", "_next");
  for (const StagedBuffer& b : staging.buffers)
    if (!b.is_output && !b.row_invariant)
      line(depth + 1, load_regs(staging, b, str("kiln_next", b.param), b.base.substitute(next_names(nest))));
  line(depth, "}");
}

void KernelPrinter::emit_prefetch_rotate(const RowPlan& staging, int depth) {
  for (const StagedBuffer& b : staging.buffers)
    if (!b.is_output && !b.row_invariant)
      line(depth, str("#pragma unroll\n", std::string(size_t(depth) * 2, ' '), "for (int kiln_e = 0; kiln_e < ",
                      staging.per_thread, "; ++kiln_e) p", kStagedParamBase + b.param, "[kiln_e] = kiln_next", b.param,
                      "[kiln_e];"));
}

void KernelPrinter::emit_register_stores(const RowPlan& staging, int depth) {
  if (staging.chunked_stores) return;  // stored chunk by chunk inside the loops
  for (const StagedBuffer& b : staging.buffers)
    if (b.is_output)
      line(depth, str("kiln_store_regs<kiln_block, ", staging.vector, ">(p", b.param, " + (", c_index_expression(b.base),
                      ")", staging.cluster > 1 ? " + kiln_first" : "", ", p", kStagedParamBase + b.param,
                      ", kiln_valid);"));
}

}  // namespace kiln::codegen::cuda
