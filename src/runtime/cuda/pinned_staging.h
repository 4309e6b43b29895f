// Host<->device copies through page-locked staging buffers. Why: the driver copies pageable memory
// through its own small bounce buffer; copying through two large pinned buffers in turn lets the
// host's memcpy of one chunk overlap the DMA of the other, at full PCIe speed.
#pragma once

#include <cstddef>
#include <mutex>

#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/cuda_stream.h"

namespace kiln::cuda {

class PinnedStaging {
 public:
  static constexpr std::size_t kChunkBytes = std::size_t(8) << 20;

  // The staging buffers of the current device, created on first use.
  static PinnedStaging& instance();

  // Returns once `host` may be reused; the copy completes in `stream` order.
  void upload(DevicePtr device, const void* host, std::size_t bytes, const Stream& stream);
  // Returns once `host` holds the bytes (waits for the work queued on `stream` before it).
  void download(void* host, DevicePtr device, std::size_t bytes, const Stream& stream);

  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

 private:
  PinnedStaging();
  std::mutex mutex_;
  void* buffers_[2] = {nullptr, nullptr};
  Event* buffer_free_[2] = {nullptr, nullptr};  // recorded after the last copy out of a buffer
  bool buffer_in_use_[2] = {false, false};
};

}  // namespace kiln::cuda
