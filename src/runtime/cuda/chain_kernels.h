// Compiles and launches elementwise-chain kernels: fused (one launch) or eager (one per op). Why:
// this is the GPU gap meter's engine and the first eager elementwise path on DeviceTensors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/cuda/cuda_module.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/device_tensor.h"
#include "runtime/cuda/elementwise_chain.h"

namespace kiln::cuda {

class ChainKernels {
 public:
  explicit ChainKernels(ChainKernelOptions options = {});

  // One launch that applies every step (no steps: a copy). in and out must not overlap.
  void launch_fused(const std::vector<ChainStep>& steps, DType dtype, DevicePtr in, DevicePtr out,
                    int64_t n, const Stream& stream);
  // One launch per step, alternating between `scratch` and `out` so the last step writes `out`;
  // allocates nothing, so it can be captured into a graph.
  void launch_unfused(const std::vector<ChainStep>& steps, DType dtype, DevicePtr in,
                      DevicePtr out, DevicePtr scratch, int64_t n, const Stream& stream);

  // Tensor-level versions that allocate results from the caching allocator, like an eager
  // executor does: run_eager allocates one result per op and frees each intermediate.
  DeviceTensor run_fused(const DeviceTensor& x, const std::vector<ChainStep>& steps,
                         const Stream& stream);
  DeviceTensor run_eager(const DeviceTensor& x, const std::vector<ChainStep>& steps,
                         const Stream& stream);

  int64_t kernels_compiled() const { return kernels_compiled_; }
  double compile_ms() const { return compile_ms_; }

 private:
  struct Compiled {
    std::unique_ptr<CudaModule> module;
    CUfunction function = nullptr;
    int64_t max_blocks = 1;  // blocks resident on the whole device at once
  };
  const Compiled& compiled(const std::vector<ChainStep>& steps, DType dtype);

  ChainKernelOptions options_;
  std::unordered_map<std::string, Compiled> cache_;  // by source text
  int64_t kernels_compiled_ = 0;
  double compile_ms_ = 0;
};

}  // namespace kiln::cuda
