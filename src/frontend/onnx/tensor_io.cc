// .npy and TensorProto .pb tensor files (include/kiln/tensor_io.h). Why: the CLI's --input/--save/
// --expect and the conformance runner exchange tensors with NumPy and ONNX's test data.
#include "kiln/tensor_io.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include <onnx/onnx-data_pb.h>

#include "frontend/onnx/importer.h"
#include "kiln/error.h"

namespace kiln {

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), path, ": cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  KILN_CHECK(out.good(), path, ": cannot open for writing");
  out.write(bytes.data(), std::streamsize(bytes.size()));
  KILN_CHECK(out.good(), path, ": write failed");
}

struct NpyDescr {
  const char* text;
  DType dtype;
};
// Byte order: '<' little, '|' not applicable; big-endian ('>') is rejected.
constexpr NpyDescr kNpyTypes[] = {
    {"<f4", DType::F32}, {"<f8", DType::F64}, {"<f2", DType::F16}, {"|i1", DType::I8}, {"<i2", DType::I16},
    {"<i4", DType::I32}, {"<i8", DType::I64}, {"|u1", DType::U8},  {"|b1", DType::Bool}, {"<i1", DType::I8},
    {"<u1", DType::U8},  {"<u2", DType::U16}, {"<u4", DType::U32},  {"<b1", DType::Bool},
    {"<u8", DType::U64}};

// Value of 'key' in the header dict, as raw text up to the next top-level comma or closing brace.
std::string dict_field(const std::string& header, const std::string& key, const std::string& origin) {
  size_t k = header.find("'" + key + "'");
  KILN_CHECK(k != std::string::npos, origin, ": .npy header has no '", key, "'");
  size_t colon = header.find(':', k);
  KILN_CHECK(colon != std::string::npos, origin, ": malformed .npy header");
  size_t i = colon + 1;
  while (i < header.size() && header[i] == ' ') ++i;
  size_t end = i;
  if (end < header.size() && header[end] == '(') {
    end = header.find(')', end);
    KILN_CHECK(end != std::string::npos, origin, ": malformed .npy shape");
    return header.substr(i, end - i + 1);
  }
  while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  return header.substr(i, end - i);
}

}  // namespace

HostTensor parse_npy(const std::string& bytes, const std::string& origin) {
  KILN_CHECK(bytes.size() >= 10 && bytes.compare(0, 6, "\x93NUMPY") == 0, origin, ": not a .npy file (bad magic)");
  int major = uint8_t(bytes[6]);
  KILN_CHECK(major >= 1 && major <= 3, origin, ": unsupported .npy version ", major);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = size_t(uint8_t(bytes[8])) | size_t(uint8_t(bytes[9])) << 8;
    header_start = 10;
  } else {
    KILN_CHECK(bytes.size() >= 12, origin, ": truncated .npy header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= size_t(uint8_t(bytes[size_t(8 + i)])) << (8 * i);
    header_start = 12;
  }
  KILN_CHECK(header_start + header_len <= bytes.size(), origin, ": truncated .npy header");
  std::string header = bytes.substr(header_start, header_len);
  std::string descr = dict_field(header, "descr", origin);
  std::string fortran = dict_field(header, "fortran_order", origin);
  std::string shape_text = dict_field(header, "shape", origin);
  KILN_CHECK(fortran.find("False") != std::string::npos, origin, ": Fortran-order .npy files are not supported");
  std::string d = descr.size() >= 2 ? descr.substr(1, descr.size() - 2) : descr;
  std::optional<DType> dtype;
  for (const auto& t : kNpyTypes)
    if (d == t.text) dtype = t.dtype;
  KILN_CHECK(dtype.has_value(), origin, ": unsupported .npy dtype ", descr,
             " (supported: little-endian f2 f4 f8 i1 i2 i4 i8 u1 b1)");
  KILN_CHECK(shape_text.size() >= 2 && shape_text.front() == '(', origin, ": malformed .npy shape ", shape_text);
  std::vector<int64_t> shape;
  std::string inner = shape_text.substr(1, shape_text.size() - 2);
  std::stringstream ss(inner);
  std::string item;
  int64_t n = 1;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(' ');
    if (b == std::string::npos) continue;
    int64_t v;
    try {
      size_t used = 0;
      v = std::stoll(item.substr(b), &used);
    } catch (const std::exception&) {
      throw Error(str(origin, ": malformed .npy shape ", shape_text));
    }
    KILN_CHECK(v >= 0 && (v == 0 || n <= (int64_t(1) << 40) / v), origin, ": absurd .npy shape ", shape_text);
    n *= v;
    shape.push_back(v);
  }
  size_t data_start = header_start + header_len;
  size_t nbytes = size_t(n) * size_t(dtype_size(*dtype));
  KILN_CHECK(bytes.size() - data_start == nbytes, origin, ": .npy data has ", bytes.size() - data_start,
             " bytes, shape ", dims_to_string(shape), " of ", dtype_name(*dtype), " needs ", nbytes);
  HostTensor t = HostTensor::empty(*dtype, shape);
  if (nbytes) std::memcpy(t.raw(), bytes.data() + data_start, nbytes);
  if (*dtype == DType::Bool)
    for (int64_t i = 0; i < n; ++i) t.data<uint8_t>()[i] = t.data<uint8_t>()[i] != 0;
  return t;
}

