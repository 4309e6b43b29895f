// Loop IR -> CUDA C++ (see cuda_emitter.h). The loop nest is split where it stops being a perfect
// nest: the loops above that point go to the grid, the statements below run per point (pointwise)
// or per row in the form the row-form selector picks (rows/select_row_form.h), each form printing
// its own row kernel (rows/*.cc) over the row loops emit_row walks here.
#include "codegen/cuda/cuda_emitter.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "codegen/common/c_emitter.h"
#include "codegen/cuda/kernel_printer.h"
#include "codegen/cuda/rows/select_row_form.h"
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


bool contains_loop(const std::vector<Stmt>& body) {
  for (const Stmt& st : body)
    if (st.kind == Stmt::kFor) return true;
  return false;
}

}  // namespace

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

// The shared scalar expression; where fast16_ says every value is rounded to a 16-bit float
// before it is stored, kiln_exp becomes kiln_exp16 (ex2.approx) and kiln_gelu kiln_gelu16.
std::string KernelPrinter::expression(const lower::Scalar& s) {
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

// Sequential statements, as on the CPU (inside one thread).
void KernelPrinter::emit_sequential(const std::vector<Stmt>& body, int depth) {
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

void KernelPrinter::emit_leaf(const Stmt& st, int depth, bool single_writer) {
  switch (st.kind) {
    case Stmt::kLet:
      line(depth, str("const ", ct(st.dtype), " ", st.name, " = ", expression(*st.value), ";"));
      break;
    case Stmt::kStore: {
      // Staged outputs (rows/row_plan.h) are numbered from kStagedParamBase and share the dtype.
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
void KernelPrinter::emit_row(const std::vector<Stmt>& body, int depth, const RowPlan& staging) {
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

void KernelPrinter::emit_pending_refill(int depth) {
  if (!pending_refill_) return;
  auto refill = std::move(pending_refill_);
  pending_refill_ = nullptr;
  refill(depth);
}

// Declares the loop variables of `nest` from the linear index `linear` (innermost fastest).
// `last_suffix` renames the innermost variable (vector points decode the first point's).
// `all_suffix` renames every variable (a prefetch decodes the next row's).
void KernelPrinter::decode(const std::vector<const Stmt*>& nest, const std::string& linear, int depth,
                           const std::string& last_suffix, const std::string& all_suffix) {
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

CudaKernelSource KernelPrinter::run() {
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
  RowPlan staging;
  if (out.mapping == GridMapping::kRowBlock) {
    for (const Stmt& st : *inner)
      if (st.kind == Stmt::kFor) out.row_extents.push_back(st.extent);
    staging = select_row_form(*inner, grid_vars, k.params, options.rows, options.device);
    out.block_threads = staging.threads;
    out.cluster = staging.cluster;
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
    bounds = str("__launch_bounds__(", staging.threads, ", ", std::max(1, staging.occupancy_threads / staging.threads), ")");
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
    emit_register_row_kernel(staging, nest, out);
  } else {
    emit_staged_row_kernel(staging, nest, out);
  }
  os << "}\n";
  out.source = device_text(os.str());
  return out;
}

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
  KernelPrinter p{k, options, {}, 0, 0};
  return p.run();
}

namespace {
// The kernel's code with its own name (as a whole identifier) blanked and // comments dropped: two
// kernels with equal keys compile to the same machine code.
std::string code_identity(const CudaKernelSource& k) {
  auto identifier_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  out.reserve(k.source.size());
  const std::string& s = k.source;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 2, "//") == 0) {
      i = s.find('\n', i);
      if (i == std::string::npos) break;
      continue;
    }
    if (s.compare(i, k.name.size(), k.name) == 0 && (i == 0 || !identifier_char(s[i - 1])) &&
        (i + k.name.size() == s.size() || !identifier_char(s[i + k.name.size()]))) {
      out += "@";
      i += k.name.size();
      continue;
    }
    out += s[i++];
  }
  return out;
}
}  // namespace

CudaTranslationUnit cuda_translation_unit(const std::vector<CudaKernelSource>& kernels) {
  CudaTranslationUnit tu;
  tu.source = cuda_prelude();
  std::map<std::string, std::string> entry_of_code;
  for (const auto& k : kernels) {
    auto [it, first] = entry_of_code.emplace(code_identity(k), k.name);
    tu.function_of.push_back(it->second);
    if (!first) continue;
    tu.source += "\n" + k.source;
    ++tu.distinct_kernels;
  }
  return tu;
}

}  // namespace kiln::codegen::cuda
