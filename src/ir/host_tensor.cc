// HostTensor storage, element conversion and printing.
#include "kiln/host_tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "kiln/random.h"

namespace kiln {

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    KILN_CHECK(d >= 0, "negative dimension ", d, " in shape ", dims_to_string(shape));
    KILN_CHECK(!__builtin_mul_overflow(n, d, &n), "shape ", dims_to_string(shape), " has too many elements");
  }
  return n;
}

std::string dims_to_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

HostTensor HostTensor::empty(DType dtype, std::vector<int64_t> shape) {
  HostTensor t;
  t.dtype_ = dtype;
  t.numel_ = numel_of(shape);
  t.shape_ = std::move(shape);
  if (dtype == DType::Str) {
    KILN_CHECK(t.numel_ <= (int64_t(1) << 40), "refusing to allocate a string tensor of shape ",
               dims_to_string(t.shape_), ": absurd size");
    t.strings_ = std::make_shared<std::vector<std::string>>(size_t(t.numel_));
  }
  KILN_CHECK(dtype == DType::Str || t.numel_ <= (int64_t(1) << 50) / dtype_size(dtype), "refusing to allocate a tensor of shape ",
             dims_to_string(t.shape_), ": absurd size");
  size_t bytes = t.nbytes();
  size_t alloc = ((bytes + 63) / 64) * 64;
  if (alloc == 0) alloc = 64;
  void* p = std::aligned_alloc(64, alloc);
  KILN_CHECK(p != nullptr, "out of host memory allocating ", bytes, " bytes");
  t.storage_ = std::shared_ptr<uint8_t[]>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
  return t;
}

HostTensor HostTensor::borrow(DType dtype, std::vector<int64_t> shape, void* data, std::shared_ptr<void> owner) {
  KILN_CHECK(dtype != DType::Str, "cannot borrow the memory of a string tensor");
  KILN_CHECK(data != nullptr || numel_of(shape) == 0, "borrow: null data for shape ", dims_to_string(shape));
  HostTensor t;
  t.dtype_ = dtype;
  t.numel_ = numel_of(shape);
  t.shape_ = std::move(shape);
  // The aliasing constructor: the tensor points at `data` and shares `owner`'s lifetime.
  t.storage_ = std::shared_ptr<uint8_t[]>(std::move(owner), static_cast<uint8_t*>(data));
  return t;
}

HostTensor HostTensor::zeros(DType dtype, std::vector<int64_t> shape) {
  HostTensor t = empty(dtype, std::move(shape));
  std::memset(t.raw(), 0, t.nbytes());
  return t;
}

HostTensor HostTensor::from_doubles(DType dtype, std::vector<int64_t> shape,
                                    const std::vector<double>& values) {
  HostTensor t = empty(dtype, std::move(shape));
  KILN_CHECK(int64_t(values.size()) == t.numel(), "from_doubles: ", values.size(),
             " values for shape ", dims_to_string(t.shape()));
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, values[size_t(i)]);
  return t;
}

HostTensor HostTensor::scalar(DType dtype, double value) { return from_doubles(dtype, {}, {value}); }

HostTensor HostTensor::random(DType dtype, std::vector<int64_t> shape, uint64_t seed, double lo,
                              double hi) {
  HostTensor t = empty(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    double u = random_uniform01(seed, uint64_t(i));
    if (is_float(dtype)) {
      t.set_f64(i, lo + (hi - lo) * u);
    } else if (dtype == DType::Bool) {
      t.set_i64(i, u < 0.5);
    } else {
      int64_t ilo = int64_t(std::ceil(lo)), ihi = int64_t(std::floor(hi));
      t.set_i64(i, ilo + int64_t(u * double(ihi - ilo + 1)));
    }
  }
  return t;
}

double HostTensor::get_f64(int64_t i) const {
  return dispatch_dtype(dtype_, [&](auto tag) -> double {
    using T = decltype(tag);
    if constexpr (std::is_class_v<T>)  // the 16-, 8- and 4-bit floats convert through float
      return double(float(data<T>()[i]));
    else
      return double(data<T>()[i]);
  });
}

template <typename T> static T saturating_cast(double v) {
  if (std::isnan(v)) return T(0);
  constexpr double lo = double(std::numeric_limits<T>::lowest());
  constexpr double hi = double(std::numeric_limits<T>::max());
  if (v <= lo) return std::numeric_limits<T>::lowest();
  if (v >= hi) return std::numeric_limits<T>::max();
  return T(v);
}

void HostTensor::set_f64(int64_t i, double v) {
  switch (dtype_) {
    case DType::F32: data<float>()[i] = float(v); break;
    case DType::F64: data<double>()[i] = v; break;
    case DType::F16: data<Half>()[i] = Half::from_bits(f64_to_f16_bits(v)); break;
    case DType::BF16: data<BFloat16>()[i] = BFloat16::from_bits(f64_to_bf16_bits(v)); break;
    case DType::I8: data<int8_t>()[i] = saturating_cast<int8_t>(v); break;
    case DType::I16: data<int16_t>()[i] = saturating_cast<int16_t>(v); break;
    case DType::I32: data<int32_t>()[i] = saturating_cast<int32_t>(v); break;
    case DType::I64: data<int64_t>()[i] = saturating_cast<int64_t>(v); break;
    case DType::U8: data<uint8_t>()[i] = saturating_cast<uint8_t>(v); break;
    case DType::U16: data<uint16_t>()[i] = saturating_cast<uint16_t>(v); break;
    case DType::U32: data<uint32_t>()[i] = saturating_cast<uint32_t>(v); break;
    case DType::Bool: data<bool>()[i] = (v != 0); break;
    case DType::U64: data<uint64_t>()[i] = saturating_cast<uint64_t>(v); break;
    case DType::I4: data<int8_t>()[i] = wrap_i4(saturating_cast<int64_t>(v)); break;
    case DType::U4: data<uint8_t>()[i] = wrap_u4(saturating_cast<int64_t>(v)); break;
    case DType::Str: throw_string_has_no_numeric_type();
    // The narrow floats round through f32, as ONNX converts them.
    default: data<uint8_t>()[i] = f32_to_narrow_bits(dtype_, float(v)); break;
  }
}

