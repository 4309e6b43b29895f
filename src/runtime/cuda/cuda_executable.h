// The compiled GPU Executable: the CPU compile driver's lowered steps (fused kernels, library
// calls, buffer slots) run as NVRTC kernels and cuBLASLt matmuls on one stream, with device
// buffers kept per binding of the symbolic dims so a captured CUDA graph can be replayed. Why:
// kiln::compile_cuda's product; the run loop and the graph capture live here.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codegen/cuda/attention_kernel.h"
#include "codegen/cuda/cuda_emitter.h"
#include "codegen/cuda/library_kernels.h"
#include "kiln/cuda.h"
#include "lower/memory_plan.h"
#include "runtime/cuda/cublaslt_matmul.h"
#include "runtime/cuda/cudnn_conv.h"
#include "runtime/cuda/cuda_module.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/device_tensor.h"
#include "runtime/executable.h"

namespace kiln::cuda {

// A matmul's fused `act(x @ w + bias)` epilogue (match_epilogue in cuda_plan.cc).
struct EpilogueMatch {
  MatmulEpilogue epilogue = MatmulEpilogue::None;
  const Value* bias = nullptr;
  const Value* residual = nullptr;  // added as cuBLASLt's C operand (beta = 1); null: none
  const Value* out = nullptr;
};



// The intermediates of one binding in one device arena: plan.offsets[i] is values[i]'s offset.
struct DeviceArenaPlan {
  std::vector<const Value*> values;
  lower::MemoryPlan plan;
};

// compile_cuda with each row form's own options (rows/select_row_form.h) instead of their defaults:
// for kiln-gpu-bench's table of row forms and the row-form tests. options.row_form, when set, still
// names the form to force.
std::shared_ptr<Executable> compile_cuda_with_row_forms(const Graph& g, const CudaCompileOptions& options,
                                                        const codegen::cuda::RowFormOptions& forms);

// The emitter's options compile_cuda uses for `options` and `forms` on a GPU like `device` (no GPU
// needed: the row-form tests print the kernels compile_cuda would compile).
codegen::cuda::CudaEmitOptions cuda_emit_options(const CudaCompileOptions& options,
                                                 const codegen::cuda::RowFormOptions& forms,
                                                 const codegen::cuda::RowDevice& device);

class CudaExecutable : public Executable {
 public:
  // Host in, host out: uploads, runs (or replays the captured graph), downloads.
  std::vector<HostTensor> run(const std::vector<HostTensor>& inputs, Scoreboard* sb) override;
  std::string explain() const override;
  const CompileStats& stats() const override { return stats_; }
  // The same for every run: what the program's library and host steps are (set by compile_cuda).
  RunStats last_run() const override { return run_stats_; }
  const std::string& source() const override { return source_; }

  // The device-side steps of run(), for benchmarks that keep data on the GPU: bind() copies the
  // inputs into the executable's input buffers (allocating buffers for new shapes), launch()
  // queues one run (a graph replay once captured), outputs() waits and copies the results back.
  void bind(const std::vector<HostTensor>& inputs);
  void launch();
  void synchronize() const { stream_->synchronize(); }
  std::vector<HostTensor> outputs();
  // Device in, device out (eager ops, static shapes): reads `inputs` in place, queues one run
  // without a CUDA graph on stream_, and returns the outputs as tensors a later run does not
  // overwrite (fresh buffers from the caching allocator). With `sb`, each step is timed between
  // CUDA events, which waits for the device.
  std::vector<DeviceTensor> run_device(const std::vector<DeviceTensor>& inputs, Scoreboard* sb);
  // Where the intermediates live for these dims: offsets in one device arena per binding.
  DeviceArenaPlan device_memory_plan(const std::map<std::string, int64_t>& dims) const;
  // Kernel launches (and library calls) one run queues.
  int launches_per_run() const { return int(lowered->steps.size() - skipped_steps_.size() - host_steps_.size()); }

  // Filled by compile_cuda.
  std::shared_ptr<runtime::CompiledExecutable> lowered;  // schedule, Loop IR, slots
  std::vector<codegen::cuda::CudaKernelSource> kernel_sources;
  std::unique_ptr<CudaModule> module;
  std::vector<CUfunction> functions;  // per lowered kernel
  CudaCompileOptions options;
  codegen::cuda::RowFormOptions row_forms;  // each row form's options (the launcher reads persistent_clusters)
  CompileStats stats_;
  RunStats run_stats_;
  std::string source_;
  std::map<const Value*, DeviceTensor> constants;
  std::shared_ptr<Stream> stream_;  // shared: eager ops (gpu_eager.cc) all run on one stream
  // Matmul step -> the epilogue folded into it, and the kernel step that therefore never runs.
  std::map<size_t, EpilogueMatch> epilogues_;
  std::map<size_t, size_t> epilogue_into_;
  std::set<size_t> skipped_steps_;
  std::set<size_t> host_steps_;
  std::map<std::string, CUfunction> attention_functions_;  // fused attention kernels by name
  std::map<std::string, CUfunction> library_functions_;    // library kernels (library_kernels.h) by name
  bool uses_status_ = false;  // some kernel reports integer division by zero through the status word  // shape arithmetic: computed on the CPU at bind time, no launch

 private:
  struct Binding;  // buffers, matmul plans and the captured graph for one set of dims
  struct StepPlan {
    bool library = false;
    bool skipped = false;  // a kernel folded into the previous matmul's cuBLASLt epilogue
    int kernel = -1;
    CUfunction fn = nullptr;
    LaunchShape shape;
    std::vector<const Value*> buffers;  // kernel: params; library: inputs then outputs
    std::unique_ptr<LtMatmul> matmul;
    std::optional<codegen::cuda::FusedAttentionArgs> attention;  // pointers filled at each enqueue
    std::array<int64_t, 4> attention_offsets{};  // bytes into q's, k's, v's, the mask's buffers (views)
    double attention_flops = 0;
    // A library kernel's launches (gather, concat, conv...: library_kernels.h), with their scratch.
    struct LibraryLaunch {
      codegen::cuda::LibraryLaunch spec;
      CUfunction fn = nullptr;
      LaunchShape shape;
      DeviceTensor scratch;
    };
    std::vector<LibraryLaunch> library_launches;
    // conv2d on cuDNN; library_launches then hold the direct kernel, kept until the first run
    // times both on the binding's shapes (choose_conv_forms) and drops the slower.
    std::unique_ptr<CudnnConv> conv;
    DeviceTensor conv_workspace;
  };
  void plan_attention(const Node& n, const std::map<std::string, int64_t>& dims, StepPlan& plan) const;
  void plan_library_kernel(const Node& n, const std::map<std::string, int64_t>& dims, int sms, StepPlan& plan) const;
  Binding& binding_for(const std::vector<HostTensor>& inputs);
  Binding& binding_for_dims(const std::map<std::string, int64_t>& dims, bool external_inputs);
  void enqueue(Binding& b);
  void record(Binding& b, Scoreboard* sb);
  void choose_conv_forms(Binding& b);  // conv_forms.cc

  std::map<std::vector<int64_t>, std::unique_ptr<Binding>> bindings_;
  Binding* current_ = nullptr;
  std::mutex run_mutex_;
};

}  // namespace kiln::cuda
