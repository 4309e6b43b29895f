// Helpers the CUDA row-form tests share (rows_*_test.cc, cuda_codegen_test.cc): emitting one row
// kernel with given options, the devices the codegen tests plan for, comparing compile_cuda with
// the interpreter, and the graph every row form runs against the interpreter on a GPU.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/cuda/cuda_emitter.h"
#include "kiln/cuda.h"
#include "kiln/interp.h"
#include "runtime/cuda/cuda_executable.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/executable.h"
#include "unit/compile/compile_test_util.h"

namespace kiln::testing {

inline std::string skip_reason() { return cuda_unavailable_reason(); }

inline CudaCompileOptions cuda_options() {
  CudaCompileOptions o;
  o.base.cache_dir = test_cache_dir();
  return o;
}

inline void expect_cuda_matches(const Graph& g, const std::vector<std::vector<HostTensor>>& runs,
                                const std::string& label, const CudaCompileOptions& options = cuda_options(),
                                const codegen::cuda::RowFormOptions& forms = {}) {
  auto exe = cuda::compile_cuda_with_row_forms(g, options, forms);
  for (size_t r = 0; r < runs.size(); ++r) {
    std::vector<HostTensor> want = interp::run(g, runs[r]);
    std::vector<HostTensor> got;
    try {
      got = exe->run(runs[r]);
    } catch (const std::exception& e) {  // name the form that failed (the error names the kernel)
      ADD_FAILURE() << label << " run " << r << ": " << e.what() << "\n" << exe->explain().substr(0, 8000);
      return;
    }
    ASSERT_EQ(got.size(), want.size()) << label;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(compare_tensors(got[i], want[i]), "") << label << " run " << r << " output " << i << "\n"
                                                      << exe->explain().substr(0, 4000);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(check_row_statistics(g, runs[r], i, got[i]), "") << label << " run " << r << " output " << i;
  }
}

// The one kernel of softmax / layer_norm (weights x) over [rows, cols] of `t`, emitted with `o`;
// `tag` keeps kernel names apart when several are compiled together.
inline codegen::cuda::CudaKernelSource row_kernel(Op op, DType t, int64_t rows, int64_t cols,
                                                  const codegen::cuda::CudaEmitOptions& o, const std::string& tag) {
  Graph g("rows");
  Value* x = g.add_input("x", TensorType{t, {SymInt(rows), SymInt(cols)}, Device::CPU});
  Value* y;
  if (op == Op::LayerNorm) {
    Value* w = g.add_input("w", TensorType{t, {SymInt(cols)}, Device::CPU});
    y = g.add(Op::LayerNorm, {x, w, w});
  } else {
    y = g.add(op, {x});
  }
  g.set_outputs({y});
  auto low = runtime::lower_for_target(g, CompileOptions{}, str("kiln_", op_name(op), "_", dtype_name(t), "_", cols, tag, "_"));
  EXPECT_EQ(low->kernels.size(), 1u);
  return codegen::cuda::emit_cuda_kernel(low->kernels[0].kernel, o);
}

// An sm_90 with clusters of up to `max_cluster` blocks, without bulk copies (its multiprocessor's
// shared memory unknown) or cluster mail.
inline codegen::cuda::CudaEmitOptions cluster_emit_options(int max_cluster) {
  codegen::cuda::CudaEmitOptions o;
  o.device.compute_major = 9;
  o.rows.registers.max_cluster = max_cluster;
  o.rows.mail.enabled = false;
  return o;
}

// An H200's shared memory (bulk rows), clusters of up to 16, without cluster mail.
inline codegen::cuda::CudaEmitOptions bulk_emit_options() {
  codegen::cuda::CudaEmitOptions o;
  o.device.compute_major = 9;
  o.device.shared_per_multiprocessor = 228 * 1024;
  o.device.shared_per_block = 226 * 1024;
  o.rows.mail.enabled = false;
  return o;
}

// NVRTC compiles `kernels` as one program for sm_90 (skips where libnvrtc does not load).
inline void expect_kernels_compile(const std::vector<codegen::cuda::CudaKernelSource>& kernels, const std::string& file) {
  if (!cuda::nvrtc_status().loaded) GTEST_SKIP() << cuda::nvrtc_status().message;
  std::string source = codegen::cuda::cuda_translation_unit(kernels).source;
  EXPECT_NO_THROW(cuda::nvrtc_compile(source, file, "sm_90", {"--std=c++17", "-diag-suppress=550,177"}));
}

// One row form on a GPU against the interpreter: softmax, log_softmax, layer_norm, a row max and
// a residual add before layer norm (two per-row inputs: two copies a stage in bulk rows), at
// whole-chunk and odd widths, in f32 and bf16 (and f16 with `f16`), two runs each.
inline void expect_row_form_matches(const std::string& name, const CudaCompileOptions& o,
                                    const codegen::cuda::RowFormOptions& forms, bool f16 = false) {
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    if (t == DType::F16 && !f16) continue;
    // Every width in one graph: one compile per form and dtype.
    Graph g("rows");
    std::vector<Value*> outs;
    const std::vector<std::vector<int64_t>> widths = {{6, 4096}, {3, 2050}, {2, 9999}, {65, 64}, {2, 20000}, {3, 33333}};
    for (const auto& dims : widths) {
      Value* x = g.add_input(str("x", dims[1]), TensorType{t, {SymInt(dims[0]), SymInt(dims[1])}, Device::CPU});
      Value* w = g.add_input(str("w", dims[1]), TensorType{t, {SymInt(dims[1])}, Device::CPU});
      Value* r = g.add_input(str("r", dims[1]), TensorType{t, {SymInt(dims[0]), SymInt(dims[1])}, Device::CPU});
      Value* mx = g.add(Op::ReduceMax, {x}, {{"axes", std::vector<int64_t>{1}}, {"keepdim", int64_t(1)}});
      Value* residual_norm = g.add(Op::LayerNorm, {g.add(Op::Add, {x, r}), w, w});
      for (Value* y : {g.add(Op::Softmax, {x}), g.add(Op::LogSoftmax, {x}), g.add(Op::LayerNorm, {x, w, w}), mx, residual_norm})
        outs.push_back(y);
    }
    g.set_outputs(outs);
    std::vector<std::vector<HostTensor>> runs(2);
    for (uint64_t r = 0; r < 2; ++r)
      for (const auto& dims : widths) {
        runs[r].push_back(HostTensor::random(t, dims, 60 + r + uint64_t(dims[1]), -5, 5));
        runs[r].push_back(HostTensor::random(t, {dims[1]}, 70 + r, 0.5, 1.5));
        runs[r].push_back(HostTensor::random(t, dims, 75 + r + uint64_t(dims[1]), -2, 2));
      }
    expect_cuda_matches(g, runs, str(name, " ", dtype_name(t)), o, forms);
  }
}

