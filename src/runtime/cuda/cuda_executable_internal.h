// What the CUDA executable's source files share (compile_cuda.cc, cuda_plan.cc, cuda_binding.cc,
// cuda_launch.cc, cuda_explain.cc) and nothing outside them needs: one binding's state and the
// shape helpers. Why: CudaExecutable is split by concern, and these are its private parts.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_executable.h"

namespace kiln::cuda {

inline std::vector<int64_t> eval_shape(const Shape& s, const std::map<std::string, int64_t>& b) {
  std::vector<int64_t> out;
  for (const SymInt& d : s) out.push_back(d.evaluate(b));
  return out;
}

inline int64_t product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= v[i];
  return p;
}

// A fused kernel after a matmul that cuBLASLt can run as the GEMM's epilogue (cuda_plan.cc).
std::optional<EpilogueMatch> match_epilogue(const Node& matmul, const runtime::CompiledExecutable& low, size_t kernel_step);
// The output of a lone gelu (tanh form) that step `step` runs, reading a Bias epilogue's output
// through a reshape: the epilogue then becomes GeluBias into it, and that step is skipped too.
// Null otherwise.
const Value* gelu_after_reshape(const EpilogueMatch& m, const runtime::CompiledExecutable& low, size_t step);

struct CudaExecutable::Binding {
  std::map<std::string, int64_t> dims;      // graph symbols
  std::map<std::string, int64_t> kernel_dims;  // s0, s1, ...
  std::vector<int64_t> syms;
  std::map<const Value*, DeviceTensor> buffers;
  std::vector<StepPlan> steps;
  DeviceTensor workspace;
  DeviceTensor status;
  std::unique_ptr<CapturedGraph> graph;
  int launches = 0;
  bool conv_forms_chosen = false;  // choose_conv_forms ran
  std::map<const Value*, DevicePtr> external;  // run_device: graph inputs read from the caller's tensors
  DeviceArenaPlan memory;  // where the intermediates lie in `arena`
  DeviceTensor arena;
};

}  // namespace kiln::cuda
