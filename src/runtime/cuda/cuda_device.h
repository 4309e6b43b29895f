// One CUDA device: its primary context, what it is, and its caching allocator. Why: everything
// that touches the GPU (tensors, kernels, copies) needs the same context current and the same
// allocator, created once on first use.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/driver_api.h"

namespace kiln::cuda {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  std::size_t total_memory = 0;
  int multiprocessors = 0;
  int l2_cache_bytes = 0;
  int max_threads_per_multiprocessor = 0;
  int max_shared_per_block_optin = 48 * 1024;  // dynamic shared memory a kernel may opt in to
  int max_shared_per_multiprocessor = 0;        // what a multiprocessor's blocks share
  int memory_clock_khz = 0;
  int memory_bus_bits = 0;
  // "sm_90" on an H100/H200: the architecture NVRTC compiles for.
  std::string arch() const { return "sm_" + std::to_string(compute_major * 10 + compute_minor); }
  // The datasheet memory bandwidth from clock and bus width (a lead, not a measurement).
  double theoretical_bandwidth_gbps() const {
    return 2.0 * memory_clock_khz * 1e3 * (memory_bus_bits / 8) / 1e9;
  }
};

// The allocator's backend on a real device: cuMemAlloc/cuMemFree and pooled CUevents.
class CudaMemoryBackend final : public DeviceMemoryBackend {
 public:
  ~CudaMemoryBackend() override;
  DevicePtr allocate(std::size_t bytes) override;
  void release(DevicePtr ptr, std::size_t bytes) override;
  EventId record_event(StreamId stream) override;
  bool event_completed(EventId event) override;
  void wait_event(EventId event) override;
  void release_event(EventId event) override;

 private:
  std::vector<CUevent> idle_events_;
};

class CudaDevice {
 public:
  // The device with this ordinal, its primary context made current on the calling thread.
  // Throws kiln::Error ("no CUDA driver ..." / "no CUDA device ...") when there is none.
  static CudaDevice& get(int ordinal = 0);

  const DeviceInfo& info() const { return info_; }
  void make_current() const;
  CachingAllocator& allocator() { return *allocator_; }
  std::size_t free_memory() const;

  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

 private:
  explicit CudaDevice(int ordinal);
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  DeviceInfo info_;
  std::unique_ptr<CudaMemoryBackend> backend_;
  std::unique_ptr<CachingAllocator> allocator_;
};

}  // namespace kiln::cuda
