// TensorType helpers.
#include "kiln/types.h"

#include "kiln/error.h"

namespace kiln {

std::string_view device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

TensorType TensorType::sequence(DType dtype, std::vector<TensorType> elements) {
  TensorType t;
  t.dtype = dtype;
  t.kind = ValueKind::Sequence;
  for (const TensorType& e : elements)
    KILN_CHECK(e.is_tensor() && e.dtype == dtype, "a sequence of ", dtype_name(dtype), " cannot hold ",
               e.to_string());
  t.elements = std::move(elements);
  return t;
}

TensorType TensorType::optional(TensorType inner) {
  KILN_CHECK(inner.kind != ValueKind::Optional, "an optional cannot hold an optional (", inner.to_string(), ")");
  TensorType t;
  t.dtype = inner.dtype;
  t.kind = ValueKind::Optional;
  t.elements = {std::move(inner)};
  return t;
}

SymInt TensorType::numel() const {
  if (!is_tensor()) return SymInt(0);
  SymInt n(1);
  for (const auto& d : shape) n = n * d;
  return n;
}

bool TensorType::is_static() const {
  for (const auto& e : elements)
    if (!e.is_static()) return false;
  for (const auto& d : shape)
    if (!d.is_constant()) return false;
  return true;
}

std::vector<int64_t> TensorType::static_shape() const {
  std::vector<int64_t> out;
  out.reserve(shape.size());
  for (const auto& d : shape) {
    KILN_CHECK(d.is_constant(), "type ", to_string(), " has symbolic dim ", d.to_string(),
               " where a static shape is needed");
    out.push_back(d.constant());
  }
  return out;
}

std::string TensorType::to_string() const {
  if (kind == ValueKind::Sequence && elements.empty()) return "seq<" + std::string(dtype_name(dtype)) + ">";
  if (!is_tensor()) {
    std::string s = kind == ValueKind::Sequence ? "seq<" : "opt<";
    for (size_t i = 0; i < elements.size(); ++i) s += (i ? ", " : "") + elements[i].to_string();
    return s + ">";
  }
  std::string s = std::string(dtype_name(dtype)) + shape_to_string(shape);
  if (device != Device::CPU) s += "@" + std::string(device_name(device));
  return s;
}

Shape to_shape(const std::vector<int64_t>& dims) { return Shape(dims.begin(), dims.end()); }

TensorType type_of(const HostTensor& t) {
  switch (t.kind()) {
    case ValueKind::Tensor: return TensorType{t.dtype(), to_shape(t.shape()), Device::CPU};
    case ValueKind::Sequence: {
      std::vector<TensorType> elements;
      for (const HostTensor& item : t.items()) elements.push_back(type_of(item));
      return TensorType::sequence(t.dtype(), std::move(elements));
    }
    case ValueKind::Optional:
      return TensorType::optional(t.items().empty() ? TensorType{t.dtype(), {}, Device::CPU} : type_of(t.items()[0]));
  }
  return {};
}

}  // namespace kiln
