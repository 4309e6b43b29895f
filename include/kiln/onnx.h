// The ONNX importer's public API. Why: real models come from other frameworks as .onnx files;
// this turns one into a Kiln Graph (typed, symbolic shapes) that every later stage can take.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/graph.h"
#include "kiln/host_tensor.h"

namespace kiln {

// Thrown when a model is well formed but uses something Kiln does not support (an op, a domain,
// an opset, an element type). Distinct from kiln::Error so tools can report "unsupported" apart
// from "broken"; it still is a kiln::Error.
class UnsupportedError : public Error {
 public:
  using Error::Error;
};

struct ImportOptions {
  // Graph inputs whose values are fixed at import time (specialisation, like a guard on a value).
  // Only used for inputs that feed an operand Kiln needs as a constant (a Reshape's shape, a
  // Slice's starts, TopK's k...): such an input becomes a constant and is not a graph input.
  std::map<std::string, HostTensor> static_input_values;
  // Whether such an input is frozen when it reaches the operand only through Shape or Size. false:
  // it stays a graph input and Shape reads its dims (declared or input_shapes); where one of them is
  // symbolic the operand is then unknown and the import fails (UnsupportedError). Why: a test that
  // reshapes x to Shape(y) should still feed y at run time.
  bool freeze_through_shape = true;
  // Concrete sizes for named symbolic dims (dim_param); unnamed unknown dims get fresh names.
  std::map<std::string, int64_t> dim_values;
  // Concrete shapes for named graph inputs (specialisation: replaces their declared dims, so
  // shape sub-graphs fold to constants). The rank must match the declared one.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Types for graph inputs whose ONNX declaration leaves them open: sequences (a Kiln sequence
  // type fixes the length and each element's shape, "seq<f32[2], f32[3]>") and optionals of them.
  std::map<std::string, TensorType> input_types;
  // Initializers become Constant nodes (true) or extra graph inputs named after them (false),
  // e.g. to feed trained weights at run time.
  bool initializers_as_constants = true;
  // Reject tensors (initializers, constants, external data) bigger than this many bytes.
  int64_t max_tensor_bytes = int64_t(1) << 34;
};

// Loads an .onnx file (external-data files are read relative to its folder). Throws kiln::Error
// (or UnsupportedError) naming the file, node, op, domain and opset on bad or unsupported input.
std::unique_ptr<Graph> import_onnx(const std::string& path, const ImportOptions& options = {});

// Same, from the serialised bytes of a ModelProto; `origin` names it in messages and is the base
// folder for external data (empty: external data is refused).
std::unique_ptr<Graph> import_onnx_bytes(const std::string& bytes, const std::string& origin,
                                         const ImportOptions& options = {},
                                         const std::string& base_dir = "");

// The names of a model's real inputs (graph inputs that are not initializers), in order.
std::vector<std::string> onnx_input_names(const std::string& path);
// What those inputs and the graph outputs are (tensor, sequence, optional), to read their .pb data.
struct OnnxValueKinds {
  std::vector<ValueKind> inputs, outputs;
};
OnnxValueKinds onnx_value_kinds(const std::string& path);

}  // namespace kiln
