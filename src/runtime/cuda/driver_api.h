// The CUDA driver API, loaded from libcuda.so.1 with dlopen at run time. Why: one Kiln build must
// run on machines with and without a GPU, and say clearly which one it is on instead of failing
// to start; cuda.h is used for its types only.
#pragma once

#include <cuda.h>

#include <string>
#include <vector>

namespace kiln::cuda {

// Every driver entry point Kiln uses. The names go through cuda.h's own macros, so
// KILN_CU_SYMBOL(cuMemAlloc) is "cuMemAlloc_v2": the versioned symbol the header means.
#define KILN_CUDA_DRIVER_FUNCTIONS(X)                                                           \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount)    \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem)                \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent)                  \
  X(cuCtxSynchronize) X(cuMemGetInfo) X(cuMemAlloc) X(cuMemFree) X(cuMemHostAlloc)             \
  X(cuMemFreeHost) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync)              \
  X(cuMemsetD8Async) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)               \
  X(cuStreamQuery) X(cuStreamWaitEvent) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)    \
  X(cuEventQuery) X(cuEventSynchronize) X(cuEventElapsedTime) X(cuModuleLoadData)              \
  X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuLaunchKernel)             \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuStreamBeginCapture)                       \
  X(cuStreamEndCapture) X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphDestroy)               \
  X(cuGraphExecDestroy)

struct DriverApi {
#define KILN_CU_MEMBER(name) decltype(&::name) name = nullptr;
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_CU_MEMBER)
#undef KILN_CU_MEMBER
  // Optional (CUDA 12+ drivers; null where missing): how many thread-block clusters fit at once.
  decltype(&::cuOccupancyMaxActiveClusters) cuOccupancyMaxActiveClusters = nullptr;
};

// What the machine offers, found without throwing. `message` is for people: "no CUDA driver
// (libcuda.so.1) found", "no CUDA device", or the device count and driver version.
struct DriverStatus {
  bool driver_loaded = false;
  int device_count = 0;
  int driver_version = 0;  // 13000 for CUDA 13.0
  std::string message;
  bool has_device() const { return driver_loaded && device_count > 0; }
};

// Loads libcuda.so.1 (or $KILN_LIBCUDA) and calls cuInit once; later calls return the same answer.
const DriverStatus& driver_status();

// The loaded driver; throws kiln::Error with driver_status().message when there is no device.
const DriverApi& driver();

// Throws kiln::Error naming the call and the driver's error name when `result` is not success.
void check_cu(CUresult result, const char* what);

// Loads $env_override if set, else the first shared library of `names` that dlopen finds; nullptr
// if none. `tried` collects the names for the error message. `global`: RTLD_GLOBAL (cuDNN's shim
// loads its engine libraries from beside itself). Shared with the NVRTC, cuBLASLt and cuDNN loaders.
void* open_first_library(const char* env_override, const std::vector<std::string>& names, std::string* tried,
                         bool global = false);

}  // namespace kiln::cuda

// In a loader: api.name = the symbol `name` of `handle`, appended to `missing` when absent (the
// NVRTC, cuBLASLt and cuDNN loaders resolve their X-macro lists of entry points with it).
#define KILN_RESOLVE_SYMBOL(api, handle, name, missing)                   \
  api.name = reinterpret_cast<decltype(&::name)>(dlsym(handle, #name));  \
  if (!api.name) missing += std::string(missing.empty() ? "" : ", ") + #name;

#define KILN_CU(call) ::kiln::cuda::check_cu((call), #call)
