// compile_cuda's front half (see cuda_lowering.h).
#include "runtime/cuda_lowering.h"

#include "codegen/cuda/prepare_graph.h"
#include "kiln/error.h"

namespace kiln::runtime {

CudaLowering lower_for_cuda(const Graph& g, const CompileOptions& base, bool fused_attention,
                            const std::string& kernel_prefix) {
  CudaLowering out;
  try {
    codegen::cuda::check_cuda_graph(g);
  } catch (const Error& e) {
    out.refusal = e.what();
  }
  std::unique_ptr<Graph> prepared = g.clone();
  codegen::cuda::prepare_graph_for_cuda(*prepared, fused_attention);
  CompileOptions options = base;
  if (fused_attention) options.keep_whole.insert(Op::Attention), options.attention_reads_views = true;
  out.program = lower_for_target(*prepared, options, kernel_prefix);
  if (!out.refusal.empty()) return out;
  try {
    out.placement = codegen::cuda::place_library_steps(*out.program);
  } catch (const Error& e) {
    out.refusal = e.what();
    return out;
  }
  for (size_t i : out.placement.host_steps) out.program->steps[i].host = true;
  return out;
}

}  // namespace kiln::runtime
