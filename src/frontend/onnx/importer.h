// Internal interface of the ONNX importer: the per-node context that op handlers use to read
// operands and attributes and to build Kiln nodes, and the registry of handlers by op type. Why:
// one file per op family stays small when all of them share these helpers.
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <optional>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/graph.h"
#include "kiln/onnx.h"

namespace kiln::onnx_import {

// ONNX element type <-> Kiln DType; nullopt when Kiln has no such dtype.
std::optional<DType> dtype_from_onnx(int onnx_type);
int onnx_from_dtype(DType t);
std::string onnx_type_name(int onnx_type);

// TensorProto -> HostTensor. `base_dir` resolves external data (empty: refused); `where` names
// the tensor in messages. Throws kiln::Error / UnsupportedError.
HostTensor tensor_from_proto(const onnx::TensorProto& t, const std::string& base_dir,
                             const std::string& where, int64_t max_bytes);
void tensor_to_proto(const HostTensor& t, onnx::TensorProto* out);

class Importer;

// Everything an op handler sees for one ONNX node.
class NodeCtx {
 public:
  NodeCtx(Importer& im, const onnx::NodeProto& node, int opset) : im_(im), node_(node), opset_(opset) {}

  const onnx::NodeProto& node() const { return node_; }
  int opset() const { return opset_; }
  const std::string& op_type() const { return node_.op_type(); }

  // ---- operands (ONNX marks an omitted optional input with an empty name) ----
  int num_inputs() const { return node_.input_size(); }
  bool has_input(int i) const { return i < node_.input_size() && !node_.input(i).empty(); }
  Value* input(int i) const;
  std::vector<Value*> inputs() const;  // all present inputs
  // The value of an operand when it is known at import time (a constant, or folded from them).
  std::optional<HostTensor> known(int i) const;
  // Known values of a small integer operand, possibly symbolic (e.g. from Shape of a [B, 128]).
  std::optional<std::vector<SymInt>> known_dims(int i) const;
  // Same, but an error (naming the operand) when not known.
  HostTensor require_known(int i, const std::string& what) const;
  std::vector<int64_t> require_ints(int i, const std::string& what) const;
  std::vector<SymInt> require_dims(int i, const std::string& what) const;
  // A zeroed table of prod(dims) doubles for a decomposition's constant matrix; an error naming the
  // node (not an allocation failure or an overflow) when the model's dims make it absurdly large.
  std::vector<double> table(std::initializer_list<int64_t> dims, const std::string& what) const;

  // ---- attributes ----
  const onnx::AttributeProto* attr(const std::string& name) const;
  bool has_attr(const std::string& name) const { return attr(name) != nullptr; }
  int64_t attr_int(const std::string& name, int64_t dflt) const;
  double attr_float(const std::string& name, double dflt) const;
  std::string attr_string(const std::string& name, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> dflt = {}) const;
  std::vector<double> attr_floats(const std::string& name, std::vector<double> dflt = {}) const;
  HostTensor attr_tensor(const std::string& name) const;

  // ---- building ----
  Value* emit(Op op, const std::vector<Value*>& operands, Attrs attrs = {});
  std::vector<Value*> emit_multi(Op op, const std::vector<Value*>& operands, Attrs attrs = {});
  Value* constant(HostTensor t);
  Value* scalar_like(const Value* like, double v);  // a rank-0 constant of like's dtype
  Value* cast(Value* v, DType to);                  // no-op when already `to`
  Value* reshape(Value* v, const Shape& shape);
  void set_output(int i, Value* v);
  int num_outputs() const { return node_.output_size(); }
  bool wants_output(int i) const { return i < node_.output_size() && !node_.output(i).empty(); }

  // ---- errors: messages name the file, node, op type, domain and opset ----
  std::string where() const;
  [[noreturn]] void fail(const std::string& msg) const;
  [[noreturn]] void unsupported(const std::string& msg) const;

  Importer& importer() { return im_; }

 private:
  Importer& im_;
  const onnx::NodeProto& node_;
  int opset_;
};

using OpHandler = std::function<void(NodeCtx&)>;
using OpRegistry = std::map<std::string, OpHandler>;

// Each op-family file fills the registry (explicit calls: static registration would be dropped
// by the linker from a static library).
void register_elementwise_ops(OpRegistry& r);
void register_shape_ops(OpRegistry& r);
void register_reduce_ops(OpRegistry& r);
void register_nn_ops(OpRegistry& r);
void register_signal_ops(OpRegistry& r);  // ops_signal.cc: windows, DFT, STFT
void register_index_ops(OpRegistry& r);   // ops_index.cc: GatherND, Scatter*, Compress, ...
void register_vision_ops(OpRegistry& r);  // ops_vision.cc: GridSample, Col2Im, LpPool, ...
void register_rnn_ops(OpRegistry& r);     // ops_rnn.cc: RNN, GRU, LSTM unrolled
void register_math_ops(OpRegistry& r);        // ops_math.cc: inverse/hyperbolic trig, bitwise, Det, EyeLike
void register_transformer_ops(OpRegistry& r); // ops_transformer.cc: Attention, RotaryEmbedding, norms
void register_loss_ops(OpRegistry& r);        // ops_loss.cc: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
void register_quant_ops(OpRegistry& r);       // ops_quant.cc: (De)QuantizeLinear, MatMulInteger, QLinearMatMul
void register_control_ops(OpRegistry& r);     // ops_control.cc: If, Loop, Scan, sequences, optionals
const OpRegistry& op_registry();

// Shared helpers for handlers.
// Broadcast the shapes of two values the numpy way (for ops like Expand), failing via ctx.
Shape broadcast_dims(const NodeCtx& c, const Shape& a, const Shape& b);
int normalize_axis(const NodeCtx& c, int64_t axis, int rank);

// ---- sub-graphs (importer.cc; used by ops_control.cc) ----
// A Kiln type for an ONNX type when the declaration fixes it (tensors with static dims, optionals
// of them); sequences never do (their length is part of a Kiln type).
std::optional<TensorType> type_from_proto(const onnx::TypeProto& tp);
// Names the ONNX sub-graphs (and those nested in them) read from enclosing scopes, in first-use order.
std::vector<std::string> outer_names(const NodeCtx& c, const std::vector<const onnx::GraphProto*>& graphs);
// The outer values a sub-graph node passes as explicit operands: those of `names` not known at
// import time (known small values are copied into the sub-graph as constants instead).
std::vector<Value*> captured_values(NodeCtx& c, const std::vector<std::string>& names);
// `gp` as a Kiln graph: its formal inputs typed `formal_types`, then one input per captured value
// of `names`, in captured_values order. Errors name the node.
GraphAttr import_subgraph(NodeCtx& c, const onnx::GraphProto& gp, const std::vector<TensorType>& formal_types,
                          const std::vector<std::string>& names);
// Imports `gp`'s nodes into the current graph with its formal inputs bound to `formals` (an If
// whose condition is known, an unrolled SequenceMap); returns its outputs.
std::vector<Value*> inline_subgraph(NodeCtx& c, const onnx::GraphProto& gp, const std::vector<Value*>& formals);
// narrow_types.cc: ONNX Cast semantics for every target (the `saturate` clamp for float8, f8e8m0's
// round_mode), and the refusal of ops that do not compute on the 8- and 4-bit types.
Value* onnx_cast(NodeCtx& c, Value* x, DType to, bool saturate, const std::string& round_mode = "up");
void check_narrow_operands(NodeCtx& c);

}  // namespace kiln::onnx_import
