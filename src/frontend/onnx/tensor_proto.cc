// ONNX TensorProto <-> HostTensor, including raw/typed storage and external-data files. Why: the
// initializers, Constant nodes and test-data .pb files all arrive in this one format.
#include <cstring>
#include <filesystem>
#include <fstream>

#include "frontend/onnx/importer.h"
#include "kiln/error.h"

namespace kiln::onnx_import {

namespace fs = std::filesystem;
using onnx::TensorProto;

// ONNX element types newer than the system's onnx.proto (Debian's libonnx stops at 16).
namespace newer_types {
constexpr int kFloat8E4M3FN = 17, kFloat8E4M3FNUZ = 18, kFloat8E5M2 = 19, kFloat8E5M2FNUZ = 20, kUInt4 = 21,
              kInt4 = 22, kFloat4E2M1 = 23, kFloat8E8M0 = 24;
}  // namespace newer_types

std::optional<DType> dtype_from_onnx(int t) {
  switch (t) {
    case TensorProto::FLOAT: return DType::F32;
    case TensorProto::DOUBLE: return DType::F64;
    case TensorProto::FLOAT16: return DType::F16;
    case TensorProto::BFLOAT16: return DType::BF16;
    case TensorProto::INT8: return DType::I8;
    case TensorProto::INT16: return DType::I16;
    case TensorProto::INT32: return DType::I32;
    case TensorProto::INT64: return DType::I64;
    case TensorProto::UINT8: return DType::U8;
    case TensorProto::UINT16: return DType::U16;
    case TensorProto::UINT32: return DType::U32;
    case TensorProto::BOOL: return DType::Bool;
    case TensorProto::UINT64: return DType::U64;
    case TensorProto::STRING: return DType::Str;
    case newer_types::kFloat8E4M3FN: return DType::F8E4M3FN;
    case newer_types::kFloat8E4M3FNUZ: return DType::F8E4M3FNUZ;
    case newer_types::kFloat8E5M2: return DType::F8E5M2;
    case newer_types::kFloat8E5M2FNUZ: return DType::F8E5M2FNUZ;
    case newer_types::kUInt4: return DType::U4;
    case newer_types::kInt4: return DType::I4;
    case newer_types::kFloat4E2M1: return DType::F4E2M1;
    case newer_types::kFloat8E8M0: return DType::F8E8M0;
    default: return std::nullopt;
  }
}

int onnx_from_dtype(DType t) {
  switch (t) {
    case DType::F32: return TensorProto::FLOAT;
    case DType::F64: return TensorProto::DOUBLE;
    case DType::F16: return TensorProto::FLOAT16;
    case DType::BF16: return TensorProto::BFLOAT16;
    case DType::I8: return TensorProto::INT8;
    case DType::I16: return TensorProto::INT16;
    case DType::I32: return TensorProto::INT32;
    case DType::I64: return TensorProto::INT64;
    case DType::U8: return TensorProto::UINT8;
    case DType::U16: return TensorProto::UINT16;
    case DType::U32: return TensorProto::UINT32;
    case DType::Bool: return TensorProto::BOOL;
    case DType::U64: return TensorProto::UINT64;
    case DType::Str: return TensorProto::STRING;
    case DType::F8E4M3FN: return newer_types::kFloat8E4M3FN;
    case DType::F8E4M3FNUZ: return newer_types::kFloat8E4M3FNUZ;
    case DType::F8E5M2: return newer_types::kFloat8E5M2;
    case DType::F8E5M2FNUZ: return newer_types::kFloat8E5M2FNUZ;
    case DType::U4: return newer_types::kUInt4;
    case DType::I4: return newer_types::kInt4;
    case DType::F4E2M1: return newer_types::kFloat4E2M1;
    case DType::F8E8M0: return newer_types::kFloat8E8M0;
  }
  return TensorProto::UNDEFINED;
}

std::string onnx_type_name(int t) {
  if (TensorProto::DataType_IsValid(t)) return TensorProto::DataType_Name(TensorProto::DataType(t));
  static const char* const newer[] = {"FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
                                      "UINT4",        "INT4",           "FLOAT4E2M1", "FLOAT8E8M0"};
  if (t >= newer_types::kFloat8E4M3FN && t <= newer_types::kFloat8E8M0) return newer[t - newer_types::kFloat8E4M3FN];
  return str("<unknown element type ", t, ">");
}

namespace {

// Reads [offset, offset+length) of an external-data file that must lie inside base_dir.
std::string read_external(const TensorProto& t, const std::string& base_dir, const std::string& where,
                          int64_t want_bytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = std::stoll(kv.value());
      else if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (const std::exception&) {
      throw Error(str(where, ": external data field '", kv.key(), "' is not a number: '", kv.value(), "'"));
    }
  }
  KILN_CHECK(!location.empty(), where, ": external data has no 'location'");
  KILN_CHECK(!base_dir.empty(), where, ": external data '", location,
             "' cannot be resolved (model was not loaded from a file)");
  fs::path rel(location);
  KILN_CHECK(!rel.is_absolute(), where, ": external data location '", location, "' must be relative");
  for (const auto& part : rel)
    KILN_CHECK(part != "..", where, ": external data location '", location, "' leaves the model's folder");
  fs::path full = fs::path(base_dir) / rel;
  std::error_code ec;
  auto size = fs::file_size(full, ec);
  KILN_CHECK(!ec, where, ": cannot open external data file '", full.string(), "'");
  KILN_CHECK(offset >= 0 && uint64_t(offset) <= size, where, ": external data offset ", offset,
             " is past the end of '", full.string(), "' (", size, " bytes)");
  if (length < 0) length = int64_t(size) - offset;
  KILN_CHECK(length == want_bytes, where, ": external data in '", full.string(), "' has ", length,
             " bytes, the tensor needs ", want_bytes);
  KILN_CHECK(uint64_t(offset + length) <= size, where, ": external data range [", offset, ", ",
             offset + length, ") is past the end of '", full.string(), "' (", size, " bytes)");
  std::ifstream in(full, std::ios::binary);
  KILN_CHECK(in.good(), where, ": cannot read external data file '", full.string(), "'");
  std::string buf(size_t(length), '\0');
  in.seekg(offset);
  in.read(buf.data(), length);
  KILN_CHECK(in.gcount() == length, where, ": short read of external data file '", full.string(), "'");
  return buf;
}

template <typename Field>
void check_count(const Field& f, int64_t n, const std::string& where, const char* field) {
  KILN_CHECK(int64_t(f.size()) == n, where, ": ", field, " holds ", f.size(), " values, the shape needs ", n);
}

// ONNX packs 4-bit elements two per byte, the first in the low nibble; Kiln holds one per byte
// (i4 sign-extended).
void unpack_4bit(const uint8_t* packed, HostTensor& out) {
  for (int64_t i = 0; i < out.numel(); ++i) {
    uint8_t nibble = uint8_t((i % 2 ? packed[i / 2] >> 4 : packed[i / 2]) & 0xf);
    out.data<uint8_t>()[i] = out.dtype() == DType::I4 ? uint8_t(wrap_i4(nibble)) : nibble;
  }
}

std::string pack_4bit(const HostTensor& t) {
  std::string packed(size_t((t.numel() + 1) / 2), '\0');
  for (int64_t i = 0; i < t.numel(); ++i)
    packed[size_t(i / 2)] = char(uint8_t(packed[size_t(i / 2)]) | ((t.data<uint8_t>()[i] & 0xf) << (i % 2 ? 4 : 0)));
  return packed;
}

}  // namespace

