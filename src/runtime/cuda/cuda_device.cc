// The primary context of a device, its description, and the allocator backend on top of the driver.
#include "runtime/cuda/cuda_device.h"

#include <map>
#include <mutex>

#include "kiln/error.h"

namespace kiln::cuda {

CudaMemoryBackend::~CudaMemoryBackend() {
  for (CUevent event : idle_events_) driver().cuEventDestroy(event);
}

DevicePtr CudaMemoryBackend::allocate(std::size_t bytes) {
  CUdeviceptr ptr = 0;
  CUresult result = driver().cuMemAlloc(&ptr, bytes);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) return 0;
  check_cu(result, "cuMemAlloc");
  return ptr;
}

void CudaMemoryBackend::release(DevicePtr ptr, std::size_t) {
  KILN_CU(driver().cuMemFree(ptr));
}

EventId CudaMemoryBackend::record_event(StreamId stream) {
  CUevent event = nullptr;
  if (idle_events_.empty()) {
    KILN_CU(driver().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
  } else {
    event = idle_events_.back();
    idle_events_.pop_back();
  }
  KILN_CU(driver().cuEventRecord(event, reinterpret_cast<CUstream>(stream)));
  return reinterpret_cast<EventId>(event);
}

bool CudaMemoryBackend::event_completed(EventId event) {
  CUresult result = driver().cuEventQuery(reinterpret_cast<CUevent>(event));
  if (result == CUDA_ERROR_NOT_READY) return false;
  check_cu(result, "cuEventQuery");
  return true;
}

void CudaMemoryBackend::wait_event(EventId event) {
  KILN_CU(driver().cuEventSynchronize(reinterpret_cast<CUevent>(event)));
}

void CudaMemoryBackend::release_event(EventId event) {
  idle_events_.push_back(reinterpret_cast<CUevent>(event));
}

CudaDevice& CudaDevice::get(int ordinal) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<CudaDevice>> devices;
  std::lock_guard<std::mutex> lock(mutex);
  const DriverStatus& status = driver_status();
  KILN_CHECK(status.has_device(), status.message);
  KILN_CHECK(ordinal >= 0 && ordinal < status.device_count, "CUDA device ", ordinal,
             " does not exist: this machine has ", status.device_count);
  auto& slot = devices[ordinal];
  if (!slot) slot.reset(new CudaDevice(ordinal));
  slot->make_current();
  return *slot;
}

CudaDevice::CudaDevice(int ordinal) {
  const DriverApi& api = driver();
  KILN_CU(api.cuDeviceGet(&device_, ordinal));
  KILN_CU(api.cuDevicePrimaryCtxRetain(&context_, device_));
  KILN_CU(api.cuCtxSetCurrent(context_));
  info_.ordinal = ordinal;
  char name[256] = {};
  KILN_CU(api.cuDeviceGetName(name, sizeof name, device_));
  info_.name = name;
  auto attribute = [&](CUdevice_attribute which) {
    int value = 0;
    KILN_CU(api.cuDeviceGetAttribute(&value, which, device_));
    return value;
  };
  info_.compute_major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info_.compute_minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info_.multiprocessors = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info_.l2_cache_bytes = attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  info_.max_threads_per_multiprocessor = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  info_.max_shared_per_block_optin = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  info_.max_shared_per_multiprocessor = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  info_.memory_clock_khz = attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  info_.memory_bus_bits = attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  KILN_CU(api.cuDeviceTotalMem(&info_.total_memory, device_));
  backend_ = std::make_unique<CudaMemoryBackend>();
  allocator_ = std::make_unique<CachingAllocator>(*backend_);
}

CudaDevice::~CudaDevice() {
  // Devices live until exit; the driver may already be unloading then, so nothing is released.
  (void)allocator_.release();
  (void)backend_.release();
}

void CudaDevice::make_current() const { KILN_CU(driver().cuCtxSetCurrent(context_)); }

std::size_t CudaDevice::free_memory() const {
  std::size_t free_bytes = 0, total_bytes = 0;
  KILN_CU(driver().cuMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

}  // namespace kiln::cuda
