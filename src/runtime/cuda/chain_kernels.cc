// NVRTC compilation cached by source text, launch shapes from occupancy, eager and fused runs.
#include "runtime/cuda/chain_kernels.h"

#include <algorithm>
#include <chrono>

#include "kiln/error.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/nvrtc_compiler.h"

namespace kiln::cuda {

ChainKernels::ChainKernels(ChainKernelOptions options) : options_(options) {}

const ChainKernels::Compiled& ChainKernels::compiled(const std::vector<ChainStep>& steps,
                                                     DType dtype) {
  std::string source = chain_kernel_source(steps, dtype, options_);
  auto it = cache_.find(source);
  if (it != cache_.end()) return it->second;
  const CudaDevice& device = CudaDevice::get();
  const std::string name = chain_kernel_name(steps, dtype);
  auto start = std::chrono::steady_clock::now();
  std::vector<char> cubin = nvrtc_compile(source, name + ".cu", device.info().arch());
  compile_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                           start).count();
  ++kernels_compiled_;
  Compiled entry;
  entry.module = std::make_unique<CudaModule>(cubin);
  entry.function = entry.module->function(name);
  const int per_multiprocessor =
      std::max(1, max_active_blocks_per_multiprocessor(entry.function, options_.block_threads));
  entry.max_blocks = int64_t(per_multiprocessor) * device.info().multiprocessors;
  return cache_.emplace(std::move(source), std::move(entry)).first->second;
}

void ChainKernels::launch_fused(const std::vector<ChainStep>& steps, DType dtype, DevicePtr in,
                                DevicePtr out, int64_t n, const Stream& stream) {
  if (n == 0) return;
  KILN_CHECK(in % 16 == 0 && out % 16 == 0, "elementwise chain ", chain_kernel_name(steps, dtype),
             ": device pointers must be 16-byte aligned");
  const Compiled& kernel = compiled(steps, dtype);
  const int64_t vectors = std::max<int64_t>(1, n / chain_vector_width(dtype));
  const int64_t per_block = int64_t(options_.block_threads) * options_.vectors_per_thread;
  const int64_t covering = (vectors + per_block - 1) / per_block;
  LaunchShape shape;
  shape.block_x = unsigned(options_.block_threads);
  shape.grid_x = unsigned(options_.persistent_grid ? std::clamp<int64_t>(covering, 1, kernel.max_blocks)
                                                   : std::clamp<int64_t>(covering, 1, 0x7fffffff));
  long long count = n;
  void* args[] = {&in, &out, &count};
  launch_kernel(kernel.function, shape, stream, args);
}

void ChainKernels::launch_unfused(const std::vector<ChainStep>& steps, DType dtype, DevicePtr in,
                                  DevicePtr out, DevicePtr scratch, int64_t n,
                                  const Stream& stream) {
  if (steps.empty()) return launch_fused(steps, dtype, in, out, n, stream);
  DevicePtr source = in;
  for (size_t k = 0; k < steps.size(); ++k) {
    const bool writes_out = (steps.size() - 1 - k) % 2 == 0;
    DevicePtr target = writes_out ? out : scratch;
    launch_fused({steps[k]}, dtype, source, target, n, stream);
    source = target;
  }
}

DeviceTensor ChainKernels::run_fused(const DeviceTensor& x, const std::vector<ChainStep>& steps,
                                     const Stream& stream) {
  DeviceTensor out = DeviceTensor::empty(x.dtype(), x.shape(), stream);
  launch_fused(steps, x.dtype(), x.data(), out.data(), x.numel(), stream);
  return out;
}

DeviceTensor ChainKernels::run_eager(const DeviceTensor& x, const std::vector<ChainStep>& steps,
                                     const Stream& stream) {
  if (steps.empty()) return run_fused(x, steps, stream);
  DeviceTensor current = x;
  for (const ChainStep& step : steps) current = run_fused(current, {step}, stream);
  return current;
}

}  // namespace kiln::cuda