HostTensor tensor_from_proto(const TensorProto& t, const std::string& base_dir, const std::string& where,
                             int64_t max_bytes) {
  auto dt = dtype_from_onnx(t.data_type());
  if (!dt)
    throw UnsupportedError(str(where, ": element type ", onnx_type_name(t.data_type()),
                               " is not supported by Kiln"));
  KILN_CHECK(!t.has_segment(), where, ": segmented tensors are not supported");
  std::vector<int64_t> shape;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    KILN_CHECK(d >= 0, where, ": negative dim ", d, " in tensor shape");
    KILN_CHECK(d == 0 || n <= max_bytes / d, where, ": tensor shape is absurdly large");
    n *= d;
    shape.push_back(d);
  }
  if (*dt == DType::Str) {  // ONNX keeps strings (bytes, any encoding) in string_data only
    KILN_CHECK(t.data_location() != TensorProto::EXTERNAL && !t.has_raw_data(), where,
               ": a STRING tensor must hold its values in string_data (not raw or external data)");
    check_count(t.string_data(), n, where, "string_data");
    std::vector<std::string> values(t.string_data().begin(), t.string_data().end());
    int64_t total = 0;
    for (const std::string& v : values) total += int64_t(v.size());
    KILN_CHECK(total <= max_bytes, where, ": string tensor of ", total, " bytes exceeds the limit of ",
               max_bytes, " bytes");
    return HostTensor::from_strings(shape, std::move(values));
  }
  int64_t esize = dtype_size(*dt);
  KILN_CHECK(n <= max_bytes / esize, where, ": tensor of ", n, " elements exceeds the limit of ",
             max_bytes, " bytes");
  HostTensor out = HostTensor::zeros(*dt, shape);
  const bool packed = is_4bit(*dt);
  int64_t nbytes = packed ? (n + 1) / 2 : n * esize;
  auto copy_raw = [&](const std::string& raw) {
    KILN_CHECK(int64_t(raw.size()) == nbytes, where, ": raw data has ", raw.size(),
               " bytes, the shape ", dims_to_string(shape), " of ", dtype_name(*dt), " needs ", nbytes,
               packed ? " (two 4-bit elements per byte)" : "");
    if (packed) unpack_4bit(reinterpret_cast<const uint8_t*>(raw.data()), out);
    else if (nbytes) std::memcpy(out.raw(), raw.data(), size_t(nbytes));
    if (*dt == DType::Bool)  // normalise to 0/1
      for (int64_t i = 0; i < n; ++i) out.data<uint8_t>()[i] = out.data<uint8_t>()[i] != 0;
  };
  if (t.data_location() == TensorProto::EXTERNAL) {
    copy_raw(read_external(t, base_dir, where, nbytes));
    return out;
  }
  if (t.has_raw_data()) {
    copy_raw(t.raw_data());
    return out;
  }
  if (packed) {  // two elements per int32_data entry (one packed byte)
    check_count(t.int32_data(), nbytes, where, "int32_data");
    std::string bytes(size_t(nbytes), '\0');
    for (int64_t i = 0; i < nbytes; ++i) bytes[size_t(i)] = char(uint8_t(t.int32_data(int(i))));
    unpack_4bit(reinterpret_cast<const uint8_t*>(bytes.data()), out);
    return out;
  }
  if (is_narrow_float(*dt)) {  // one code per int32_data entry
    check_count(t.int32_data(), n, where, "int32_data");
    for (int64_t i = 0; i < n; ++i) out.data<uint8_t>()[i] = uint8_t(t.int32_data(int(i)));
    return out;
  }
  switch (*dt) {
    case DType::F32:
      check_count(t.float_data(), n, where, "float_data");
      for (int64_t i = 0; i < n; ++i) out.data<float>()[i] = t.float_data(int(i));
      break;
    case DType::F64:
      check_count(t.double_data(), n, where, "double_data");
      for (int64_t i = 0; i < n; ++i) out.data<double>()[i] = t.double_data(int(i));
      break;
    case DType::I64:
      check_count(t.int64_data(), n, where, "int64_data");
      for (int64_t i = 0; i < n; ++i) out.data<int64_t>()[i] = t.int64_data(int(i));
      break;
    case DType::F16:
    case DType::BF16:  // bit patterns stored in int32_data
      check_count(t.int32_data(), n, where, "int32_data");
      for (int64_t i = 0; i < n; ++i) out.data<uint16_t>()[i] = uint16_t(t.int32_data(int(i)));
      break;
    case DType::U32:  // uint32 and uint64 live in uint64_data
    case DType::U64:
      check_count(t.uint64_data(), n, where, "uint64_data");
      for (int64_t i = 0; i < n; ++i) out.set_i64(i, int64_t(t.uint64_data(int(i))));
      break;
    default:  // the remaining integer types (uint16 included) and bool live in int32_data
      check_count(t.int32_data(), n, where, "int32_data");
      for (int64_t i = 0; i < n; ++i) out.set_i64(i, t.int32_data(int(i)));
      break;
  }
  return out;
}

void tensor_to_proto(const HostTensor& t, TensorProto* out) {
  out->set_data_type(onnx_from_dtype(t.dtype()));
  out->clear_dims();
  for (int64_t d : t.shape()) out->add_dims(d);
  if (t.dtype() == DType::Str)
    for (int64_t i = 0; i < t.numel(); ++i) out->add_string_data(t.str_at(i));
  else if (is_4bit(t.dtype())) out->set_raw_data(pack_4bit(t));
  else out->set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
}

}  // namespace kiln::onnx_import
