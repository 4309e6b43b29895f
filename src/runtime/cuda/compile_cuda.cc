// compile_cuda (see include/kiln/cuda.h): lower with the shared front half, pick the host steps and
// the matmul epilogues cuBLASLt takes, print CUDA, NVRTC -> cubin through the compile cache, load it.
// Running it is CudaExecutable's (cuda_binding.cc, cuda_launch.cc).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>

#include "codegen/cuda/library_kernels.h"
#include "codegen/cuda/step_placement.h"
#include "kiln/error.h"
#include "runtime/compile_cache.h"
#include "runtime/cuda_lowering.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_executable_internal.h"
#include "runtime/cuda/nvrtc_compiler.h"

namespace kiln {

namespace cuda {
namespace {

using Clock = std::chrono::steady_clock;
double millis(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// NVRTC's options: C++17, two warnings the generated code trips harmlessly, and its optimizer on
// every core (--split-compile, NVRTC 12.4+; KILN_NVRTC_THREADS=N caps it, 1 turns it off).
std::vector<std::string> nvrtc_options() {
  std::vector<std::string> options = {"--std=c++17", "-diag-suppress=550,177"};
  const NvrtcStatus& nv = nvrtc_status();
  const char* threads = std::getenv("KILN_NVRTC_THREADS");
  if (nv.major * 100 + nv.minor >= 1204) options.push_back(str("--split-compile=", threads ? threads : "0"));
  return options;
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), "cannot read ", path);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

}  // namespace cuda

std::string cuda_unavailable_reason() {
  const cuda::DriverStatus& st = cuda::driver_status();
  if (!st.has_device()) return st.message;
  if (!cuda::nvrtc_status().loaded) return cuda::nvrtc_status().message;
  return "";
}

namespace cuda {

codegen::cuda::CudaEmitOptions cuda_emit_options(const CudaCompileOptions& options,
                                                 const codegen::cuda::RowFormOptions& forms,
                                                 const codegen::cuda::RowDevice& device) {
  codegen::cuda::CudaEmitOptions emit;
  emit.device = device;
  emit.rows = forms;
  if (!options.row_form.empty()) emit.rows.form = options.row_form;
  emit.vector_points = options.vector_points;
  return emit;
}

std::shared_ptr<Executable> compile_cuda_with_row_forms(const Graph& g, const CudaCompileOptions& options,
                                                        const codegen::cuda::RowFormOptions& forms) {
  const Clock::time_point t0 = Clock::now();
  auto exe = std::make_shared<CudaExecutable>();
  exe->options = options;
  exe->row_forms = forms;
  codegen::cuda::check_cuda_graph(g);  // before the device: the graph's problem is the one to report
  codegen::cuda::check_row_form(options.row_form.empty() ? forms.form : options.row_form);
  CudaDevice& device = CudaDevice::get(options.device);
  device.make_current();
  // The fused attention kernel needs mma.sync on f16/bf16 and cp.async (sm_80).
  const bool fused_attention = options.fused_attention && device.info().compute_major >= 8;
  runtime::CudaLowering lowering = runtime::lower_for_cuda(g, options.base, fused_attention, "kiln_cu_");
  if (!lowering.refusal.empty()) throw Error(lowering.refusal);
  exe->lowered = lowering.program;
  const runtime::CompiledExecutable& low = *exe->lowered;
  exe->host_steps_ = lowering.placement.host_steps;
  const std::set<codegen::cuda::FusedAttentionKernel>& attention_kernels = lowering.placement.attention_kernels;
  if (options.fuse_epilogues) {
    for (size_t i = 0; i + 1 < low.steps.size(); ++i) {
      if (!low.steps[i].library || low.steps[i].node->op != Op::MatMul) continue;
      const Value* y = low.steps[i].node->outputs[0];
      if (y->uses.size() != 1) continue;
      // The consumer group of the product must be the very next step.
      auto g = low.schedule.group_of.find(y->uses[0].user->outputs[0]);
      if (g == low.schedule.group_of.end() || size_t(g->second) != i + 1) continue;
      if (auto m = match_epilogue(*low.steps[i].node, low, i + 1)) {
        exe->epilogues_[i] = *m;
        exe->epilogue_into_[i] = i + 1;
        exe->skipped_steps_.insert(i + 1);
        if (const Value* gelu = gelu_after_reshape(*m, low, i + 2)) {
          exe->epilogues_[i].epilogue = MatmulEpilogue::GeluBias;
          exe->epilogues_[i].out = gelu;
          exe->skipped_steps_.insert(i + 2);
        }
      }
    }
  }
  const codegen::cuda::RowDevice row_device = codegen::cuda::RowDevice::from_limits(
      device.info().compute_major, int64_t(device.info().max_shared_per_block_optin),
      int64_t(device.info().max_shared_per_multiprocessor));
  const codegen::cuda::CudaEmitOptions emit = cuda_emit_options(options, forms, row_device);
  for (const auto& lk : low.kernels) exe->kernel_sources.push_back(codegen::cuda::emit_cuda_kernel(lk.kernel, emit));
  const codegen::cuda::CudaTranslationUnit unit = codegen::cuda::cuda_translation_unit(exe->kernel_sources);
  exe->source_ = unit.source;
  exe->source_ += codegen::cuda::fused_attention_source(attention_kernels);
  const std::set<std::string>& library_kernels = lowering.placement.library_kernels;
  exe->source_ += codegen::cuda::library_kernels_source(library_kernels);
  exe->uses_status_ |= !library_kernels.empty();  // gather's index checks
  for (const auto& k : exe->kernel_sources) exe->uses_status_ |= k.source.find(", kiln_status)") != std::string::npos;
  exe->stats_.kernels_generated = low.stats_.kernels_generated;
  exe->stats_.library_calls = low.stats_.library_calls;
  for (size_t i = 0; i < low.steps.size(); ++i) {
    if (!low.steps[i].library) continue;
    ++exe->run_stats_.library_steps;
    if (exe->host_steps_.count(i)) exe->run_stats_.reference_fallbacks.push_back(std::string(op_name(low.steps[i].node->op)));
  }
  const Clock::time_point t1 = Clock::now();
  exe->stats_.lower_ms = millis(t0, t1);

  if (!low.kernels.empty() || !attention_kernels.empty() || !library_kernels.empty()) {
    const std::string arch = device.info().arch();
    const NvrtcStatus& nv = nvrtc_status();
    KILN_CHECK(nv.loaded, nv.message);
    const std::string identity = str("nvrtc ", nv.major, ".", nv.minor, " ", arch);
    runtime::CompileCache cache(compile_cache_dir(options.base));
    const std::vector<std::string> flags = nvrtc_options();
    exe->stats_.cache_key = runtime::CompileCache::key(exe->source_, identity, flags);
    auto build = [&](const std::string& src_path, const std::string& out_path) {
      (void)src_path;
      std::vector<char> cubin = nvrtc_compile(exe->source_, "kiln_graph.cu", arch, flags);
      std::ofstream out(out_path, std::ios::binary);
      out.write(cubin.data(), std::streamsize(cubin.size()));
      KILN_CHECK(out.good(), "cannot write ", out_path);
    };
    const Clock::time_point c0 = Clock::now();
    std::string path = options.base.use_cache
                           ? cache.get_or_build(exe->stats_.cache_key, exe->source_, build, &exe->stats_.cache_hit)
                           : "";
    std::vector<char> cubin;
    if (path.empty()) cubin = nvrtc_compile(exe->source_, "kiln_graph.cu", arch, flags);
    else cubin = read_file(path);
    const Clock::time_point c1 = Clock::now();
    exe->stats_.compile_ms = exe->stats_.cache_hit ? 0 : millis(c0, c1);
    exe->stats_.shared_object = path;
    exe->module = std::make_unique<CudaModule>(cubin);
    for (size_t i = 0; i < exe->kernel_sources.size(); ++i) {
      const codegen::cuda::CudaKernelSource& k = exe->kernel_sources[i];
      exe->functions.push_back(exe->module->function(unit.function_of[i]));
      // Static and dynamic shared memory together may exceed the 48 KiB a kernel gets without
      // opting in even when the dynamic part alone does not (48 KiB of staged rows did).
      if (k.shared_bytes > 0) allow_dynamic_shared(exe->functions.back(), int(k.shared_bytes));
      if (k.cluster > 8) allow_non_portable_cluster(exe->functions.back());
    }
    for (const codegen::cuda::FusedAttentionKernel& k : attention_kernels) {
      const std::string name = codegen::cuda::fused_attention_kernel_name(k);
      CUfunction fn = exe->module->function(name);
      allow_dynamic_shared(fn, int(codegen::cuda::fused_attention_shared_bytes(k.head_dim)));
      exe->attention_functions_[name] = fn;
    }
    for (const std::string& name : library_kernels) exe->library_functions_[name] = exe->module->function(name);
    exe->stats_.load_ms = millis(c1, Clock::now());
  }
  exe->stream_ = std::make_unique<Stream>();
  for (const auto& n : low.graph->nodes())
    if (n->op == Op::Constant)
      exe->constants[n->outputs[0]] = DeviceTensor::upload(n->attrs.get_tensor("value"), *exe->stream_);
  exe->stream_->synchronize();
  return exe;
}

}  // namespace cuda

std::shared_ptr<Executable> compile_cuda(const Graph& g, const CudaCompileOptions& options) {
  return cuda::compile_cuda_with_row_forms(g, options, {});
}

}  // namespace kiln
