// Loop IR -> CUDA C++ (see cuda_emitter.h). The loop nest is split where it stops being a perfect
// nest: the loops above that point go to the grid, the statements below run per point (pointwise)
// or per row with the row's loops strided over the block's threads (row reductions).
#include "codegen/cuda/cuda_emitter.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "codegen/common/c_emitter.h"
#include "codegen/cuda/row_staging.h"
#include "codegen/cuda/vector_points.h"
#include "kiln/error.h"

namespace kiln::codegen::cuda {

using lower::Fold;
using lower::LoopKernel;
using lower::Stmt;

namespace {

std::string ct(DType t) { return std::string(lower::compute_type_name(t)); }

// The shared expressions spell math as std::...; NVRTC has no std, the prelude's kstd stands in.
std::string device_text(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 5, "std::") == 0 && (i == 0 || !(std::isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_'))) {
      out += "kstd::";
      i += 4;
    } else {
      out += text[i];
    }
  }
  return out;
}

// Whether `body` stores something and every store writes an f16/bf16 buffer: then every value it
// computes is rounded to a 16-bit float before it leaves the kernel.
bool stores_only_16bit_floats(const std::vector<Stmt>& body, const std::vector<lower::KernelParam>& params) {
  bool any = false, all = true;
  std::function<void(const std::vector<Stmt>&)> walk = [&](const std::vector<Stmt>& stmts) {
    for (const Stmt& st : stmts) {
      if (st.kind == Stmt::kFor) walk(st.body);
      if (st.kind != Stmt::kStore) continue;
      const DType t = params[size_t(st.param % kStagedParamBase)].dtype;
      any = true;
      all &= t == DType::F16 || t == DType::BF16;
    }
  };
  walk(body);
  return any && all;
}

bool contains_loop(const std::vector<Stmt>& body) {
  for (const Stmt& st : body)
    if (st.kind == Stmt::kFor) return true;
  return false;
}

struct Printer {
  const LoopKernel& k;
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
  // (RowStaging::fast_exp inside register-row loops; pointwise kernels that store only 16-bit
  // floats): exp and gelu use the hardware's approximations (kiln_exp16, kiln_gelu16).
  bool fast16_ = false;
  int fused_sites_ = 0;    // fused reductions emitted (each gets its own shared slots)
  // Bulk rows: the refill of the row's stage, emitted after the row's first block reduction (its
  // barrier is passed by every thread after it read the stage), or at the row's end.
  std::function<void(int)> pending_refill_ = nullptr;

  // The shared scalar expression; where fast16_ says every value is rounded to a 16-bit float
  // before it is stored, kiln_exp becomes kiln_exp16 (ex2.approx) and kiln_gelu kiln_gelu16.
  std::string expression(const lower::Scalar& s) {
    std::string text = c_scalar_expression(s);
    if (!fast16_) return text;
    static const std::pair<std::string, std::string> kFast[] = {{"kiln_exp(", "kiln_exp16("}, {"kiln_gelu(", "kiln_gelu16("}};
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      const bool word_start = i == 0 || !(std::isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_');
      const std::pair<std::string, std::string>* hit = nullptr;
      for (const auto& f : kFast)
        if (word_start && text.compare(i, f.first.size(), f.first) == 0) hit = &f;
      if (hit) {
        out += hit->second;
        i += hit->first.size() - 1;
      } else {
        out += text[i];
      }
    }
    return out;
  }

  void line(int depth, const std::string& text) { os << std::string(size_t(depth) * 2, ' ') << text << "\n"; }

  // Sequential statements, as on the CPU (inside one thread).
  void emit_sequential(const std::vector<Stmt>& body, int depth) {
    for (const Stmt& st : body) {
      switch (st.kind) {
        case Stmt::kFor:
          line(depth, str("for (", idx, " ", st.var, " = 0; ", st.var, " < ", c_index_expression(st.extent), "; ++",
                          st.var, ") {"));
          emit_sequential(st.body, depth + 1);
          line(depth, "}");
          break;
        default: emit_leaf(st, depth, false); break;
      }
    }
  }

