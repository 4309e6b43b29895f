// TensorType: the static type every SSA value carries (dtype, symbolic shape, device). Why: the
// builder checks types at birth, so an ill-typed graph cannot be built.
#pragma once

#include <string>

#include "kiln/dtype.h"
#include "kiln/symint.h"

namespace kiln {

enum class Device : uint8_t { CPU, CUDA };
std::string_view device_name(Device d);

struct TensorType {
  DType dtype = DType::F32;
  Shape shape;
  Device device = Device::CPU;

  int rank() const { return int(shape.size()); }
  SymInt numel() const;
  bool is_static() const;  // every dim constant
  // Concrete dims; throws kiln::Error if any dim is symbolic.
  std::vector<int64_t> static_shape() const;
  std::string to_string() const;  // "f32[B, 128]" or "bf16[4]@cuda"
  friend bool operator==(const TensorType& a, const TensorType& b) {
    return a.dtype == b.dtype && a.shape == b.shape && a.device == b.device;
  }
  friend bool operator!=(const TensorType& a, const TensorType& b) { return !(a == b); }
};

Shape to_shape(const std::vector<int64_t>& dims);

}  // namespace kiln
