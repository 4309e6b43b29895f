// Reading and writing tensors as files: NumPy .npy and ONNX TensorProto .pb. Why: the CLI and the
// conformance runner feed inputs and check outputs made by NumPy, PyTorch and ONNX's own tests.
#pragma once

#include <string>

#include "kiln/host_tensor.h"

namespace kiln {

// .npy (format 1.0-3.0, little-endian, C order): f32 f64 f16 i8 i16 i32 i64 u8 bool. Throws
// kiln::Error naming the file on a malformed header, an unsupported dtype, or short data.
HostTensor read_npy(const std::string& path);
void write_npy(const std::string& path, const HostTensor& t);
HostTensor parse_npy(const std::string& bytes, const std::string& origin);
std::string serialize_npy(const HostTensor& t);

// A serialised onnx.TensorProto; `name`, if given, receives the tensor's name field.
HostTensor read_tensor_pb(const std::string& path, std::string* name = nullptr);
void write_tensor_pb(const std::string& path, const HostTensor& t, const std::string& name = "");

// A serialised onnx.TensorProto, SequenceProto (of tensors) or OptionalProto, by `kind` (the .pb
// holds no tag saying which; the model's input/output types do). Containers come back as
// HostTensor::sequence / HostTensor::optional.
HostTensor read_value_pb(const std::string& path, ValueKind kind, std::string* name = nullptr);

// Picks the format by extension: .npy or .pb.
HostTensor read_tensor_file(const std::string& path, std::string* name = nullptr);
void write_tensor_file(const std::string& path, const HostTensor& t, const std::string& name = "");

}  // namespace kiln