std::string serialize_npy(const HostTensor& t) {
  KILN_CHECK(t.dtype() != DType::BF16 && !is_narrow(t.dtype()) && t.dtype() != DType::Str, dtype_name(t.dtype()),
             " has no .npy dtype; cast to f32 or save as .pb");
  const char* descr = nullptr;
  for (const auto& e : kNpyTypes)
    if (e.dtype == t.dtype()) {
      descr = e.text;
      break;
    }
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i) shape += str(t.shape()[i], t.shape().size() == 1 ? "," : (i + 1 < t.shape().size() ? ", " : ""));
  shape += ")";
  std::string header = str("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(header.size() & 0xff);
  out += char((header.size() >> 8) & 0xff);
  out += header;
  out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

HostTensor read_npy(const std::string& path) { return parse_npy(slurp(path), path); }
void write_npy(const std::string& path, const HostTensor& t) { spit(path, serialize_npy(t)); }

HostTensor read_tensor_pb(const std::string& path, std::string* name) {
  onnx::TensorProto proto;
  KILN_CHECK(proto.ParseFromString(slurp(path)), path, ": not a serialised onnx.TensorProto");
  if (name) *name = proto.name();
  std::string dir = path.substr(0, path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/'));
  return onnx_import::tensor_from_proto(proto, dir.empty() ? "." : dir, path, int64_t(1) << 34);
}

namespace {
HostTensor sequence_from_proto(const onnx::SequenceProto& p, const std::string& dir, const std::string& path) {
  KILN_CHECK(p.elem_type() == onnx::SequenceProto::TENSOR || p.tensor_values_size() == 0, path,
             ": only sequences of tensors are supported");
  std::vector<HostTensor> items;
  for (const auto& t : p.tensor_values()) items.push_back(onnx_import::tensor_from_proto(t, dir, path, int64_t(1) << 34));
  DType dtype = items.empty() ? DType::F32 : items[0].dtype();  // before items is moved from
  return HostTensor::sequence(dtype, std::move(items));
}
}  // namespace

HostTensor read_value_pb(const std::string& path, ValueKind kind, std::string* name) {
  if (kind == ValueKind::Tensor) return read_tensor_pb(path, name);
  std::string dir = path.substr(0, path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/'));
  if (dir.empty()) dir = ".";
  if (kind == ValueKind::Sequence) {
    onnx::SequenceProto proto;
    KILN_CHECK(proto.ParseFromString(slurp(path)), path, ": not a serialised onnx.SequenceProto");
    if (name) *name = proto.name();
    return sequence_from_proto(proto, dir, path);
  }
  onnx::OptionalProto proto;
  KILN_CHECK(proto.ParseFromString(slurp(path)), path, ": not a serialised onnx.OptionalProto");
  if (name) *name = proto.name();
  if (proto.has_tensor_value()) {
    HostTensor t = onnx_import::tensor_from_proto(proto.tensor_value(), dir, path, int64_t(1) << 34);
    return HostTensor::optional(t.dtype(), {t});
  }
  if (proto.has_sequence_value()) {
    HostTensor s = sequence_from_proto(proto.sequence_value(), dir, path);
    return HostTensor::optional(s.dtype(), {s});
  }
  KILN_CHECK(proto.elem_type() != onnx::OptionalProto::MAP && proto.elem_type() != onnx::OptionalProto::SPARSE_TENSOR,
             path, ": only optionals of tensors and sequences are supported");
  return HostTensor::optional(DType::F32, {});
}

void write_tensor_pb(const std::string& path, const HostTensor& t, const std::string& name) {
  onnx::TensorProto proto;
  onnx_import::tensor_to_proto(t, &proto);
  if (!name.empty()) proto.set_name(name);
  std::string bytes;
  KILN_CHECK(proto.SerializeToString(&bytes), path, ": cannot serialise tensor");
  spit(path, bytes);
}

static bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

HostTensor read_tensor_file(const std::string& path, std::string* name) {
  if (ends_with(path, ".npy")) {
    if (name) name->clear();
    return read_npy(path);
  }
  if (ends_with(path, ".pb")) return read_tensor_pb(path, name);
  throw Error(str(path, ": unknown tensor file type (use .npy or .pb)"));
}

void write_tensor_file(const std::string& path, const HostTensor& t, const std::string& name) {
  if (ends_with(path, ".npy")) return write_npy(path, t);
  if (ends_with(path, ".pb")) return write_tensor_pb(path, t, name);
  throw Error(str(path, ": unknown tensor file type (use .npy or .pb)"));
}

}  // namespace kiln
