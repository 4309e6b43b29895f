// What the CUDA Target asks of the device itself: its name and its copy bandwidth (kiln/cuda.h).
// Why: the Target (src/runtime/cuda_target.cc) is built in every build; these need the driver.
#include <algorithm>

#include "kiln/cuda.h"
#include "kiln/error.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/device_tensor.h"

namespace kiln {

std::string cuda_device_description(int device) {
  if (!cuda_unavailable_reason().empty()) return "cuda: unavailable";
  const cuda::DeviceInfo& info = cuda::CudaDevice::get(device).info();
  return str("cuda: ", info.name, " (", info.arch(), ")");
}

double cuda_copy_gbps(int64_t bytes, int device) {
  std::string why = cuda_unavailable_reason();
  KILN_CHECK(why.empty(), "cuda: ", why);
  using namespace kiln::cuda;
  CudaDevice::get(device).make_current();
  Stream stream;
  DeviceTensor a = DeviceTensor::empty(DType::U8, {bytes}, stream), b = DeviceTensor::empty(DType::U8, {bytes}, stream);
  a.fill_bytes(1, stream);
  double best_ms = 1e30;
  for (int i = 0; i < 7; ++i) {
    Event start, stop;
    start.record(stream);
    KILN_CU(driver().cuMemcpyDtoDAsync(b.data(), a.data(), size_t(bytes), stream.handle()));
    stop.record(stream);
    stop.synchronize();
    if (i > 0) best_ms = std::min(best_ms, double(stop.elapsed_ms_since(start)));
  }
  return 2.0 * double(bytes) / (best_ms * 1e6);
}

}  // namespace kiln
