// Bulk rows (see bulk_rows.h): planning the ring of stages a register-row plan fills with the copy
// engine, the whole-row form, and printing the ring's set-up, copies and waits.
#include "codegen/cuda/rows/bulk_rows.h"

#include <algorithm>
#include <map>
#include <set>

#include "codegen/common/c_emitter.h"
#include "codegen/cuda/kernel_printer.h"
#include "codegen/cuda/rows/select_row_form.h"

namespace kiln::codegen::cuda {

using lower::Index;
using lower::Stmt;

namespace {

// Whether `base + first` is a multiple of `vector` elements for every row: `base` affine in its
// symbols with coefficients and constant term multiples of `vector`.
bool vector_aligned(const Index& base, int vector) {
  std::set<std::string> syms;
  base.collect_symbols(syms);
  std::map<std::string, Index> zero;
  for (const std::string& s : syms) zero[s] = Index(0);
  const Index at_zero = base.substitute(zero);
  if (!at_zero.is_constant() || at_zero.constant() % vector != 0) return false;
  for (const std::string& s : syms) {
    const Index step = base.substitute({{s, Index::symbol(s) + Index(1)}}) - base;
    if (!step.is_constant() || step.constant() % vector != 0) return false;
  }
  return true;
}

}  // namespace

// Bulk rows (RowPlan::bulk_stages) for a register-row plan, where its rows are long enough,
// every per-row input's part of a row is whole 16-byte vectors at 16-byte aligned offsets, and
// at least two stages fit the multiprocessor's shared memory beside the other blocks'. Beyond two,
// stages leave room in L1 (which shares the multiprocessor's on-chip memory) for the row-invariant
// buffers (`weights`, read a chunk at a time): layer norm [4096x32768] ran at 3.24 TB/s with two
// 64 KiB stages and its 64 KiB of weights in L1, 2.70 with three (weights from L2).
void plan_bulk_rows(RowPlan& out, const std::vector<StagedBuffer>& weights, const RowFormOptions& forms,
                    const RowDevice& device) {
  const BulkRowOptions& options = forms.bulk;
  if (options.stages < 2 || !device.has_bulk_copies() || out.per_thread < options.min_per_thread) return;
  int64_t stage = 0;
  std::vector<StagedBuffer*> inputs;
  for (StagedBuffer& b : out.buffers) {
    if (b.is_output || b.row_invariant) continue;
    const int size = dtype_size(b.dtype), per16 = std::max(1, 16 / size);
    if (size > 16 || out.row_elements % per16 != 0 || out.block_elements % per16 != 0 || !vector_aligned(b.base, per16))
      return;
    b.offset = stage;
    stage += round_up(out.block_elements * size, 16);
    inputs.push_back(&b);
  }
  if (inputs.empty()) return;
  // Each block on a multiprocessor costs 1 KiB of shared memory the system reserves, and its
  // reductions' static slots (under 2 KiB).
  const int64_t blocks = std::max(1, forms.registers.occupancy_threads / out.threads);
  int64_t budget = device.shared_per_multiprocessor / blocks - 1024 - 2048;
  if (device.shared_per_block > 0) budget = std::min(budget, device.shared_per_block);
  int64_t weight_bytes = 0;
  for (const StagedBuffer& w : weights) weight_bytes += out.block_elements * dtype_size(w.dtype);
  int64_t stages = std::min<int64_t>({options.stages, kBulkRingOffset / 8,
                                      std::max<int64_t>(2, (budget - kBulkRingOffset - weight_bytes) / stage)});
  if (stages < 2 || kBulkRingOffset + stages * stage > budget) return;
  out.bulk_stages = int(stages);
  out.bulk_stage_bytes = stage;
  out.shared_bytes = kBulkRingOffset + stages * stage;
}

RowPlan plan_whole_row_bulk(const std::vector<Stmt>& row_body, const std::vector<std::string>& grid_vars,
                            const std::vector<lower::KernelParam>& params, const RowFormOptions& forms,
                            const RowDevice& device) {
  // Bulk rows take the whole row in one block where up to max_threads threads hold it: on the H200
  // a [4096x32768] bf16 softmax ran at 3.58 TB/s as one block of 1024 threads with a ring of three
  // rows, 2.92 as a cluster of 4 blocks of 256 with a ring each, 3.26 as that cluster with the
  // register prefetch (layer_norm 3.41, 2.53, 2.66): no cluster reductions, and the ring keeps the
  // loads in flight that several smaller blocks per multiprocessor had.
  const RegisterRowOptions& registers = forms.registers;
  if (forms.bulk.stages >= 2 && device.has_bulk_copies() && registers.preferred_threads < registers.max_threads) {
    RowFormOptions whole = forms;
    whole.registers.preferred_threads = registers.max_threads;
    RowPlan s = plan_register_rows(row_body, grid_vars, params, whole, device);
    if (s.in_registers && s.cluster == 1 && s.bulk_stages > 0) return s;
  }
  return {};
}

// Bulk rows (RowPlan::bulk_stages): the per-row inputs a block copies into the ring.
std::vector<const StagedBuffer*> KernelPrinter::bulk_inputs(const RowPlan& staging) {
  std::vector<const StagedBuffer*> v;
  for (const StagedBuffer& b : staging.buffers)
    if (!b.is_output && !b.row_invariant) v.push_back(&b);
  return v;
}

// One thread: the copies of row `row` (an expression) into stage `stage`.
void KernelPrinter::emit_bulk_issue(const RowPlan& staging, const std::vector<const Stmt*>& nest,
                                    const std::string& row, const std::string& stage, int depth) {
  decode(nest, row, depth, "", "_next");
  std::string bytes;
  for (const StagedBuffer* b : bulk_inputs(staging))
    bytes += str(bytes.empty() ? "" : " + ", "unsigned(kiln_valid) * ", dtype_size(b->dtype), "u");
  line(depth, str("kiln_bar_expect(&kiln_bars[", stage, "], kiln_valid > 0 ? ", bytes, " : 0u);"));
  for (const StagedBuffer* b : bulk_inputs(staging))
    line(depth, str("if (kiln_valid > 0) kiln_bulk_load(kiln_smem + ", kBulkRingOffset, " + ", stage, " * ", staging.bulk_stage_bytes, " + ",
                    b->offset, ", p", b->param, " + (", c_index_expression(b->base.substitute(next_names(nest))), ")",
                    staging.cluster > 1 ? " + kiln_first" : "", ", unsigned(kiln_valid) * ", dtype_size(b->dtype),
                    "u, &kiln_bars[", stage, "]);"));
}

// Before the row loop: the ring's mbarriers, and the copies of the block's first rows.
void KernelPrinter::emit_bulk_start(const RowPlan& staging, const std::vector<const Stmt*>& nest,
                                    const std::string& first_row, const std::string& row_step, int depth) {
  const int stages = staging.bulk_stages;
  line(depth, str("extern __shared__ __align__(128) unsigned char kiln_smem[];  // ", staging.shared_bytes,
                  " bytes: mbarriers, then ", stages, " stages of ", staging.bulk_stage_bytes, " bytes"));
  line(depth, "unsigned long long* const kiln_bars = reinterpret_cast<unsigned long long*>(kiln_smem);");
  std::string aligned;
  for (const StagedBuffer* b : bulk_inputs(staging))
    aligned += str(aligned.empty() ? "" : " && ", "kiln_aligned16(p", b->param, ")");
  line(depth, str("const bool kiln_bulk = ", aligned, ";  // else each row is loaded directly"));
  line(depth, "if (threadIdx.x == 0) {");
  line(depth + 1, str("for (int kiln_s = 0; kiln_s < ", stages, "; ++kiln_s) kiln_bar_init(&kiln_bars[kiln_s]);"));
  line(depth + 1, "kiln_bar_init_fence();");
  line(depth, "}");
  line(depth, "__syncthreads();");
  line(depth, "if (kiln_bulk && threadIdx.x == 0) {");
  line(depth + 1, str("for (int kiln_s = 0; kiln_s < ", stages, "; ++kiln_s) {"));
  line(depth + 2, str("if (", idx, "(", first_row, ") + kiln_s * ", idx, "(", row_step, ") >= kiln_points) break;"));
  emit_bulk_issue(staging, nest, str(idx, "(", first_row, ") + kiln_s * ", idx, "(", row_step, ")"), "kiln_s", depth + 2);
  line(depth + 1, "}");
  line(depth, "}");
  line(depth, "unsigned kiln_stage = 0, kiln_phase = 0;  // the ring's stage of this row, and its use's parity");
}

// Inside the row loop: the thread's part of the row from its stage (or from global memory),
// then, once every thread has its part, the stage refilled with the row `stages` ahead.
void KernelPrinter::emit_bulk_fill(const RowPlan& staging, const std::vector<const Stmt*>& nest,
                                   const std::string& row_step, int depth) {
  for (const StagedBuffer* b : bulk_inputs(staging))
    line(depth, str("__align__(16) ", c_storage_type(b->dtype), " p", kStagedParamBase + b->param, "[",
                    staging.per_thread, "];  // p", b->param, "'s part of the row"));
  line(depth, "if (kiln_bulk) {");
  line(depth + 1, "kiln_bar_wait(&kiln_bars[kiln_stage], kiln_phase);");
  for (const StagedBuffer* b : bulk_inputs(staging))
    line(depth + 1, str("kiln_load_regs<kiln_block, ", staging.vector, ">(p", kStagedParamBase + b->param,
                        ", reinterpret_cast<const ", c_storage_type(b->dtype), "*>(kiln_smem + ", kBulkRingOffset,
                        " + kiln_stage * ", staging.bulk_stage_bytes, " + ", b->offset, "), kiln_valid);"));
  line(depth, "} else {");
  for (const StagedBuffer* b : bulk_inputs(staging))
    line(depth + 1, load_regs(staging, *b, str("p", kStagedParamBase + b->param), b->base));
  line(depth, "}");
  // The stage is refilled with the row `stages` ahead once every thread has read it: after the
  // barrier of the row's first reduction (an extra barrier a row cost up to 5%), else at its end.
  pending_refill_ = [this, &staging, &nest, row_step](int d) {
    line(d, str("if (kiln_bulk && threadIdx.x == 0 && kiln_row + ", staging.bulk_stages, " * ", idx, "(", row_step,
                ") < kiln_points) {  // every thread has read the stage"));
    line(d + 1, "kiln_bulk_fence();");
    emit_bulk_issue(staging, nest, str("kiln_row + ", staging.bulk_stages, " * ", idx, "(", row_step, ")"), "kiln_stage",
                    d + 1);
    line(d, "}");
  };
}

}  // namespace kiln::codegen::cuda
