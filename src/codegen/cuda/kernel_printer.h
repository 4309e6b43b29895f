// The CUDA target's kernel printer, shared by the emitter (cuda_emitter.cc: the grid mapping, the
// pointwise kernels and the row loops every form walks) and the row forms (rows/*.cc: each prints
// its own declarations, copies and row kernel). Internal to src/codegen/cuda. Why: each row form
// keeps its planner and its printing in its own file, over one printer's state.
#pragma once

#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_emitter.h"

namespace kiln::codegen::cuda {

// Whether `body` stores something and every store writes an f16/bf16 buffer: then every value it
// computes is rounded to a 16-bit float before it leaves the kernel (fast exp/gelu are allowed).
bool stores_only_16bit_floats(const std::vector<lower::Stmt>& body, const std::vector<lower::KernelParam>& params);

struct KernelPrinter {
  const lower::LoopKernel& k;
  const CudaEmitOptions& options;
  std::ostringstream os;
  int reductions = 0;
  int loops_ = 0;
  // Loop variables' type: 32-bit when every buffer is static and small enough that no index or
  // grid-stride step can pass 2^31 (64-bit integer multiply and divide cost several instructions
  // on the GPU; the decode of a flattened index divides).
  std::string idx = "int64_t";
  std::string single_writer_test = "threadIdx.x == 0";  // who stores a row-level value
  // Every value the statements being printed compute is rounded to f16/bf16 before it is stored
  // (RowPlan::fast_exp inside register-row loops; pointwise kernels that store only 16-bit
  // floats): exp and gelu use the hardware's approximations (kiln_exp16, kiln_gelu16).
  bool fast16_ = false;
  int fused_sites_ = 0;    // fused reductions emitted (each gets its own shared slots)
  // Bulk rows: the refill of the row's stage, emitted after the row's first block reduction (its
  // barrier is passed by every thread after it read the stage), or at the row's end.
  std::function<void(int)> pending_refill_ = nullptr;

  // cuda_emitter.cc: the kernel, statements, row loops and the decode of flat indices.
  CudaKernelSource run();
  std::string expression(const lower::Scalar& s);
  void line(int depth, const std::string& text) { os << std::string(size_t(depth) * 2, ' ') << text << "\n"; }
  void emit_sequential(const std::vector<lower::Stmt>& body, int depth);
  void emit_leaf(const lower::Stmt& st, int depth, bool single_writer);
  void emit_row(const std::vector<lower::Stmt>& body, int depth, const RowPlan& plan);
  void emit_pending_refill(int depth);
  void decode(const std::vector<const lower::Stmt*>& nest, const std::string& linear, int depth,
              const std::string& last_suffix = "", const std::string& all_suffix = "");

  // rows/staged_rows.cc
  void emit_staged_row_kernel(const RowPlan& plan, const std::vector<const lower::Stmt*>& nest,
                              CudaKernelSource& out);
  void emit_staging_declarations(const RowPlan& plan, CudaKernelSource& out);
  void emit_staged_copies(const RowPlan& plan, bool outputs, bool row_invariant, int depth);

  // rows/register_rows_emit.cc
  void emit_register_row_kernel(const RowPlan& plan, const std::vector<const lower::Stmt*>& nest,
                                CudaKernelSource& out);
  void emit_register_loop(const lower::Stmt& st, int depth, int loop, const RowPlan& plan);
  void emit_weights_to_shared(const RowPlan& plan, CudaKernelSource& out);
  void emit_register_arrays(const RowPlan& plan, bool row_invariant, int depth);
  std::string load_regs(const RowPlan& plan, const StagedBuffer& b, const std::string& array, const lower::Index& base);
  std::map<std::string, lower::Index> next_names(const std::vector<const lower::Stmt*>& nest);
  void emit_prefetch_start(const RowPlan& plan, const std::vector<const lower::Stmt*>& nest,
                           const std::string& first_row, int depth);
  void emit_prefetch_next(const RowPlan& plan, const std::vector<const lower::Stmt*>& nest, const std::string& row_step,
                          int depth);
  void emit_prefetch_rotate(const RowPlan& plan, int depth);
  void emit_register_stores(const RowPlan& plan, int depth);

  // rows/bulk_rows.cc
  std::vector<const StagedBuffer*> bulk_inputs(const RowPlan& plan);
  void emit_bulk_issue(const RowPlan& plan, const std::vector<const lower::Stmt*>& nest, const std::string& row,
                       const std::string& stage, int depth);
  void emit_bulk_start(const RowPlan& plan, const std::vector<const lower::Stmt*>& nest, const std::string& first_row,
                       const std::string& row_step, int depth);
  void emit_bulk_fill(const RowPlan& plan, const std::vector<const lower::Stmt*>& nest, const std::string& row_step,
                      int depth);

  // rows/cluster_mail.cc
  void emit_mail_init(const RowPlan& plan);

  // rows/fused_row_reductions.cc
  void emit_fused_reduction(const FusedReduction& f, int depth, const RowPlan& plan);
};

}  // namespace kiln::codegen::cuda
