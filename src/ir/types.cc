// TensorType helpers.
#include "kiln/types.h"

#include "kiln/error.h"

namespace kiln {

std::string_view device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

SymInt TensorType::numel() const {
  SymInt n(1);
  for (const auto& d : shape) n = n * d;
  return n;
}

bool TensorType::is_static() const {
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
  std::string s = std::string(dtype_name(dtype)) + shape_to_string(shape);
  if (device != Device::CPU) s += "@" + std::string(device_name(device));
  return s;
}

Shape to_shape(const std::vector<int64_t>& dims) { return Shape(dims.begin(), dims.end()); }

}  // namespace kiln