int64_t HostTensor::get_i64(int64_t i) const {
  return dispatch_dtype(dtype_, [&](auto tag) -> int64_t {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) return int64_t(data<T>()[i]);
    else return saturating_cast<int64_t>(double(data<T>()[i]));
  });
}

void HostTensor::set_i64(int64_t i, int64_t v) {
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) data<bool>()[i] = (v != 0);
    else if (dtype_ == DType::I4) data<int8_t>()[i] = wrap_i4(v);
    else if (dtype_ == DType::U4) data<uint8_t>()[i] = wrap_u4(v);
    else if constexpr (std::is_integral_v<T>) data<T>()[i] = T(v);  // wraps like C++ casts
    else set_f64(i, double(v));
  });
}

std::vector<double> HostTensor::to_doubles() const {
  std::vector<double> out(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) out[size_t(i)] = get_f64(i);
  return out;
}

HostTensor HostTensor::sequence(DType dtype, std::vector<HostTensor> items) {
  HostTensor t;
  t.dtype_ = dtype;
  t.kind_ = ValueKind::Sequence;
  t.items_ = std::make_shared<const std::vector<HostTensor>>(std::move(items));
  return t;
}

HostTensor HostTensor::optional(DType dtype, std::vector<HostTensor> items) {
  KILN_CHECK(items.size() <= 1, "an optional holds at most one value, got ", items.size());
  HostTensor t = sequence(dtype, std::move(items));
  t.kind_ = ValueKind::Optional;
  return t;
}

HostTensor HostTensor::from_strings(std::vector<int64_t> shape, std::vector<std::string> values) {
  HostTensor t = empty(DType::Str, std::move(shape));
  KILN_CHECK(int64_t(values.size()) == t.numel(), "from_strings: ", values.size(), " values for shape ",
             dims_to_string(t.shape()));
  *t.strings_ = std::move(values);
  return t;
}

const std::string& HostTensor::str_at(int64_t i) const {
  KILN_CHECK(strings_ != nullptr, "str_at on a tensor of dtype ", dtype_name(dtype_), ", not str");
  return (*strings_)[size_t(i)];
}

void HostTensor::set_str(int64_t i, std::string v) {
  KILN_CHECK(strings_ != nullptr, "set_str on a tensor of dtype ", dtype_name(dtype_), ", not str");
  (*strings_)[size_t(i)] = std::move(v);
}

const std::vector<HostTensor>& HostTensor::items() const {
  static const std::vector<HostTensor> none;
  return items_ ? *items_ : none;
}

HostTensor HostTensor::clone() const {
  if (!is_tensor()) {
    std::vector<HostTensor> copies;
    for (const HostTensor& item : items()) copies.push_back(item.clone());
    HostTensor t = sequence(dtype_, std::move(copies));
    t.kind_ = kind_;
    return t;
  }
  HostTensor t = empty(dtype_, shape_);
  if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
  if (strings_) *t.strings_ = *strings_;
  return t;
}

HostTensor HostTensor::reshaped(std::vector<int64_t> shape) const {
  KILN_CHECK(numel_of(shape) == numel_, "cannot reshape ", dims_to_string(shape_), " to ",
             dims_to_string(shape));
  HostTensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

std::vector<int64_t> HostTensor::strides() const {
  std::vector<int64_t> s(shape_.size());
  int64_t acc = 1;
  for (int i = int(shape_.size()) - 1; i >= 0; --i) {
    s[size_t(i)] = acc;
    acc *= shape_[size_t(i)];
  }
  return s;
}

std::string HostTensor::to_string(int max_elems) const {
  if (!is_tensor()) {
    std::string out = kind_ == ValueKind::Sequence ? "seq(" : "opt(";
    for (size_t i = 0; i < items().size(); ++i) out += (i ? ", " : "") + items()[i].to_string(max_elems);
    return out + ")";
  }
  std::string out = std::string(dtype_name(dtype_)) + dims_to_string(shape_) + " {";
  for (int64_t i = 0; i < numel_ && i < max_elems; ++i) {
    if (i) out += ", ";
    if (dtype_ == DType::Str) {
      out += "\"" + str_at(i) + "\"";
    } else if (is_float(dtype_)) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", get_f64(i));
      out += buf;
    } else {
      out += std::to_string(get_i64(i));
    }
  }
  if (numel_ > max_elems) out += ", ...";
  return out + "}";
}

bool HostTensor::bit_equal(const HostTensor& other) const {
  if (kind_ != other.kind_) return false;
  if (!is_tensor()) {
    if (dtype_ != other.dtype_ || items().size() != other.items().size()) return false;
    for (size_t i = 0; i < items().size(); ++i)
      if (!items()[i].bit_equal(other.items()[i])) return false;
    return true;
  }
  if (dtype_ == DType::Str)
    return other.dtype_ == DType::Str && shape_ == other.shape_ &&
           (numel_ == 0 || *strings_ == *other.strings_);
  return dtype_ == other.dtype_ && shape_ == other.shape_ &&
         (nbytes() == 0 || std::memcmp(raw(), other.raw(), nbytes()) == 0);
}

}  // namespace kiln
