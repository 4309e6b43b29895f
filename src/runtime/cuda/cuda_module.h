// A loaded cubin and launches of its kernels. Why: NVRTC output becomes runnable only once the
// driver loads it into the current context; the module must outlive every launch of its kernels.
#pragma once

#include <string>
#include <vector>

#include "runtime/cuda/driver_api.h"

namespace kiln::cuda {

class Stream;

struct LaunchShape {
  unsigned grid_x = 1;
  unsigned grid_y = 1;
  unsigned block_x = 1;
  unsigned shared_bytes = 0;
};

class CudaModule {
 public:
  explicit CudaModule(const std::vector<char>& cubin);
  ~CudaModule();
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;
  // Throws kiln::Error naming the kernel when the module has no such function.
  CUfunction function(const std::string& kernel_name) const;

 private:
  CUmodule module_ = nullptr;
};

// Queues `kernel` on `stream`; `args` point at each parameter's value, as cuLaunchKernel wants.
void launch_kernel(CUfunction kernel, const LaunchShape& shape, const Stream& stream, void** args);

// Lets `kernel` launch with `bytes` of dynamic shared memory (above 48 KiB needs the opt-in).
void allow_dynamic_shared(CUfunction kernel, int bytes);
// Lets a kernel compiled with __cluster_dims__ over 8 blocks (the portable limit) launch (sm_90: 16).
void allow_non_portable_cluster(CUfunction kernel);

// How many blocks of `block_threads` threads fit on one multiprocessor at once.
int max_active_blocks_per_multiprocessor(CUfunction kernel, int block_threads, unsigned shared_bytes = 0);
// Clusters of `cluster` blocks (the kernel's __cluster_dims__) the device runs at once; 0 when the
// driver cannot say (before CUDA 12) or the query fails.
int max_active_clusters(CUfunction kernel, int block_threads, int cluster, unsigned shared_bytes);

}  // namespace kiln::cuda