// The options of one row form variant on a GPU (expect_row_form_matches): a row split over a
// cluster is forced for long rows by allowing `per_thread` elements a thread (clusters of 16 by
// blocks of at most 512 threads); bulk rows are forced from `bulk_min` elements a thread.
struct RowFormVariant {
  const char* name; bool registers; int per_thread; int cluster; bool prefetch; bool fuse = true; bool chunks = true;
  int bulk_min = 1 << 20;  // elements a thread from which rows are bulk rows (default: never here)
  int occupancy = 1024;
  bool mail = false;       // fused reductions across a cluster by mail
  bool weights_in_shared = true;  // split over a cluster, chunked weights from a shared-memory copy
};
inline void expect_row_variant_matches(const RowFormVariant& v) {
  CudaCompileOptions o = cuda_options();
  codegen::cuda::RowFormOptions f;
  if (!v.registers) o.row_form = "staged_rows";
  f.registers.max_per_thread = v.per_thread, f.registers.max_cluster = v.cluster;
  f.registers.prefetch = v.prefetch, f.fused.enabled = v.fuse, f.registers.chunks = v.chunks;
  f.bulk.min_per_thread = v.bulk_min, f.registers.occupancy_threads = v.occupancy, f.mail.enabled = v.mail;
  f.registers.weights_in_shared = v.weights_in_shared;
  if (v.cluster == 16) f.registers.preferred_threads = 32, f.registers.max_threads = 512;  // rows split 16 ways
  expect_row_form_matches(v.name, o, f, /*f16=*/std::string(v.name) == "registers");
}

}  // namespace kiln::testing
