// Double-buffered chunked copies through two pinned host buffers.
#include "runtime/cuda/pinned_staging.h"

#include <algorithm>
#include <cstring>

#include "kiln/error.h"

namespace kiln::cuda {

PinnedStaging& PinnedStaging::instance() {
  static PinnedStaging* staging = new PinnedStaging();  // lives until exit, like the context
  return *staging;
}

PinnedStaging::PinnedStaging() {
  for (int i = 0; i < 2; ++i) {
    KILN_CU(driver().cuMemHostAlloc(&buffers_[i], kChunkBytes, CU_MEMHOSTALLOC_PORTABLE));
    buffer_free_[i] = new Event(/*timing=*/false);
  }
}

PinnedStaging::~PinnedStaging() {
  for (int i = 0; i < 2; ++i) {
    delete buffer_free_[i];
    if (buffers_[i]) driver().cuMemFreeHost(buffers_[i]);
  }
}

void PinnedStaging::upload(DevicePtr device, const void* host, std::size_t bytes,
                           const Stream& stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto* source = static_cast<const char*>(host);
  for (std::size_t offset = 0, chunk = 0; offset < bytes; offset += kChunkBytes, ++chunk) {
    const int buffer = int(chunk % 2);
    const std::size_t size = std::min(kChunkBytes, bytes - offset);
    if (buffer_in_use_[buffer]) buffer_free_[buffer]->synchronize();
    std::memcpy(buffers_[buffer], source + offset, size);
    KILN_CU(driver().cuMemcpyHtoDAsync(device + offset, buffers_[buffer], size, stream.handle()));
    buffer_free_[buffer]->record(stream);
    buffer_in_use_[buffer] = true;
  }
}

void PinnedStaging::download(void* host, DevicePtr device, std::size_t bytes,
                             const Stream& stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto* target = static_cast<char*>(host);
  const std::size_t chunks = (bytes + kChunkBytes - 1) / kChunkBytes;
  auto chunk_size = [&](std::size_t chunk) {
    return std::min(kChunkBytes, bytes - chunk * kChunkBytes);
  };
  auto copy_out = [&](std::size_t chunk) {
    const int buffer = int(chunk % 2);
    buffer_free_[buffer]->synchronize();
    std::memcpy(target + chunk * kChunkBytes, buffers_[buffer], chunk_size(chunk));
  };
  // The device fills one buffer while the host empties the other.
  for (std::size_t chunk = 0; chunk < chunks; ++chunk) {
    const int buffer = int(chunk % 2);
    if (buffer_in_use_[buffer]) buffer_free_[buffer]->synchronize();
    KILN_CU(driver().cuMemcpyDtoHAsync(buffers_[buffer], device + chunk * kChunkBytes,
                                       chunk_size(chunk), stream.handle()));
    buffer_free_[buffer]->record(stream);
    buffer_in_use_[buffer] = true;
    if (chunk > 0) copy_out(chunk - 1);
  }
  if (chunks > 0) copy_out(chunks - 1);
}

}  // namespace kiln::cuda
