// Where each step of a lowered graph runs on the GPU: generated kernels on the device, matmuls on
// cuBLASLt, attention kept whole on the fused kernel, shape arithmetic on the host; anything else
// is an error naming the node. Why: compile_cuda's rule, kept pure (no device needed, built in every build), so
// `kiln dump` prints the CUDA program and the CUDA op table (src/runtime/op_support_cuda.def) is checked against it on machines without a GPU.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "codegen/cuda/attention_kernel.h"
#include "kiln/graph.h"
#include "lower/program.h"

namespace kiln::codegen::cuda {

// Throws kiln::Error for what the CUDA backend never runs: control flow, sequences, optionals and
// string tensors (kiln::compile runs those as host steps on the CPU).
void check_cuda_graph(const Graph& g);

struct StepPlacement {
  std::set<size_t> host_steps;                       // indices into Program::steps
  std::set<FusedAttentionKernel> attention_kernels;  // fused attention kernels to build
  std::set<std::string> library_kernels;             // library_kernels.h kernels to build
};

// The library steps of `low`: shape_of and steps whose operands are all constants or host-step
// results run on the host; matmul (f32, f16, bf16) on cuBLASLt; attention (kept whole only where
// the fused kernel runs it) on that kernel; gather, concat, pad, pooling, conv and the other ops of
// library_kernels.h on their CUDA library kernels. Throws kiln::Error naming the node for any other.
StepPlacement place_library_steps(const lower::Program& low);

// Whether cuBLASLt can run a matmul of these operand shapes: equal batch dims, or one side without
// batch (numpy broadcasting of a single matrix), or 1-D operands. place_library_steps refuses a
// matmul whose static shapes it cannot run; symbolic ones are checked when the dims are bound.
bool matmul_batch_supported(std::vector<int64_t> a, std::vector<int64_t> b);

}  // namespace kiln::codegen::cuda