  void emit_leaf(const Stmt& st, int depth, bool single_writer) {
    switch (st.kind) {
      case Stmt::kLet:
        line(depth, str("const ", ct(st.dtype), " ", st.name, " = ", expression(*st.value), ";"));
        break;
      case Stmt::kStore: {
        // Staged outputs (row_staging.h) are numbered from kStagedParamBase and share the dtype.
        std::string text = str("p", st.param, "[", c_index_expression(st.index), "] = ",
                               c_store_expression(k.params[size_t(st.param % kStagedParamBase)].dtype,
                                                  expression(*st.value)), ";");
        line(depth, single_writer ? str("if (", single_writer_test, ") ", text) : text);
        break;
      }
      case Stmt::kAccInit:
        line(depth, str(ct(st.dtype), " ", st.name, " = ", c_accumulator_identity(st.dtype, st.fold), ";"));
        break;
      case Stmt::kAccUpdate: line(depth, c_accumulator_update(st)); break;
      case Stmt::kFor: KILN_ASSERT(false && "loops are not leaves");
    }
  }

  // A row's statements: its loops are strided over the block's threads (or, for register rows,
  // unrolled over the thread's elements); accumulators they update are combined across the block
  // (and the cluster) after each loop, so every thread continues with the row's value.
  void emit_row(const std::vector<Stmt>& body, int depth, const RowStaging& staging) {
    // Accumulators a fused reduction combines after a later loop stay per thread until then.
    std::set<std::string> deferred;
    for (const FusedReduction& f : staging.fused) deferred.insert({f.first, f.second, f.count});
    int loop = -1;
    for (const Stmt& st : body) {
      if (st.kind != Stmt::kFor) {
        emit_leaf(st, depth, /*single_writer=*/true);
        continue;
      }
      ++loop;
      std::vector<const Stmt*> accs;
      for (const Stmt* a : c_outer_accumulators(st.body))
        if (!deferred.count(a->name)) accs.push_back(a);
      const std::string before = str("_before", loops_++);
      for (const Stmt* a : accs) {
        line(depth, str(ct(a->dtype), " ", a->name, before, " = ", a->name, ";"));
        line(depth, str(a->name, " = ", c_accumulator_identity(a->dtype, a->fold), ";"));
      }
      if (staging.in_registers) {
        emit_register_loop(st, depth, loop, staging);
      } else {
        line(depth, "#pragma unroll 4");
        line(depth, str("for (", idx, " ", st.var, " = threadIdx.x; ", st.var, " < ", c_index_expression(st.extent), "; ",
                        st.var, " += kiln_block) {"));
        emit_sequential(st.body, depth + 1);
        line(depth, "}");
      }
      for (const Stmt* a : accs) {
        std::string T = ct(a->dtype);
        std::string combine = str("[](", T, " a, ", T, " b) { return ", c_fold_combine(a->dtype, a->fold, "a", "b"), "; }");
        line(depth, str(a->name, " = kiln_block_reduce<", T, ">(", a->name, ", ", combine, ", kiln_parity);"));
        if (staging.cluster > 1)
          line(depth, str(a->name, " = kiln_cluster_reduce<", staging.cluster, ", ", T, ">(", a->name, ", ", combine,
                          ", kiln_parity);"));
        line(depth, str(a->name, " = ", c_fold_combine(a->dtype, a->fold, a->name + before, a->name), ";"));
        ++reductions;
        emit_pending_refill(depth);
      }
      for (const FusedReduction& f : staging.fused)
        if (f.loop == loop) emit_fused_reduction(f, depth, staging), emit_pending_refill(depth);
    }
  }

