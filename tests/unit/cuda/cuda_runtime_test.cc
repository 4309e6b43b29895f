// The loader's answer on this machine, and the runtime on a real GPU when there is one: NVRTC to
// a cubin, staged copies, fused and eager chains against float64, and allocator steady state.
#include <gtest/gtest.h>

#include <cstring>

#include "kiln/error.h"
#include "kiln/host_tensor.h"
#include "runtime/cuda/chain_kernels.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/driver_api.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/cuda/reference_compare.h"

namespace kiln::cuda {
namespace {

#define SKIP_WITHOUT_GPU()                                                            \
  do {                                                                                \
    if (!driver_status().has_device())                                                \
      GTEST_SKIP() << "needs a CUDA GPU; this machine has none: " << driver_status().message; \
  } while (0)

TEST(CudaDriverLoader, SaysClearlyWhetherThereIsADriverAndADevice) {
  const DriverStatus& status = driver_status();
  if (!status.driver_loaded) {
    EXPECT_EQ(status.message.rfind("no CUDA driver (libcuda.so.1) found", 0), 0u) << status.message;
    EXPECT_EQ(status.device_count, 0);
  } else if (status.device_count == 0) {
    EXPECT_EQ(status.message.rfind("no CUDA device", 0), 0u) << status.message;
  } else {
    EXPECT_NE(status.message.find("CUDA device(s)"), std::string::npos) << status.message;
  }
  if (status.has_device()) return;
  try {
    CudaDevice::get();
    FAIL() << "CudaDevice::get() succeeded without a device";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), status.message);
  }
  EXPECT_THROW(driver(), Error);
}

TEST(CudaGpu, NvrtcCompilesAChainKernelToACubinForTheDevice) {
  SKIP_WITHOUT_GPU();
  const std::string arch = CudaDevice::get().info().arch();
  std::vector<ChainStep> steps = parse_chain("mul(2),add(1)");
  std::vector<char> cubin = nvrtc_compile(chain_kernel_source(steps, DType::BF16), "t.cu", arch);
  ASSERT_GE(cubin.size(), 4u);
  EXPECT_EQ(std::memcmp(cubin.data(), "\x7f" "ELF", 4), 0);
  try {
    nvrtc_compile("this is not cuda", "broken.cu", arch);
    FAIL() << "bad source compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("broken.cu"), std::string::npos) << e.what();
  }
}

TEST(CudaGpu, StagedCopiesRoundTripSeveralChunksAtAnOddSize) {
  SKIP_WITHOUT_GPU();
  CudaDevice::get();
  Stream stream;
  HostTensor host = HostTensor::random(DType::F32, {5'000'003}, 11);  // > 2 staging chunks
  DeviceTensor device = DeviceTensor::upload(host, stream);
  EXPECT_TRUE(device.download(stream).bit_equal(host));
}

TEST(CudaGpu, FusedAndEagerChainsMatchFloat64OnEveryDtype) {
  SKIP_WITHOUT_GPU();
  CudaDevice::get();
  Stream stream;
  ChainKernels kernels;
  std::vector<ChainStep> steps = parse_chain("mul(1.5),add(-0.25),gelu,max(-0.1),tanh");
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    HostTensor x = HostTensor::random(dtype, {1000, 37}, 5 + int(dtype));
    std::vector<double> reference(size_t(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) reference[size_t(i)] = apply_chain_reference(steps, x.get_f64(i));
    DeviceTensor input = DeviceTensor::upload(x, stream);
    ReferenceComparison fused = compare_with_reference(kernels.run_fused(input, steps, stream).download(stream), reference);
    ReferenceComparison eager = compare_with_reference(kernels.run_eager(input, steps, stream).download(stream), reference);
    EXPECT_TRUE(fused.passes(chain_tolerance(dtype, 1))) << dtype_name(dtype) << " fused error " << fused.relative_error;
    EXPECT_TRUE(eager.passes(chain_tolerance(dtype, int(steps.size()))))
        << dtype_name(dtype) << " eager error " << eager.relative_error;
  }
}

TEST(CudaGpu, RepeatedEagerChainsMakeNoDriverAllocations) {
  SKIP_WITHOUT_GPU();
  CudaDevice& device = CudaDevice::get();
  Stream stream;
  ChainKernels kernels;
  std::vector<ChainStep> steps = parse_chain("mul(0.5),add(1),relu,mul(2)");
  DeviceTensor input = DeviceTensor::upload(HostTensor::random(DType::BF16, {3, 1 << 20}, 3), stream);
  kernels.run_eager(input, steps, stream);
  const int64_t after_first = device.allocator().stats().driver_allocations;
  for (int i = 0; i < 10; ++i) kernels.run_eager(input, steps, stream);
  stream.synchronize();
  EXPECT_EQ(device.allocator().stats().driver_allocations, after_first);
}

}  // namespace
}  // namespace kiln::cuda
