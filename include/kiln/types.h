// TensorType: the static type every SSA value carries (dtype, symbolic shape, device). Why: the
// builder checks types at birth, so an ill-typed graph cannot be built.
#pragma once

#include <string>

#include "kiln/dtype.h"
#include "kiln/host_tensor.h"
#include "kiln/symint.h"

namespace kiln {

enum class Device : uint8_t { CPU, CUDA };
std::string_view device_name(Device d);

// A value's type. Usually a tensor; ONNX sequences and optionals are containers (`kind`) whose
// `elements` are the element types: a sequence lists one type per element (its length is part of
// the type, like a dim: "seq<f32[2, 6], f32[1, 6]>"), an optional has exactly one, the type it
// may hold ("opt<f32[5]>"; whether it holds it is known only at run time). For containers `dtype`
// is the element dtype and `shape` is empty.
struct TensorType {
  DType dtype = DType::F32;
  Shape shape;
  Device device = Device::CPU;
  ValueKind kind = ValueKind::Tensor;
  std::vector<TensorType> elements = {};  // containers only

  static TensorType sequence(DType dtype, std::vector<TensorType> elements);
  static TensorType optional(TensorType inner);
  bool is_tensor() const { return kind == ValueKind::Tensor; }

  int rank() const { return int(shape.size()); }
  SymInt numel() const;     // 0 for containers (they own no storage)
  bool is_static() const;  // every dim constant (of every element, for containers)
  // Concrete dims; throws kiln::Error if any dim is symbolic.
  std::vector<int64_t> static_shape() const;
  std::string to_string() const;  // "f32[B, 128]" or "bf16[4]@cuda"
  friend bool operator==(const TensorType& a, const TensorType& b) {
    return a.dtype == b.dtype && a.shape == b.shape && a.device == b.device && a.kind == b.kind &&
           a.elements == b.elements;
  }
  friend bool operator!=(const TensorType& a, const TensorType& b) { return !(a == b); }
};

Shape to_shape(const std::vector<int64_t>& dims);
// The static type of a concrete value (containers included; an empty optional's inner type is
// unknown and reads as a scalar of its dtype).
TensorType type_of(const HostTensor& t);

}  // namespace kiln
