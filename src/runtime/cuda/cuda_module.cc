// Module loading and kernel launch through the driver API.
#include "runtime/cuda/cuda_module.h"

#include "kiln/error.h"
#include "runtime/cuda/cuda_stream.h"

namespace kiln::cuda {

CudaModule::CudaModule(const std::vector<char>& cubin) {
  KILN_CHECK(!cubin.empty(), "cannot load an empty cubin");
  KILN_CU(driver().cuModuleLoadData(&module_, cubin.data()));
}

CudaModule::~CudaModule() {
  if (module_) driver().cuModuleUnload(module_);
}

CUfunction CudaModule::function(const std::string& kernel_name) const {
  CUfunction function = nullptr;
  CUresult result = driver().cuModuleGetFunction(&function, module_, kernel_name.c_str());
  KILN_CHECK(result != CUDA_ERROR_NOT_FOUND, "kernel ", kernel_name, " is not in the module");
  check_cu(result, "cuModuleGetFunction");
  return function;
}

void launch_kernel(CUfunction kernel, const LaunchShape& shape, const Stream& stream, void** args) {
  KILN_CU(driver().cuLaunchKernel(kernel, shape.grid_x, shape.grid_y, 1, shape.block_x, 1, 1,
                                  shape.shared_bytes, stream.handle(), args, nullptr));
}

void allow_dynamic_shared(CUfunction kernel, int bytes) {
  KILN_CU(driver().cuFuncSetAttribute(kernel, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes));
}

void allow_non_portable_cluster(CUfunction kernel) {
  KILN_CU(driver().cuFuncSetAttribute(kernel, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
}

int max_active_blocks_per_multiprocessor(CUfunction kernel, int block_threads, unsigned shared_bytes) {
  int blocks = 0;
  KILN_CU(driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, block_threads, shared_bytes));
  return blocks;
}

int max_active_clusters(CUfunction kernel, int block_threads, int cluster, unsigned shared_bytes) {
  if (!driver().cuOccupancyMaxActiveClusters) return 0;
  CUlaunchAttribute attribute{};
  attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attribute.value.clusterDim.x = unsigned(cluster);
  attribute.value.clusterDim.y = 1;
  attribute.value.clusterDim.z = 1;
  CUlaunchConfig config{};
  config.gridDimX = unsigned(cluster);
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = unsigned(block_threads);
  config.blockDimY = config.blockDimZ = 1;
  config.sharedMemBytes = shared_bytes;
  config.attrs = &attribute;
  config.numAttrs = 1;
  int clusters = 0;
  if (driver().cuOccupancyMaxActiveClusters(&clusters, kernel, &config) != CUDA_SUCCESS) return 0;
  return clusters;
}

}  // namespace kiln::cuda
