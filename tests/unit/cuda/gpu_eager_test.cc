// GPU eager mode of kiln::Tensor: ops on tensors moved to the GPU run one launch each and agree
// with the CPU eager kernels on random inputs at odd sizes in f32 and bf16; mixing devices and a
// machine without a GPU give clear errors; repeated ops reuse compiled kernels and device memory.
#include <gtest/gtest.h>

#include "kiln/cuda.h"
#include "kiln/error.h"
#include "kiln/tensor.h"
#include "runtime/cuda/cuda_device.h"
#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

std::string gpu_missing() { return cuda_unavailable_reason(); }

// The same model code, eager on the CPU and eager on the GPU.
std::vector<Tensor> model(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& g) {
  Tensor h = matmul(x, w) + b;
  Tensor y = gelu(h);
  Tensor n = layer_norm(y, g, b);
  Tensor s = softmax(n * 0.5, -1);
  Tensor t = permute(reshape(s, {x.dim(0), x.dim(1), 3, 8}), {0, 2, 1, 3});
  return {y, n, s, t, sum(t, {1, 3}), relu(n - 0.25)};
}

TEST(GpuEager, OpsOnGpuTensorsMatchTheCpuKernels) {
  if (!gpu_missing().empty()) GTEST_SKIP() << gpu_missing();
  for (DType t : {DType::F32, DType::BF16}) {
    Tensor x = Tensor::from_host(HostTensor::random(t, {3, 7, 40}, 1));
    Tensor w = Tensor::from_host(HostTensor::random(t, {40, 24}, 2, -0.3, 0.3));
    Tensor b = Tensor::from_host(HostTensor::random(t, {24}, 3));
    Tensor g = Tensor::from_host(HostTensor::random(t, {24}, 4, 0.5, 1.5));
    std::vector<Tensor> want = model(x, w, b, g);
    std::vector<Tensor> got = model(x.to(Device::CUDA), w.to(Device::CUDA), b.to(Device::CUDA), g.to(Device::CUDA));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].device(), Device::CUDA);
      EXPECT_EQ(compare_tensors(got[i].host(), want[i].host()), "") << dtype_name(t) << " result " << i;
      EXPECT_EQ(compare_tensors(got[i].to(Device::CPU).host(), want[i].host()), "") << dtype_name(t) << " result " << i;
    }
  }
}

TEST(GpuEager, EachOpIsOneTimedLaunchOnTheScoreboard) {
  if (!gpu_missing().empty()) GTEST_SKIP() << gpu_missing();
  Tensor x = Tensor::from_host(HostTensor::random(DType::F32, {129, 77}, 5)).to(Device::CUDA);
  Scoreboard sb;
  {
    ScoreboardScope scope(&sb);
    Tensor y = softmax(exp(x) + 1.0);
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{129, 77}));
  }
  ASSERT_EQ(sb.kernels().size(), 3u);  // exp, add, softmax (its decomposition fused into one kernel)
  for (const KernelRecord& k : sb.kernels()) {
    EXPECT_GT(k.time_us, 0) << k.name;
    EXPECT_GT(k.bytes_read, 0) << k.name;
  }
}

TEST(GpuEager, RepeatedOpsReuseKernelsAndDeviceMemory) {
  if (!gpu_missing().empty()) GTEST_SKIP() << gpu_missing();
  Tensor x = Tensor::from_host(HostTensor::random(DType::BF16, {1000, 333}, 6)).to(Device::CUDA);
  auto step = [&] { return (relu(x * 2.0) + x).host(); };
  HostTensor first = step();
  cuda::CachingAllocator& alloc = cuda::CudaDevice::get().allocator();
  const int64_t allocations = alloc.stats().driver_allocations;
  for (int i = 0; i < 10; ++i) EXPECT_EQ(compare_tensors(step(), first), "");
  EXPECT_EQ(alloc.stats().driver_allocations, allocations);
}

TEST(GpuEager, MixingDevicesIsAClearError) {
  if (!gpu_missing().empty()) GTEST_SKIP() << gpu_missing();
  Tensor x = Tensor::from_host(HostTensor::random(DType::F32, {4, 5}, 7));
  Tensor y = x.to(Device::CUDA);
  try {
    (void)(y + x);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'add'"), std::string::npos) << m;
    EXPECT_NE(m.find("to(Device::CUDA)"), std::string::npos) << m;
  }
}

// Runs everywhere: without a GPU (CI), moving a tensor to it says why it cannot.
TEST(GpuEager, WithoutAGpuMovingATensorThereSaysWhy) {
  if (gpu_missing().empty()) GTEST_SKIP() << "this machine has a GPU";
  Tensor x = Tensor::from_host(HostTensor::random(DType::F32, {4, 5}, 8));
  try {
    (void)x.to(Device::CUDA);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("cuda"), std::string::npos) << m;
    EXPECT_NE(m.find(gpu_missing().substr(0, 20)), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace kiln::testing
