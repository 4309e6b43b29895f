// numpy <-> HostTensor without copies (see arrays.h).
#include "arrays.h"

#include <cstring>

#include "kiln/error.h"

namespace kiln::py {

DType dtype_named(const std::string& name, const std::string& what) {
  std::optional<DType> d = parse_dtype(name);
  KILN_CHECK(d.has_value(), what, ": unknown dtype '", name, "'");
  return *d;
}

namespace {

std::vector<int64_t> shape_of(const InArray& a) {
  std::vector<int64_t> shape(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) shape[i] = int64_t(a.shape(i));
  return shape;
}

void check_item_size(const InArray& a, DType dtype, const std::string& what) {
  KILN_CHECK(dtype != DType::Str, what, ": string tensors cannot be passed as arrays");
  KILN_CHECK(!is_narrow(dtype), what, ": ", dtype_name(dtype), " tensors cannot be passed as arrays");
  KILN_CHECK(int(a.itemsize()) == dtype_size(dtype), what, ": an array of ", a.itemsize(),
             "-byte items cannot hold ", dtype_name(dtype), " (", dtype_size(dtype), " bytes)");
}

nb::dlpack::dtype dl_dtype(DType d) {
  using Code = nb::dlpack::dtype_code;
  auto make = [](Code c, int bits) { return nb::dlpack::dtype{uint8_t(c), uint8_t(bits), 1}; };
  switch (d) {
    case DType::F32: return make(Code::Float, 32);
    case DType::F64: return make(Code::Float, 64);
    case DType::F16: return make(Code::Float, 16);
    case DType::BF16: return make(Code::UInt, 16);  // numpy has no bfloat16: the bits
    case DType::I8: return make(Code::Int, 8);
    case DType::I16: return make(Code::Int, 16);
    case DType::I32: return make(Code::Int, 32);
    case DType::I64: return make(Code::Int, 64);
    case DType::U8: return make(Code::UInt, 8);
    case DType::U16: return make(Code::UInt, 16);
    case DType::U32: return make(Code::UInt, 32);
    case DType::U64: return make(Code::UInt, 64);
    case DType::Bool: return make(Code::Bool, 8);
    default: break;
  }
  throw Error(str("a ", dtype_name(d), " result cannot be returned as an array"));
}

}  // namespace

HostTensor borrow_array(const InArray& a, DType dtype, const std::string& what) {
  check_item_size(a, dtype, what);
  return HostTensor::borrow(dtype, shape_of(a), const_cast<void*>(a.data()), nullptr);
}

HostTensor copy_array(const InArray& a, DType dtype, const std::string& what) {
  check_item_size(a, dtype, what);
  HostTensor t = HostTensor::empty(dtype, shape_of(a));
  if (t.nbytes() > 0) std::memcpy(t.raw(), a.data(), t.nbytes());
  return t;
}

nb::object array_of(HostTensor t) {
  KILN_CHECK(t.is_tensor(), "a ", t.kind() == ValueKind::Sequence ? "sequence" : "optional",
             " result cannot be returned as an array");
  nb::dlpack::dtype dt = dl_dtype(t.dtype());
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  auto* keep = new HostTensor(std::move(t));
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<HostTensor*>(p); });
  void* data = keep->raw();
  static char empty_byte = 0;
  if (data == nullptr) data = &empty_byte;  // a zero-size result: numpy wants a non-null pointer
  nb::ndarray<nb::numpy> array(data, shape.size(), shape.data(), owner, nullptr, dt);
  return nb::cast(array, nb::rv_policy::reference);
}

void unalias_outputs(std::vector<HostTensor>& outputs, const std::vector<HostTensor>& inputs) {
  for (HostTensor& out : outputs) {
    if (!out.is_tensor() || out.nbytes() == 0) continue;
    auto* begin = static_cast<const uint8_t*>(out.raw());
    for (const HostTensor& in : inputs) {
      auto* in_begin = static_cast<const uint8_t*>(in.raw());
      if (in.nbytes() > 0 && begin >= in_begin && begin < in_begin + in.nbytes()) {
        out = out.clone();
        break;
      }
    }
  }
}

}  // namespace kiln::py
