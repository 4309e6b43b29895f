// A dense tensor in device memory. Why: the GPU executors need a value type like HostTensor whose
// storage comes from the caching allocator and goes back to it when the last reference drops.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/host_tensor.h"
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/cuda_stream.h"

namespace kiln::cuda {

class DeviceTensor {
 public:
  DeviceTensor() = default;
  // Uninitialised storage on the current device, for use on `stream`.
  static DeviceTensor empty(DType dtype, std::vector<int64_t> shape, const Stream& stream);
  // A device copy of `host`; `host` may be changed as soon as this returns.
  static DeviceTensor upload(const HostTensor& host, const Stream& stream);

  // Waits for the work queued on `stream`, then returns the values.
  HostTensor download(const Stream& stream) const;
  // Overwrites the values with those of `host` (same dtype and element count), in stream order.
  void copy_from_host(const HostTensor& host, const Stream& stream);
  // Sets every byte, e.g. 0xFF to poison an output with NaNs before a kernel must overwrite it.
  void fill_bytes(uint8_t value, const Stream& stream);

  // The same storage read with another shape of the same element count.
  DeviceTensor reshaped(std::vector<int64_t> shape) const;
  // A tensor of `dtype` and `shape` over this one's bytes from `byte_offset` on, sharing (and
  // keeping alive) its storage: the memory planner's buffers inside one arena.
  DeviceTensor part(int64_t byte_offset, DType dtype, std::vector<int64_t> shape) const;

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  std::size_t nbytes() const { return std::size_t(numel_) * std::size_t(dtype_size(dtype_)); }
  DevicePtr data() const { return storage_ ? storage_->ptr + DevicePtr(offset_) : 0; }
  bool defined() const { return storage_ != nullptr || numel_ == 0; }

 private:
  struct Storage {
    CachingAllocator* allocator = nullptr;
    DevicePtr ptr = 0;
    ~Storage();
  };
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  int64_t offset_ = 0;  // bytes into the storage (part())
  std::shared_ptr<Storage> storage_;
};

}  // namespace kiln::cuda
