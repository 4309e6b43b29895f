// HostTensor: a dense, contiguous, row-major tensor in CPU memory. Why: the one concrete value
// type shared by the interpreter, the eager kernels, constants in the IR and the test suite.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/error.h"

namespace kiln {

// What a value is: a tensor, or a container of tensors (ONNX sequences and optionals). Why: the
// IR's types (TensorType::kind) and host values (HostTensor::kind) share one enum.
enum class ValueKind : uint8_t { Tensor, Sequence, Optional };

class HostTensor {
 public:
  HostTensor() = default;
  // Uninitialised storage (64-byte aligned) of the given dtype and shape.
  static HostTensor empty(DType dtype, std::vector<int64_t> shape);
  static HostTensor zeros(DType dtype, std::vector<int64_t> shape);
  // Values are converted to dtype (rounded to nearest even for narrow floats).
  static HostTensor from_doubles(DType dtype, std::vector<int64_t> shape,
                                 const std::vector<double>& values);
  static HostTensor scalar(DType dtype, double value);
  // Deterministic pseudo-random values: floats uniform in [lo, hi), ints uniform in [lo, hi].
  static HostTensor random(DType dtype, std::vector<int64_t> shape, uint64_t seed, double lo = -1,
                           double hi = 1);
  // A tensor over contiguous row-major memory that someone else owns (a numpy array, a torch
  // tensor): no copy; `owner` keeps the memory alive (may be empty when the caller guarantees it
  // outlives every copy of the tensor). Why: the Python package hands callers' buffers to compiled
  // code without copying them.
  static HostTensor borrow(DType dtype, std::vector<int64_t> shape, void* data, std::shared_ptr<void> owner);

  // Container values (ValueKind::Sequence / Optional): `items` are the elements (an optional holds
  // zero or one); `dtype` is the element dtype. They have no storage of their own (numel 0).
  static HostTensor sequence(DType dtype, std::vector<HostTensor> items);
  static HostTensor optional(DType dtype, std::vector<HostTensor> items);  // 0 items: empty
  ValueKind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == ValueKind::Tensor; }
  const std::vector<HostTensor>& items() const;

  // String tensors (dtype str): the elements are std::strings held beside the (empty) byte storage
  // and shared like it (reshaped() shares them, clone() copies them). empty()/zeros() give "".
  static HostTensor from_strings(std::vector<int64_t> shape, std::vector<std::string> values);
  const std::string& str_at(int64_t i) const;
  void set_str(int64_t i, std::string v);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int rank() const { return int(shape_.size()); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return size_t(numel_) * size_t(dtype_size(dtype_)); }
  bool defined() const { return storage_ != nullptr || numel_ == 0 || !is_tensor(); }

  void* raw() { return storage_.get(); }
  const void* raw() const { return storage_.get(); }
  template <typename T> T* data() { return static_cast<T*>(raw()); }
  template <typename T> const T* data() const { return static_cast<const T*>(raw()); }

  // Element access through double / int64 (slow; for the interpreter and tests).
  double get_f64(int64_t i) const;
  void set_f64(int64_t i, double v);  // rounds to dtype (ints truncate toward zero, bool: v != 0)
  int64_t get_i64(int64_t i) const;
  void set_i64(int64_t i, int64_t v);
  std::vector<double> to_doubles() const;

  HostTensor clone() const;
  // Same storage, new shape of equal numel.
  HostTensor reshaped(std::vector<int64_t> shape) const;
  // Row-major strides in elements.
  std::vector<int64_t> strides() const;
  std::string to_string(int max_elems = 8) const;  // "f32[2, 3] {0.1, ...}"
  bool bit_equal(const HostTensor& other) const;

 private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  std::shared_ptr<uint8_t[]> storage_;
  ValueKind kind_ = ValueKind::Tensor;
  std::shared_ptr<const std::vector<HostTensor>> items_;  // containers only
  std::shared_ptr<std::vector<std::string>> strings_;     // dtype str only
};

int64_t numel_of(const std::vector<int64_t>& shape);
std::string dims_to_string(const std::vector<int64_t>& shape);

}  // namespace kiln
