// Loop IR -> CUDA C++ (see cuda_emitter.h). The loop nest is split where it stops being a perfect
// nest: the loops above that point go to the grid, the statements below run per point (pointwise)
// or per row with the row's loops strided over the block's threads (row reductions).
#include "codegen/cuda/cuda_emitter.h"

#include <algorithm>
#include <sstream>

#include "codegen/common/c_emitter.h"
#include "codegen/cuda/row_staging.h"
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
        line(depth, str("const ", ct(st.dtype), " ", st.name, " = ", c_scalar_expression(*st.value), ";"));
        break;
      case Stmt::kStore: {
        // Staged outputs (row_staging.h) are numbered from kStagedParamBase and share the dtype.
        std::string text = str("p", st.param, "[", c_index_expression(st.index), "] = ",
                               c_store_expression(k.params[size_t(st.param % kStagedParamBase)].dtype,
                                                  c_scalar_expression(*st.value)), ";");
        line(depth, single_writer ? "if (threadIdx.x == 0) " + text : text);
        break;
      }
      case Stmt::kAccInit:
        line(depth, str(ct(st.dtype), " ", st.name, " = ", c_accumulator_identity(st.dtype, st.fold), ";"));
        break;
      case Stmt::kAccUpdate: line(depth, c_accumulator_update(st)); break;
      case Stmt::kFor: KILN_ASSERT(false && "loops are not leaves");
    }
  }

  // A row's statements: its loops are strided over the block's threads; accumulators they update
  // are combined across the block after each loop, so every thread continues with the row's value.
  void emit_row(const std::vector<Stmt>& body, int depth) {
    for (const Stmt& st : body) {
      if (st.kind != Stmt::kFor) {
        emit_leaf(st, depth, /*single_writer=*/true);
        continue;
      }
      std::vector<const Stmt*> accs = c_outer_accumulators(st.body);
      const std::string before = str("_before", loops_++);
      for (const Stmt* a : accs) {
        line(depth, str(ct(a->dtype), " ", a->name, before, " = ", a->name, ";"));
        line(depth, str(a->name, " = ", c_accumulator_identity(a->dtype, a->fold), ";"));
      }
      line(depth, "#pragma unroll 4");
      line(depth, str("for (", idx, " ", st.var, " = threadIdx.x; ", st.var, " < ", c_index_expression(st.extent), "; ",
                      st.var, " += kiln_block) {"));
      emit_sequential(st.body, depth + 1);
      line(depth, "}");
      for (const Stmt* a : accs) {
        std::string T = ct(a->dtype);
        line(depth, str(a->name, " = kiln_block_reduce<", T, ">(", a->name, ", [](", T, " a, ", T, " b) { return ",
                        c_fold_combine(a->dtype, a->fold, "a", "b"), "; });"));
        line(depth, str(a->name, " = ", c_fold_combine(a->dtype, a->fold, a->name + before, a->name), ";"));
        ++reductions;
      }
    }
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
  void decode(const std::vector<const Stmt*>& nest, const std::string& linear, int depth) {
    if (nest.empty()) return;
    line(depth, str(idx, " kiln_rest = ", linear, ";"));
    for (size_t i = nest.size(); i-- > 0;) {
      std::string e = c_index_expression(nest[i]->extent);
      if (i == 0) {
        line(depth, str("const ", idx, " ", nest[i]->var, " = kiln_rest;"));
      } else {
        line(depth, str("const ", idx, " ", nest[i]->var, " = kiln_rest % (", e, ");"));
        line(depth, str("kiln_rest /= (", e, ");"));
      }
    }
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
    out.mapping = contains_loop(*inner) ? GridMapping::kRowBlock : GridMapping::kPointwise;
    for (const Stmt* l : nest) out.outer_extents.push_back(l->extent);
    if (out.mapping == GridMapping::kRowBlock) {
      int64_t widest = 1;
      bool known = true;
      for (const Stmt& st : *inner) {
        if (st.kind != Stmt::kFor) continue;
        out.row_extents.push_back(st.extent);
        if (st.extent.is_constant()) widest = std::max(widest, st.extent.constant());
        else known = false;
      }
      // A power of two from one warp up to 512 threads giving each thread ~16 elements of the row
      // (1024 threads for very long rows). Fewer, busier threads per row means more rows in flight
      // per multiprocessor: a row's passes and block reductions are a chain of latencies, hidden
      // only by other rows (one thread per element made 1024-wide rows latency-bound).
      int threads = 32;
      while (threads * 16 < widest && threads < 512) threads *= 2;
      if (!known || widest >= 65536) threads = known ? 1024 : 256;
      out.block_threads = threads;
    }

    os << "// " << k.name << ": " << k.source_ops.size() << " ops fused:";
    for (const auto& op : k.source_ops) os << " " << op;
    os << (out.mapping == GridMapping::kPointwise ? " (one thread per point)" : " (one block per row)") << "\n";
    os << "extern \"C\" __global__ void __launch_bounds__(1024) " << k.name << "(const KilnArgs kiln_args) {\n";
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
    if (out.mapping == GridMapping::kPointwise) {
      line(1, str("for (", idx, " kiln_i = ", idx, "(blockIdx.x) * blockDim.x + threadIdx.x; kiln_i < kiln_points;"));
      line(1, str("     kiln_i += ", idx, "(gridDim.x) * blockDim.x) {"));
      decode(nest, "kiln_i", 2);
      emit_sequential(*inner, 2);
      line(1, "}");
    } else {
      // The row loop's bound is the same for every thread of a block, so the block-wide
      // reductions inside are reached by all of them.
      line(1, str("constexpr int kiln_block = ", out.block_threads, ";  // launched with exactly this many threads"));
      std::vector<std::string> grid_vars;
      for (const Stmt* l : nest) grid_vars.push_back(l->var);
      RowStaging staging = plan_row_staging(*inner, grid_vars, k.params, options.shared_budget_bytes);
      emit_staging_declarations(staging, out);
      line(1, str("for (", idx, " kiln_row = blockIdx.x; kiln_row < kiln_points; kiln_row += gridDim.x) {"));
      decode(nest, "kiln_row", 2);
      emit_staged_copies(staging, /*outputs=*/false, /*row_invariant=*/false, 2);
      emit_row(staging.body, 2);
      emit_staged_copies(staging, /*outputs=*/true, false, 2);
      if (staging.any_per_row()) line(2, "__syncthreads();  // the next row's staging reuses the shared rows");
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
