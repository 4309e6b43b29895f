// The CUDA target (kiln::compile_cuda behind the Target interface) and the targets by name. Why:
// `--device cuda` in every command, the benchmarks and `kiln dump` reach the GPU through one
// object that carries the GPU's settings; built in every build (compile_cuda says clearly where
// there is no CUDA backend or no device).
#include <map>
#include <mutex>

#include "codegen/cuda/channels_last.h"
#include "codegen/cuda/prepare_graph.h"
#include "kiln/error.h"
#include "kiln/target.h"
#include "passes/constant_folding.h"
#include "runtime/cuda_lowering.h"
#include "runtime/host_segments.h"

namespace kiln {

namespace {

class CudaTarget final : public Target {
 public:
  explicit CudaTarget(const CudaCompileOptions& options) : options_(options) {}
  TargetKind kind() const override { return TargetKind::Cuda; }
  std::string description() const override { return cuda_device_description(options_.device); }
  std::string unavailable_reason() const override { return cuda_unavailable_reason(); }

  // Attention stays whole only where the fused kernel is on.
  OptimizeOptions optimize_options() const override {
    OptimizeOptions o = Target::optimize_options();
    if (!options_.fused_attention) o.target.native_ops.erase(Op::Attention);
    const bool fused_attention = options_.fused_attention;
    o.target_passes.push_back({"cuda-prepare-graph",
                               "split into slices (views), attention the fused kernel cannot run into primitives, "
                               "attention read through a heads-merging permute written in that layout",
                               [fused_attention](Graph& g) { return codegen::cuda::prepare_graph_for_cuda(g, fused_attention); }});
    // Depthwise convs channels-last where that cancels permutes (ConvNeXt); they run on Kiln's
    // kernel, so not where cuDNN takes depthwise convs (CudaCompileOptions::depthwise_kernel off).
    if (options_.depthwise_kernel)
      o.target_passes.push_back({"cuda-channels-last",
                                 "depthwise convs channels-last, the permutes around them cancelled or sunk to the graph's edges",
                                 [](Graph& g) { return codegen::cuda::channels_last_depthwise(g); }});
    // The weights those rewrites reshape and permute (patch convs' [O, C, kh, kw] -> [C*kh*kw, O],
    // channels-last constants) become constants once, not a permute kernel every run.
    OptimizeOptions caps;
    caps.max_folded_constant_bytes = o.max_folded_constant_bytes;
    caps.max_folded_growth_bytes = o.max_folded_growth_bytes;
    o.target_passes.push_back({"cuda-fold-constants", "fold the constant subgraphs the target passes wrote (weight layouts)",
                               [caps](Graph& g) { return passes::ConstantFolding(caps).run(g); }});
    return o;
  }

  // compile_cuda's own checks, without a device: it keeps attention whole as the option says (on a
  // GPU older than sm_80 compile_cuda decomposes it instead).
  // A graph with control flow, sequences, optionals or strings is cut at those nodes
  // (runtime/host_segments.h): the segments between them are what the GPU must take.
  std::string refusal(const Graph& optimized) const override {
    if (!runtime::has_host_nodes(optimized))
      return runtime::lower_for_cuda(optimized, CompileOptions{}, options_.fused_attention, "kiln_cu_").refusal;
    std::vector<runtime::GraphPiece> pieces = runtime::split_at_host_nodes(optimized);
    for (const runtime::GraphPiece& p : pieces) {
      if (!p.segment) continue;
      std::string why = runtime::lower_for_cuda(*p.segment, CompileOptions{}, options_.fused_attention, "kiln_cu_").refusal;
      if (!why.empty()) return why;
    }
    return "";
  }

  std::shared_ptr<Executable> compile(const Graph& optimized, const CompileOptions& options) const override {
    require_available();
    CudaCompileOptions o = options_;
    o.base = options;
    if (runtime::has_host_nodes(optimized))
      return runtime::compile_in_pieces(optimized, [&o](const Graph& segment) { return compile_cuda(segment, o); });
    return compile_cuda(optimized, o);
  }

  // One unfused launch per op, no CUDA graph, no epilogues: the GPU's eager baseline. The per-op
  // kernels of a graph are built once (keyed by the graph's text, so a different graph at the same
  // address never reuses them) and launched one per op on every call.
  std::vector<HostTensor> run_eager(const Graph& g, const std::vector<HostTensor>& inputs, Scoreboard* sb) const override {
    require_available();
    std::shared_ptr<Executable> exe;
    {
      std::lock_guard<std::mutex> lock(eager_mutex_);
      std::shared_ptr<Executable>& slot = eager_kernels_[print_graph(g)];
      if (!slot) {
        CudaCompileOptions o = options_;
        o.base.fuse = false;
        o.use_graphs = false;
        o.fuse_epilogues = false;
        slot = compile_cuda(g, o);
      }
      exe = slot;
    }
    return exe->run(inputs, sb);
  }

  Ceilings ceilings() const override {
    Ceilings c;
    c.copy_bytes = int64_t(256) << 20;
    c.copy_gbps = copy_gbps(c.copy_bytes, 7);
    c.quick = true;
    return c;
  }

  double copy_gbps(int64_t bytes, int) const override {
    require_available();
    return cuda_copy_gbps(bytes, options_.device);
  }

 private:
  void require_available() const {
    std::string why = cuda_unavailable_reason();
    KILN_CHECK(why.empty(), "--device cuda: ", why);
  }
  CudaCompileOptions options_;
  mutable std::mutex eager_mutex_;
  mutable std::map<std::string, std::shared_ptr<Executable>> eager_kernels_;
};

}  // namespace

std::unique_ptr<Target> cuda_target(const CudaCompileOptions& options) { return std::make_unique<CudaTarget>(options); }

const Target& target_named(const std::string& name) {
  if (name == "cpu") return cpu_target();
  if (name == "cuda") {
    static const std::unique_ptr<Target> cuda = cuda_target();
    std::string why = cuda->unavailable_reason();
    KILN_CHECK(why.empty(), "--device cuda: ", why, "; use --device cpu");
    return *cuda;
  }
  throw Error(str("--device: unknown device '", name, "' (expected cpu or cuda)"));
}

}  // namespace kiln