  // RowStaging::chunked_in_shared: the block's part of each chunked weight copied into shared
  // memory once (kiln_w<param>, indexed from kiln_first), before any row reads it.
  void emit_weights_to_shared(const RowStaging& staging, CudaKernelSource& out) {
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

  // Fused reductions across a cluster by mail (kiln_mail_combine) instead of a cluster barrier.
  bool cluster_mail(const RowStaging& staging) const {
    return options.registers.cluster_mail && staging.cluster > 1 && !staging.fused.empty();
  }

  void emit_pending_refill(int depth) {
    if (!pending_refill_) return;
    auto refill = std::move(pending_refill_);
    pending_refill_ = nullptr;
    refill(depth);
  }

  // The pair (or triple) of a fused reduction combined across the block and cluster at once.
  void emit_fused_reduction(const FusedReduction& f, int depth, const RowStaging& staging) {
    const int site = fused_sites_++;
    line(depth, "{");
    const bool mail = cluster_mail(staging);
    if (f.kind == FusedReduction::kMaxExpSum) {
      line(depth + 1, str("const kiln_max_sum kiln_f = kiln_reduce_fused<", staging.cluster, ", ", site,
                          mail ? ", kiln_max_sum, true" : "", ">(kiln_max_sum{", f.first, ", ", f.second,
                          "}, kiln_parity);"));
      // Unfused, a row whose max is -inf sums exp(-inf - -inf) = NaN; so does this.
      line(depth + 1, str(f.first, " = kiln_f.m;"));
      line(depth + 1, str(f.second, " = kiln_f.m == -kstd::numeric_limits<float>::infinity() ? ",
                          "kstd::numeric_limits<float>::quiet_NaN() : kiln_f.s;"));
    } else {
      line(depth + 1, str("const kiln_mean_m2 kiln_f = kiln_reduce_fused<", staging.cluster, ", ", site,
                          mail ? ", kiln_mean_m2, true" : "", ">(kiln_mean_m2{", f.count, ", ", f.first, ", ", f.second,
                          "}, kiln_parity);"));
      line(depth + 1, str(f.count, " = kiln_f.n;"));
      line(depth + 1, str(f.first, " = kiln_f.s;"));
      line(depth + 1, str(f.second, " = kiln_f.m2;"));
    }
    line(depth, "}");
    reductions += 2;
  }

  // One row loop of a register-row kernel: unrolled over the thread's elements kiln_e; the loop
  // variable is the element's position in the row (for loads and stores that stay global).
  void emit_register_loop(const Stmt& st, int depth, int loop, const RowStaging& staging) {
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

  // The dynamic shared memory of staged rows, a pointer per staged buffer (p10NN for pNN), and the
  // copy of rows every row reads (once per block, before the row loop).
  void emit_staging_declarations(const RowStaging& staging, CudaKernelSource& out) {
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
  void emit_staged_copies(const RowStaging& staging, bool outputs, bool row_invariant, int depth) {
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

  // Declares the loop variables of `nest` from the linear index `linear` (innermost fastest).
  // `last_suffix` renames the innermost variable (vector points decode the first point's).
  // `all_suffix` renames every variable (a prefetch decodes the next row's).
  void decode(const std::vector<const Stmt*>& nest, const std::string& linear, int depth,
              const std::string& last_suffix = "", const std::string& all_suffix = "") {
    if (nest.empty()) return;
    const std::string rest = "kiln_rest" + all_suffix;
    line(depth, str(idx, " ", rest, " = ", linear, ";"));
    for (size_t i = nest.size(); i-- > 0;) {
      std::string e = c_index_expression(nest[i]->extent);
      const std::string name = nest[i]->var + all_suffix + (i + 1 == nest.size() ? last_suffix : "");
      if (i == 0) {
        line(depth, str("const ", idx, " ", name, " = ", rest, ";"));
      } else {
        line(depth, str("const ", idx, " ", name, " = ", rest, " % (", e, ");"));
        line(depth, str(rest, " /= (", e, ");"));
      }
    }
  }

  // Register rows: arrays declared (and inputs loaded) per row, or once per block for rows every
  // row reads; outputs stored after the row's loops.
  void emit_register_arrays(const RowStaging& staging, bool row_invariant, int depth) {
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

  std::string load_regs(const RowStaging& staging, const StagedBuffer& b, const std::string& array, const lower::Index& base) {
    return str("kiln_load_regs<kiln_block, ", staging.vector, ">(", array, ", p", b.param, " + (", c_index_expression(base),
               ")", staging.cluster > 1 ? " + kiln_first" : "", ", kiln_valid);");
  }

  // The grid variables' names in the prefetched (next) row.
  std::map<std::string, lower::Index> next_names(const std::vector<const Stmt*>& nest) {
    std::map<std::string, lower::Index> m;
    for (const Stmt* l : nest) m[l->var] = lower::Index::symbol(l->var + "_next");
    return m;
  }

  // Before the row loop: the first row's per-row inputs.
  void emit_prefetch_start(const RowStaging& staging, const std::vector<const Stmt*>& nest, const std::string& first_row,
                           int depth) {
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
  void emit_prefetch_next(const RowStaging& staging, const std::vector<const Stmt*>& nest, const std::string& row_step,
                          int depth) {
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

  // Bulk rows (RowStaging::bulk_stages): the per-row inputs a block copies into the ring.
  std::vector<const StagedBuffer*> bulk_inputs(const RowStaging& staging) {
    std::vector<const StagedBuffer*> v;
    for (const StagedBuffer& b : staging.buffers)
      if (!b.is_output && !b.row_invariant) v.push_back(&b);
    return v;
  }

  // One thread: the copies of row `row` (an expression) into stage `stage`.
  void emit_bulk_issue(const RowStaging& staging, const std::vector<const Stmt*>& nest, const std::string& row,
                       const std::string& stage, int depth) {
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
  void emit_bulk_start(const RowStaging& staging, const std::vector<const Stmt*>& nest, const std::string& first_row,
                       const std::string& row_step, int depth) {
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
  void emit_bulk_fill(const RowStaging& staging, const std::vector<const Stmt*>& nest, const std::string& row_step,
                      int depth) {
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

  void emit_prefetch_rotate(const RowStaging& staging, int depth) {
    for (const StagedBuffer& b : staging.buffers)
      if (!b.is_output && !b.row_invariant)
        line(depth, str("#pragma unroll\n", std::string(size_t(depth) * 2, ' '), "for (int kiln_e = 0; kiln_e < ",
                        staging.per_thread, "; ++kiln_e) p", kStagedParamBase + b.param, "[kiln_e] = kiln_next", b.param,
                        "[kiln_e];"));
  }

  void emit_register_stores(const RowStaging& staging, int depth) {
    if (staging.chunked_stores) return;  // stored chunk by chunk inside the loops
    for (const StagedBuffer& b : staging.buffers)
      if (b.is_output)
        line(depth, str("kiln_store_regs<kiln_block, ", staging.vector, ">(p", b.param, " + (", c_index_expression(b.base),
                        ")", staging.cluster > 1 ? " + kiln_first" : "", ", p", kStagedParamBase + b.param,
                        ", kiln_valid);"));
  }

  CudaKernelSource run() {
    CudaKernelSource out;
    out.name = k.name;
    KILN_CHECK(int(k.params.size()) <= kMaxKernelBuffers, "CUDA kernel ", k.name, " has ", k.params.size(),
               " buffers; the argument struct holds ", kMaxKernelBuffers);
    KILN_CHECK(int(k.symbols.size()) <= kMaxKernelSymbols, "CUDA kernel ", k.name, " has ", k.symbols.size(),
               " symbolic extents; the argument struct holds ", kMaxKernelSymbols);
    bool small = k.symbols.empty();
    for (const auto& p : k.params) small &= p.numel.is_constant() && p.numel.constant() < (int64_t(1) << 30);
    if (small) idx = "int";
    // The perfect nest from the top: these loops go to the grid.
    std::vector<const Stmt*> nest;
    const std::vector<Stmt>* inner = &k.body;
    while (inner->size() == 1 && (*inner)[0].kind == Stmt::kFor) {
      nest.push_back(&(*inner)[0]);
      inner = &(*inner)[0].body;
    }
    std::vector<std::string> grid_vars;
    for (const Stmt* l : nest) grid_vars.push_back(l->var);
    out.mapping = contains_loop(*inner) ? GridMapping::kRowBlock : GridMapping::kPointwise;
    for (const Stmt* l : nest) out.outer_extents.push_back(l->extent);
    RowStaging staging;
    if (out.mapping == GridMapping::kRowBlock) {
      int64_t widest = 1;
      bool known = true;
      for (const Stmt& st : *inner) {
        if (st.kind != Stmt::kFor) continue;
        out.row_extents.push_back(st.extent);
        if (st.extent.is_constant()) widest = std::max(widest, st.extent.constant());
        else known = false;
      }
      if (options.register_rows) staging = plan_register_rows(*inner, grid_vars, k.params, options.registers);
      if (staging.in_registers) {
        out.block_threads = staging.threads;
        out.cluster = staging.cluster;
      } else {
        staging = plan_row_staging(*inner, grid_vars, k.params, options.shared_budget_bytes);
        // A power of two from one warp up to 512 threads giving each thread ~16 elements of the row
        // (1024 threads for very long rows). Fewer, busier threads per row means more rows in flight
        // per multiprocessor: a row's passes and block reductions are a chain of latencies, hidden
        // only by other rows (one thread per element made 1024-wide rows latency-bound).
        int threads = 32;
        while (threads * 16 < widest && threads < 512) threads *= 2;
        if (!known || widest >= 65536) threads = known ? 1024 : 256;
        out.block_threads = threads;
      }
    }

    os << "// " << k.name << ": " << k.source_ops.size() << " ops fused:";
    for (const auto& op : k.source_ops) os << " " << op;
    os << (out.mapping == GridMapping::kPointwise ? " (one thread per point)"
           : staging.in_registers                 ? str(" (rows in registers: ", staging.threads, " threads x ",
                                                        staging.per_thread, " elements",
                                                        staging.cluster > 1 ? str(" x ", staging.cluster, " blocks") : "",
                                                        staging.bulk_stages > 0 ? str(", a ring of ", staging.bulk_stages,
                                                                                      " rows in shared memory") : "", ")")
                                                  : " (one block per row)")
       << "\n";
    std::string bounds = "__launch_bounds__(1024)";
    if (staging.in_registers)  // registers for `occupancy_threads` threads a multiprocessor (1024: 64 each)
      bounds = str("__launch_bounds__(", staging.threads, ", ",
                   std::max(1, options.registers.occupancy_threads / staging.threads), ")");
    if (staging.cluster > 1) bounds += str(" __cluster_dims__(", staging.cluster, ", 1, 1)");
    os << "extern \"C\" __global__ void " << bounds << " " << k.name << "(const KilnArgs kiln_args) {\n";
    for (size_t i = 0; i < k.symbols.size(); ++i)
      line(1, str("const int64_t s", i, " = kiln_args.syms[", i, "]; (void)s", i, ";  // ", k.symbols[i]));
    for (size_t i = 0; i < k.params.size(); ++i) {
      const auto& p = k.params[i];
      std::string t = c_storage_type(p.dtype);
      line(1, str(p.is_output ? "" : "const ", t, "* __restrict__ p", i, " = static_cast<", p.is_output ? "" : "const ",
                  t, "*>(kiln_args.bufs[", i, "]);  // ", p.label));
    }
    line(1, "int* kiln_status = kiln_args.status; (void)kiln_status;");
    std::string points = idx + "(1)";
    for (const Stmt* l : nest) points += str(" * (", c_index_expression(l->extent), ")");
    line(1, str("const ", idx, " kiln_points = ", points, ";"));
    VectorPoints vp;
    if (out.mapping == GridMapping::kPointwise && !nest.empty() && options.vector_points)
      vp = plan_vector_points(*inner, *nest.back(), k.params);
    if (out.mapping == GridMapping::kPointwise) fast16_ = stores_only_16bit_floats(*inner, k.params);
    if (vp.vector > 0) {
      // Each thread takes `vector` consecutive points of the innermost loop (its extent is a
      // multiple), moving the contiguous buffers as one vector each.
      out.points_per_thread = vp.vector;
      line(1, str("for (", idx, " kiln_i = ", idx, "(blockIdx.x) * blockDim.x + threadIdx.x; kiln_i < kiln_points / ",
                  vp.vector, ";"));
      line(1, str("     kiln_i += ", idx, "(gridDim.x) * blockDim.x) {"));
      decode(nest, str("kiln_i * ", vp.vector), 2, "_base");
      for (const VectorAccess& a : vp.loads) {
        const auto& p = k.params[size_t(a.param)];
        line(2, str("__align__(16) ", c_storage_type(p.dtype), " p", kStagedParamBase + a.param, "[", vp.vector, "];"));
        line(2, str("kiln_load_vec(p", kStagedParamBase + a.param, ", p", a.param, " + (", c_index_expression(a.first), "));"));
      }
      for (const VectorAccess& a : vp.stores)
        line(2, str("__align__(16) ", c_storage_type(k.params[size_t(a.param)].dtype), " p", kStagedParamBase + a.param,
                    "[", vp.vector, "];"));
      line(2, "#pragma unroll");
      line(2, str("for (int kiln_j = 0; kiln_j < ", vp.vector, "; ++kiln_j) {"));
      line(3, str("const ", idx, " ", vp.var, " = ", vp.var, "_base + kiln_j;"));
      emit_sequential(vp.body, 3);
      line(2, "}");
      for (const VectorAccess& a : vp.stores)
        line(2, str("kiln_store_vec(p", a.param, " + (", c_index_expression(a.first), "), p", kStagedParamBase + a.param, ");"));
      line(1, "}");
    } else if (out.mapping == GridMapping::kPointwise) {
      line(1, str("for (", idx, " kiln_i = ", idx, "(blockIdx.x) * blockDim.x + threadIdx.x; kiln_i < kiln_points;"));
      line(1, str("     kiln_i += ", idx, "(gridDim.x) * blockDim.x) {"));
      decode(nest, "kiln_i", 2);
      emit_sequential(*inner, 2);
      line(1, "}");
    } else if (staging.in_registers) {
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
      if (cluster_mail(staging)) {
        for (size_t site = 0; site < staging.fused.size(); ++site) line(1, str("kiln_mail_init<", site, ">();"));
        line(1, "kiln_cluster_sync();  // every block's mail barriers are ready before any is signalled");
      }
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
    } else {
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
    os << "}\n";
    out.source = device_text(os.str());
    return out;
  }
};

}  // namespace

namespace {

// The first 8- or 4-bit dtype a scalar tree computes in, if any.
const DType* narrow_in(const lower::Scalar& s) {
  if (is_narrow(s.dtype)) return &s.dtype;
  for (const auto& a : s.args)
    if (const DType* d = narrow_in(*a)) return d;
  return nullptr;
}
const DType* narrow_in(const std::vector<Stmt>& body) {
  for (const Stmt& st : body) {
    if (is_narrow(st.dtype)) return &st.dtype;
    if (st.value)
      if (const DType* d = narrow_in(*st.value)) return d;
    if (const DType* d = narrow_in(st.body)) return d;
  }
  return nullptr;
}

}  // namespace

CudaKernelSource emit_cuda_kernel(const LoopKernel& k, const CudaEmitOptions& options) {
  // The prelude shares the CPU's conversion text, but no GPU has run it yet: refuse rather than
  // guess (the CPU target computes these dtypes).
  const DType* narrow = narrow_in(k.body);
  for (const auto& param : k.params)
    if (!narrow && is_narrow(param.dtype)) narrow = &param.dtype;
  if (narrow)
    throw Error(str("CUDA codegen: kernel ", k.name, " uses dtype ", dtype_name(*narrow),
                    "; the 8- and 4-bit types are supported on the CPU only"));
  Printer p{k, options, {}, 0, 0};
  return p.run();
}

std::string cuda_translation_unit(const std::vector<CudaKernelSource>& kernels) {
  std::string text = cuda_prelude();
  for (const auto& k : kernels) text += "\n" + k.source;
  return text;
}

}  // namespace kiln::codegen::cuda
