// DeviceTensor storage and its host transfers.
#include "runtime/cuda/device_tensor.h"

#include "kiln/error.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/pinned_staging.h"

namespace kiln::cuda {

DeviceTensor::Storage::~Storage() {
  if (ptr) allocator->free(ptr);
}

DeviceTensor DeviceTensor::empty(DType dtype, std::vector<int64_t> shape, const Stream& stream) {
  DeviceTensor tensor;
  tensor.dtype_ = dtype;
  tensor.numel_ = numel_of(shape);
  tensor.shape_ = std::move(shape);
  auto storage = std::make_shared<Storage>();
  storage->allocator = &CudaDevice::get().allocator();
  storage->ptr = storage->allocator->allocate(tensor.nbytes(), stream.id());
  tensor.storage_ = std::move(storage);
  return tensor;
}

DeviceTensor DeviceTensor::reshaped(std::vector<int64_t> shape) const {
  KILN_CHECK(numel_of(shape) == numel_, "cannot view device tensor ", dtype_name(dtype_), dims_to_string(shape_), " as ",
             dims_to_string(shape));
  DeviceTensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

DeviceTensor DeviceTensor::part(int64_t byte_offset, DType dtype, std::vector<int64_t> shape) const {
  DeviceTensor t;
  t.dtype_ = dtype;
  t.numel_ = numel_of(shape);
  t.shape_ = std::move(shape);
  KILN_CHECK(byte_offset >= 0 && byte_offset + int64_t(t.nbytes()) <= int64_t(nbytes()), "device tensor part of ",
             t.nbytes(), " bytes at ", byte_offset, " lies outside its ", nbytes(), "-byte storage");
  t.storage_ = storage_;
  t.offset_ = offset_ + byte_offset;
  return t;
}

DeviceTensor DeviceTensor::upload(const HostTensor& host, const Stream& stream) {
  DeviceTensor tensor = empty(host.dtype(), host.shape(), stream);
  tensor.copy_from_host(host, stream);
  return tensor;
}

void DeviceTensor::copy_from_host(const HostTensor& host, const Stream& stream) {
  KILN_CHECK(host.dtype() == dtype_ && host.numel() == numel_, "cannot copy host tensor ",
             dtype_name(host.dtype()), dims_to_string(host.shape()), " into device tensor ",
             dtype_name(dtype_), dims_to_string(shape_));
  PinnedStaging::instance().upload(data(), host.raw(), nbytes(), stream);
}

HostTensor DeviceTensor::download(const Stream& stream) const {
  HostTensor host = HostTensor::empty(dtype_, shape_);
  PinnedStaging::instance().download(host.raw(), data(), nbytes(), stream);
  return host;
}

void DeviceTensor::fill_bytes(uint8_t value, const Stream& stream) {
  if (nbytes() == 0) return;
  KILN_CU(driver().cuMemsetD8Async(data(), value, nbytes(), stream.handle()));
}

}  // namespace kiln::cuda
