// compile_cuda's front half, without a device: its graph checks, its graph preparation, the shared
// lowering with attention kept whole for the fused kernel, and its placement of library steps
// (host steps marked in the program). Why: compile_cuda, `kiln dump` and the CUDA op-table tests
// must lower a graph for the GPU the same way; built in every build (no CUDA headers).
#pragma once

#include <memory>
#include <string>

#include "codegen/cuda/step_placement.h"
#include "kiln/compile.h"
#include "runtime/executable.h"

namespace kiln::runtime {

struct CudaLowering {
  std::shared_ptr<CompiledExecutable> program;  // steps, kernels' Loop IR, slots
  codegen::cuda::StepPlacement placement;       // host steps, fused attention kernels
  // Empty when the CUDA backend runs the graph; else why not, naming the node (compile_cuda throws
  // it; `kiln dump` writes it and still prints the kernels the rest of the graph would get).
  std::string refusal;
};

// `fused_attention`: attention the fused kernel runs stays whole (compile_cuda: the option, on
// sm_80 and newer).
CudaLowering lower_for_cuda(const Graph& g, const CompileOptions& base, bool fused_attention,
                            const std::string& kernel_prefix);

}  // namespace kiln::runtime
