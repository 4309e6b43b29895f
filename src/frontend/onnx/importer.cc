// The ONNX importer's driver: parses the ModelProto, checks opsets, makes graph inputs (with
// symbolic dims), constants from initializers, orders nodes, dispatches each to its op handler
// and tracks values known at import time. Why: handlers then only map semantics, one op each.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_set>

#include <onnx/defs/schema.h>

#include "frontend/onnx/importer.h"
#include "kiln/interp.h"

namespace kiln::onnx_import {

namespace fs = std::filesystem;

// The oldest default-domain opset whose op definitions the handlers implement; older nodes load
// only where their op's definition has not changed since (check_old_opset).
constexpr int kOldestFullOpset = 6;

// Operands Kiln needs as import-time constants (they become attributes), by ONNX op type. Graph
// inputs feeding them may be specialised through ImportOptions::static_input_values.
// Clip is not listed: bounds it does not know become maximum/minimum ops.
static const std::map<std::string, std::vector<int>>& constant_operands() {
  static const std::map<std::string, std::vector<int>> m = {
      {"Reshape", {1}},       {"Expand", {1}},        {"Tile", {1}},          {"Slice", {1, 2, 3, 4}},
      {"Pad", {1, 2, 3}},     {"TopK", {1}},          {"Range", {0, 1, 2}},   {"ConstantOfShape", {0}},
      {"Split", {1}},         {"Squeeze", {1}},       {"Unsqueeze", {1}},     {"ReduceSum", {1}},
      {"ReduceMean", {1}},    {"ReduceMax", {1}},     {"ReduceMin", {1}},     {"ReduceProd", {1}},
      {"ReduceL1", {1}},      {"ReduceL2", {1}},      {"ReduceLogSum", {1}},  {"ReduceLogSumExp", {1}},
      {"ReduceSumSquare", {1}}, {"Resize", {1, 2, 3}}, {"Upsample", {1}},     {"CumSum", {1}},
      {"Trilu", {1}},         {"OneHot", {1}},        {"Dropout", {1, 2}},
      {"HannWindow", {0}},    {"HammingWindow", {0}}, {"BlackmanWindow", {0}}, {"DFT", {1, 2}},
      {"STFT", {1, 3}},       {"Compress", {1}},      {"CenterCropPad", {1}},  {"Col2Im", {1, 2}},
      {"AffineGrid", {1}},    {"MaxUnpool", {2}},
      // Control flow and sequences (ops_control.cc): a Loop's trip count types its scan outputs;
      // sequence positions pick element types.
      {"Loop", {0}},          {"SequenceAt", {1}},    {"SequenceInsert", {2}}, {"SequenceErase", {1}},
      {"SplitToSequence", {1}},
  };
  return m;
}

class Importer {
 public:
  Importer(const onnx::ModelProto& model, std::string origin, std::string base_dir, const ImportOptions& opts)
      : model_(model), origin_(std::move(origin)), base_dir_(std::move(base_dir)), opts_(opts) {}
  // A nested scope (a sub-graph) that builds into `target`: its own names, the parent's opsets.
  Importer(const Importer& parent, Graph* target, const NodeCtx& c)
      : model_(parent.model_), origin_(parent.origin_), base_dir_(parent.base_dir_), opts_(parent.opts_),
        graph_(target), opsets_(parent.opsets_), depth_(parent.depth_ + 1) {
    if (depth_ > kMaxSubgraphDepth) c.fail(str("sub-graphs nest deeper than ", kMaxSubgraphDepth, " levels"));
  }

  std::unique_ptr<Graph> run();

  // ---- used by NodeCtx ----
  Value* lookup(const std::string& name, const NodeCtx& c) const {
    auto it = values_.find(name);
    if (it == values_.end()) c.fail(str("input '", name, "' is not produced by any node, input or initializer"));
    return it->second;
  }
  void bind(const std::string& name, Value* v) { values_[name] = v; }
  // Concrete value if known, including integer vectors whose symbolic dims all turned constant
  // (Shape of a statically shaped tensor and what is computed from it).
  std::optional<HostTensor> known(const Value* v) const {
    auto it = known_.find(v);
    if (it != known_.end()) return it->second;
    auto d = dims_.find(v);
    if (d == dims_.end() || v->type.rank() > 1) return std::nullopt;
    for (const auto& x : d->second)
      if (!x.is_constant()) return std::nullopt;
    std::vector<int64_t> shape;
    if (v->type.rank() == 1) shape.push_back(int64_t(d->second.size()));
    HostTensor t = HostTensor::zeros(v->type.dtype, shape);
    for (size_t i = 0; i < d->second.size(); ++i) t.set_i64(int64_t(i), d->second[i].constant());
    return t;
  }
  std::optional<std::vector<SymInt>> known_dims(const Value* v) const;
  std::vector<Value*> emit(Op op, const std::vector<Value*>& operands, Attrs attrs, const std::string& node_name);
  Graph& graph() { return *graph_; }
  const std::string& origin() const { return origin_; }
  const std::string& base_dir() const { return base_dir_; }
  const ImportOptions& options() const { return opts_; }
  void remember(const Value* v, HostTensor t) { known_[v] = std::move(t); }

  // ---- sub-graphs (the free functions in importer.h describe them) ----
  static constexpr int kMaxSubgraphDepth = 32;
  bool copied_into_subgraph(const Value* v) const {  // known and small: a constant inside
    auto k = known(v);
    return k && k->is_tensor() && k->numel() <= 4096;
  }
  GraphAttr import_subgraph(const NodeCtx& c, const onnx::GraphProto& gp, const std::vector<TensorType>& formal_types,
                            const std::vector<std::string>& names);
  std::vector<Value*> inline_subgraph(const NodeCtx& c, const onnx::GraphProto& gp, const std::vector<Value*>& formals);
  // The values an imported sub-graph body produced for its declared outputs, in order.
  std::vector<Value*> subgraph_outputs(const Importer& sub, const onnx::GraphProto& gp) const;

 private:
  void import_body(const onnx::GraphProto& gp, const NodeCtx& c);
  void make_inputs(const onnx::GraphProto& gp);
  void make_initializers(const onnx::GraphProto& gp);
  std::vector<const onnx::NodeProto*> ordered_nodes(const onnx::GraphProto& gp);
  void import_node(const onnx::NodeProto& n);
  int opset_for(const std::string& domain) const;
  void try_fold(const Node& n);
  std::set<std::string> inputs_to_freeze(const onnx::GraphProto& gp) const;
  Shape shape_from_proto(const onnx::TypeProto& tp, const std::string& input_name);
  TensorType container_input_type(const onnx::ValueInfoProto& in) const;

  const onnx::ModelProto& model_;
  std::string origin_, base_dir_;
  const ImportOptions& opts_;
  std::unique_ptr<Graph> g_;  // the graph being built, when this scope owns it
  Graph* graph_ = nullptr;    // the graph nodes go to (g_, or a sub-graph's)
  std::unordered_map<std::string, Value*> values_;
  std::unordered_map<const Value*, HostTensor> known_;
  std::unordered_map<const Value*, std::vector<SymInt>> dims_;
  std::map<std::string, int> opsets_;
  std::set<std::string> initializer_names_;
  int depth_ = 0;  // sub-graph nesting
};

// ---------------------------------------------------------------- NodeCtx

std::string NodeCtx::where() const {
  std::string name = node_.name().empty() ? str("#", node_.output_size() ? node_.output(0) : "?") : node_.name();
  std::string domain = node_.domain().empty() ? "ai.onnx" : node_.domain();
  return str(im_.origin(), ": node '", name, "' (", node_.op_type(), ", domain ", domain, ", opset ", opset_, ")");
}
void NodeCtx::fail(const std::string& msg) const { throw Error(str(where(), ": ", msg)); }
void NodeCtx::unsupported(const std::string& msg) const { throw UnsupportedError(str(where(), ": ", msg)); }

Value* NodeCtx::input(int i) const {
  if (!has_input(i)) fail(str("required input ", i, " is missing"));
  return im_.lookup(node_.input(i), *this);
}
std::vector<Value*> NodeCtx::inputs() const {
  std::vector<Value*> v;
  for (int i = 0; i < num_inputs(); ++i)
    if (has_input(i)) v.push_back(input(i));
  return v;
}
std::optional<HostTensor> NodeCtx::known(int i) const {
  if (!has_input(i)) return std::nullopt;
  return im_.known(input(i));
}
std::optional<std::vector<SymInt>> NodeCtx::known_dims(int i) const {
  if (!has_input(i)) return std::nullopt;
  return im_.known_dims(input(i));
}
HostTensor NodeCtx::require_known(int i, const std::string& what) const {
  if (!has_input(i)) fail(str(what, " (input ", i, ") is missing: the node has ", num_inputs(), " inputs"));
  auto k = known(i);
  if (!k)
    unsupported(str(what, " (input ", i, " '", node_.input(i),
                    "') must be known at import time: make it an initializer or a constant, or "
                    "pass its value in ImportOptions::static_input_values"));
  return *k;
}
std::vector<int64_t> NodeCtx::require_ints(int i, const std::string& what) const {
  HostTensor t = require_known(i, what);
  if (!is_integer(t.dtype())) fail(str(what, " must be an integer tensor, got ", dtype_name(t.dtype())));
  std::vector<int64_t> v(size_t(t.numel()));
  for (int64_t k = 0; k < t.numel(); ++k) v[size_t(k)] = t.get_i64(k);
  return v;
}
std::vector<double> NodeCtx::table(std::initializer_list<int64_t> dims, const std::string& what) const {
  const int64_t limit = im_.options().max_tensor_bytes / int64_t(sizeof(double));
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) fail(str("the ", what, " table would have a negative size ", d));
    if (d != 0 && n > limit / d) fail(str("the ", what, " table its dims ask for is larger than ", limit,
                                          " elements (ImportOptions::max_tensor_bytes)"));
    n *= d;
  }
  return std::vector<double>(size_t(n), 0.0);
}

std::vector<SymInt> NodeCtx::require_dims(int i, const std::string& what) const {
  if (!has_input(i)) fail(str(what, " (input ", i, ") is missing: the node has ", num_inputs(), " inputs"));
  auto d = known_dims(i);
  if (!d)
    unsupported(str(what, " (input ", i, " '", node_.input(i),
                    "') must be computable at import time (constants and shapes only); pass its value "
                    "in ImportOptions::static_input_values if it is a graph input"));
  return *d;
}

const onnx::AttributeProto* NodeCtx::attr(const std::string& name) const {
  for (const auto& a : node_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
int64_t NodeCtx::attr_int(const std::string& name, int64_t dflt) const {
  auto* a = attr(name);
  if (!a) return dflt;
  if (a->type() != onnx::AttributeProto::INT) fail(str("attribute '", name, "' must be an int"));
  return a->i();
}
double NodeCtx::attr_float(const std::string& name, double dflt) const {
  auto* a = attr(name);
  if (!a) return dflt;
  if (a->type() == onnx::AttributeProto::INT) return double(a->i());
  if (a->type() != onnx::AttributeProto::FLOAT) fail(str("attribute '", name, "' must be a float"));
  return a->f();
}
std::string NodeCtx::attr_string(const std::string& name, const std::string& dflt) const {
  auto* a = attr(name);
  if (!a) return dflt;
  if (a->type() != onnx::AttributeProto::STRING) fail(str("attribute '", name, "' must be a string"));
  return a->s();
}
std::vector<int64_t> NodeCtx::attr_ints(const std::string& name, std::vector<int64_t> dflt) const {
  auto* a = attr(name);
  if (!a) return dflt;
  if (a->type() != onnx::AttributeProto::INTS) fail(str("attribute '", name, "' must be a list of ints"));
  return {a->ints().begin(), a->ints().end()};
}
std::vector<double> NodeCtx::attr_floats(const std::string& name, std::vector<double> dflt) const {
  auto* a = attr(name);
  if (!a) return dflt;
  if (a->type() != onnx::AttributeProto::FLOATS) fail(str("attribute '", name, "' must be a list of floats"));
  return {a->floats().begin(), a->floats().end()};
}
HostTensor NodeCtx::attr_tensor(const std::string& name) const {
  auto* a = attr(name);
  if (!a || a->type() != onnx::AttributeProto::TENSOR) fail(str("attribute '", name, "' must be a tensor"));
  return tensor_from_proto(a->t(), im_.base_dir(), str(where(), ": attribute '", name, "'"),
                           im_.options().max_tensor_bytes);
}

std::vector<Value*> NodeCtx::emit_multi(Op op, const std::vector<Value*>& operands, Attrs attrs) {
  std::string name = node_.name().empty() ? (node_.output_size() ? node_.output(0) : op_type()) : node_.name();
  try {
    return im_.emit(op, operands, std::move(attrs), name);
  } catch (const UnsupportedError&) {
    throw;
  } catch (const Error& e) {
    fail(e.what());
  }
}
Value* NodeCtx::emit(Op op, const std::vector<Value*>& operands, Attrs attrs) {
  return emit_multi(op, operands, std::move(attrs)).at(0);
}
Value* NodeCtx::constant(HostTensor t) {
  Value* v = im_.graph().constant(t);
  im_.remember(v, std::move(t));
  return v;
}
Value* NodeCtx::scalar_like(const Value* like, double v) { return constant(HostTensor::scalar(like->type.dtype, v)); }
Value* NodeCtx::cast(Value* v, DType to) {
  if (v->type.dtype == to) return v;
  return emit(Op::Cast, {v}, {{"dtype", to}});
}
Value* NodeCtx::reshape(Value* v, const Shape& shape) {
  if (v->type.shape == shape) return v;
  return emit(Op::Reshape, {v}, {{"shape", shape}});
}
void NodeCtx::set_output(int i, Value* v) {
  if (i >= node_.output_size() || node_.output(i).empty()) return;
  im_.bind(node_.output(i), v);
}

Shape broadcast_dims(const NodeCtx& c, const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    SymInt da = i < a.size() ? a[a.size() - 1 - i] : SymInt(1);
    SymInt db = i < b.size() ? b[b.size() - 1 - i] : SymInt(1);
    if (da == SymInt(1)) out[rank - 1 - i] = db;
    else if (db == SymInt(1) || da == db) out[rank - 1 - i] = da;
    else if (!da.is_constant() || !db.is_constant()) out[rank - 1 - i] = da;  // guarded by the op
    else c.fail(str("cannot broadcast ", shape_to_string(a), " with ", shape_to_string(b)));
  }
  return out;
}

int normalize_axis(const NodeCtx& c, int64_t axis, int rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) c.fail(str("axis ", axis, " is out of range for rank ", rank));
  return int(a);
}

const OpRegistry& op_registry() {
  static const OpRegistry r = [] {
    OpRegistry m;
    register_elementwise_ops(m);
    register_shape_ops(m);
    register_reduce_ops(m);
    register_nn_ops(m);
    register_signal_ops(m);
    register_index_ops(m);
    register_vision_ops(m);
    register_rnn_ops(m);
    register_math_ops(m);
    register_transformer_ops(m);
    register_loss_ops(m);
    register_quant_ops(m);
    register_control_ops(m);
    return m;
  }();
  return r;
}

// ---------------------------------------------------------------- Importer

std::optional<std::vector<SymInt>> Importer::known_dims(const Value* v) const {
  auto it = dims_.find(v);
  if (it != dims_.end()) return it->second;
  auto k = known(v);
  if (k && is_integer(k->dtype()) && k->rank() <= 1) {
    std::vector<SymInt> d;
    for (int64_t i = 0; i < k->numel(); ++i) d.push_back(SymInt(k->get_i64(i)));
    return d;
  }
  return std::nullopt;
}

std::vector<Value*> Importer::emit(Op op, const std::vector<Value*>& operands, Attrs attrs,
                                   const std::string& node_name) {
  auto outs = graph_->add_node(op, operands, std::move(attrs), node_name);
  if (!outs.empty()) try_fold(*outs[0]->producer);
  return outs;
}

// Records values computable at import time: small concrete results (so shape sub-graphs give
// Reshape its target) and symbolic integer vectors (Shape of a [B, 128] input and what follows).
void Importer::try_fold(const Node& n) {
  const OpInfo& info = n.info();
  if (info.has(kSideEffect) || info.has(kSubgraph)) return;  // a loop might not end at import time
  bool all_known = true;
  std::vector<HostTensor> ins;
  for (Value* v : n.inputs) {
    auto k = known(v);
    if (!k) { all_known = false; break; }
    ins.push_back(*k);
  }
  if (all_known && n.op != Op::Constant) {
    bool small = true;
    for (Value* o : n.outputs)
      if (!o->type.is_static() || numel_of(o->type.static_shape()) > 4096) small = false;
    if (small) {
      try {
        auto res = interp::run_op(n.op, n.attrs, ins);
        for (size_t i = 0; i < res.size() && i < n.outputs.size(); ++i) known_[n.outputs[i]] = res[i];
        return;
      } catch (const Error&) {
        // Not foldable here (e.g. a kernel the interpreter lacks): the node still runs later.
      }
    }
  }
  // Symbolic propagation over small integer vectors.
  const Value* out = n.outputs[0];
  if (!is_integer(out->type.dtype) || out->type.rank() > 1) return;
  auto dims_of = [&](int i) { return known_dims(n.inputs[size_t(i)]); };
  std::optional<std::vector<SymInt>> r;
  switch (n.op) {
    case Op::ShapeOf: r = n.inputs[0]->type.shape; break;
    case Op::Cast: case Op::Reshape: case Op::Squeeze: case Op::Unsqueeze: case Op::Flatten:
      if (is_integer(n.inputs[0]->type.dtype)) r = dims_of(0);
      break;
    case Op::Concat: {
      std::vector<SymInt> all;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        auto d = dims_of(int(i));
        if (!d) return;
        all.insert(all.end(), d->begin(), d->end());
      }
      r = all;
      break;
    }
    case Op::Gather: {
      auto d = dims_of(0);
      auto idx = known(n.inputs[1]);
      if (!d || !idx || n.inputs[0]->type.rank() != 1) return;
      std::vector<SymInt> sel;
      for (int64_t i = 0; i < idx->numel(); ++i) {
        int64_t j = idx->get_i64(i);
        if (j < 0) j += int64_t(d->size());
        if (j < 0 || j >= int64_t(d->size())) return;
        sel.push_back((*d)[size_t(j)]);
      }
      r = sel;
      break;
    }
    case Op::Slice: {
      auto d = dims_of(0);
      if (!d || !out->type.is_static()) return;
      HostTensor idx = HostTensor::zeros(DType::I64, {int64_t(d->size())});
      for (int64_t i = 0; i < idx.numel(); ++i) idx.set_i64(i, i);
      try {
        HostTensor picked = interp::run_op(Op::Slice, n.attrs, {idx})[0];
        std::vector<SymInt> sel;
        for (int64_t i = 0; i < picked.numel(); ++i) sel.push_back((*d)[size_t(picked.get_i64(i))]);
        r = sel;
      } catch (const Error&) {
        return;
      }
      break;
    }
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Maximum: {
      auto a = dims_of(0), b = dims_of(1);
      if (!a || !b) return;
      size_t len = std::max(a->size(), b->size());
      if ((a->size() != len && a->size() != 1) || (b->size() != len && b->size() != 1)) return;
      std::vector<SymInt> res;
      for (size_t i = 0; i < len; ++i) {
        const SymInt& x = (*a)[a->size() == 1 ? 0 : i];
        const SymInt& y = (*b)[b->size() == 1 ? 0 : i];
        switch (n.op) {
          case Op::Add: res.push_back(x + y); break;
          case Op::Sub: res.push_back(x - y); break;
          case Op::Mul: res.push_back(x * y); break;
          case Op::Maximum: res.push_back(max(x, y)); break;
          default:  // integer division truncates; equal to floor division for the sizes seen here
            if (y == SymInt(0)) return;
            res.push_back(floordiv(x, y));
        }
      }
      r = res;
      break;
    }
    default: return;
  }
  if (r && int64_t(r->size()) == (out->type.rank() == 0 ? 1 : (out->type.shape[0].maybe_constant().value_or(-1))))
    dims_[out] = *r;
}

int Importer::opset_for(const std::string& domain) const {
  std::string d = domain == "ai.onnx" ? "" : domain;
  auto it = opsets_.find(d);
  return it == opsets_.end() ? -1 : it->second;
}

Shape Importer::shape_from_proto(const onnx::TypeProto& tp, const std::string& input_name) {
  const auto& tt = tp.tensor_type();
  auto fixed = opts_.input_shapes.find(input_name);
  if (fixed != opts_.input_shapes.end()) {
    KILN_CHECK(!tt.has_shape() || tt.shape().dim_size() == int(fixed->second.size()), origin_, ": input '",
               input_name, "' has rank ", tt.shape().dim_size(), ", the given shape ", dims_to_string(fixed->second));
    return to_shape(fixed->second);
  }
  KILN_CHECK(tt.has_shape(), origin_, ": input '", input_name, "' has no shape (rank must be known)");
  Shape s;
  int i = 0;
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      KILN_CHECK(d.dim_value() >= 0 && d.dim_value() < (int64_t(1) << 40), origin_, ": input '",
                 input_name, "' has an absurd dim ", d.dim_value());
      s.push_back(SymInt(d.dim_value()));
    } else {
      std::string sym = d.has_dim_param() && !d.dim_param().empty() ? d.dim_param() : str(input_name, "_dim", i);
      // Keep dim names usable as SymInt identifiers.
      for (char& ch : sym)
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') ch = '_';
      if (std::isdigit(static_cast<unsigned char>(sym[0]))) sym = "d_" + sym;
      auto bound = opts_.dim_values.find(sym);
      s.push_back(bound != opts_.dim_values.end() ? SymInt(bound->second) : SymInt::symbol(sym));
    }
    ++i;
  }
  return s;
}

std::set<std::string> Importer::inputs_to_freeze(const onnx::GraphProto& gp) const {
  std::set<std::string> result;
  if (opts_.static_input_values.empty()) return result;
  std::unordered_map<std::string, const onnx::NodeProto*> producer;
  for (const auto& n : gp.node())
    for (const auto& o : n.output()) producer[o] = &n;
  std::vector<std::string> work;
  for (const auto& n : gp.node()) {
    auto it = constant_operands().find(n.op_type());
    if (it == constant_operands().end()) continue;
    for (int i : it->second)
      if (i < n.input_size() && !n.input(i).empty()) work.push_back(n.input(i));
  }
  std::unordered_set<std::string> seen;
  while (!work.empty()) {
    std::string name = work.back();
    work.pop_back();
    if (!seen.insert(name).second) continue;
    if (opts_.static_input_values.count(name)) result.insert(name);
    auto p = producer.find(name);
    const bool reads_only_dims = p != producer.end() && (p->second->op_type() == "Shape" || p->second->op_type() == "Size");
    if (p != producer.end() && (opts_.freeze_through_shape || !reads_only_dims))
      for (const auto& in : p->second->input())
        if (!in.empty()) work.push_back(in);
  }
  return result;
}

void Importer::make_inputs(const onnx::GraphProto& gp) {
  for (const auto& t : gp.initializer()) initializer_names_.insert(t.name());
  std::set<std::string> freeze = inputs_to_freeze(gp);
  for (const auto& in : gp.input()) {
    if (initializer_names_.count(in.name())) continue;  // an initializer with a default value
    KILN_CHECK(!in.name().empty(), origin_, ": a graph input has no name");
    KILN_CHECK(!values_.count(in.name()), origin_, ": graph input '", in.name(), "' is declared twice");
    if (in.type().value_case() != onnx::TypeProto::kTensorType) {
      values_[in.name()] = graph_->add_input(in.name(), container_input_type(in));
      continue;
    }
    auto dt = dtype_from_onnx(in.type().tensor_type().elem_type());
    if (!dt)
      throw UnsupportedError(str(origin_, ": input '", in.name(), "' has element type ",
                                 onnx_type_name(in.type().tensor_type().elem_type()), ", not supported by Kiln"));
    if (freeze.count(in.name()) && opts_.static_input_values.at(in.name()).is_tensor()) {
      HostTensor t = opts_.static_input_values.at(in.name());
      KILN_CHECK(t.dtype() == *dt, origin_, ": static value for input '", in.name(), "' is ",
                 dtype_name(t.dtype()), ", the model declares ", dtype_name(*dt));
      Value* v = graph_->constant(t);
      v->name = in.name();
      known_[v] = t;
      values_[in.name()] = v;
      continue;
    }
    Value* v = graph_->add_input(in.name(), TensorType{*dt, shape_from_proto(in.type(), in.name()), Device::CPU});
    values_[in.name()] = v;
  }
}

void Importer::make_initializers(const onnx::GraphProto& gp) {
  if (gp.sparse_initializer_size() > 0)
    throw UnsupportedError(str(origin_, ": sparse initializers are not supported"));
  for (const auto& t : gp.initializer()) {
    KILN_CHECK(!t.name().empty(), origin_, ": an initializer has no name");
    KILN_CHECK(!values_.count(t.name()), origin_, ": initializer '", t.name(), "' is defined twice");
    HostTensor value = tensor_from_proto(t, base_dir_, str(origin_, ": initializer '", t.name(), "'"),
                                         opts_.max_tensor_bytes);
    Value* v;
    if (opts_.initializers_as_constants) {
      v = graph_->constant(value);
      known_[v] = std::move(value);
    } else {
      v = graph_->add_input(t.name(), TensorType{value.dtype(), to_shape(value.shape()), Device::CPU});
    }
    if (v->name.empty()) v->name = t.name();
    values_[t.name()] = v;
  }
}

// ONNX requires topological order, but exporters get it wrong; sort, naming a node on a cycle.
std::vector<const onnx::NodeProto*> Importer::ordered_nodes(const onnx::GraphProto& gp) {
  size_t n = size_t(gp.node_size());
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < n; ++i)
    for (const auto& o : gp.node(int(i)).output()) {
      if (o.empty()) continue;
      KILN_CHECK(!producer.count(o) && !values_.count(o), origin_, ": tensor '", o,
                 "' is produced twice (second time by node '", gp.node(int(i)).name(), "', ",
                 gp.node(int(i)).op_type(), ")");
      producer[o] = i;
    }
  std::vector<std::vector<size_t>> users(n);
  std::vector<int> pending(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const auto& node = gp.node(int(i));
    for (const auto& in : node.input()) {
      if (in.empty() || values_.count(in)) continue;
      auto p = producer.find(in);
      KILN_CHECK(p != producer.end(), origin_, ": node '", node.name(), "' (", node.op_type(),
                 ") reads '", in, "', which no node, graph input or initializer produces");
      users[p->second].push_back(i);
      ++pending[i];
    }
  }
  std::vector<const onnx::NodeProto*> order;
  std::vector<size_t> ready;
  for (size_t i = n; i-- > 0;)
    if (pending[i] == 0) ready.push_back(i);
  // Keep the file's order where it is valid: always take the lowest ready index.
  std::set<size_t> ready_set(ready.begin(), ready.end());
  while (!ready_set.empty()) {
    size_t i = *ready_set.begin();
    ready_set.erase(ready_set.begin());
    order.push_back(&gp.node(int(i)));
    for (size_t u : users[i])
      if (--pending[u] == 0) ready_set.insert(u);
  }
  if (order.size() != n) {
    for (size_t i = 0; i < n; ++i)
      if (pending[i] > 0)
        throw Error(str(origin_, ": the graph has a cycle through node '", gp.node(int(i)).name(), "' (",
                        gp.node(int(i)).op_type(), ")"));
  }
  return order;
}

// Why: handlers implement each op as defined from opset 6 on. A node of an older model still
// means the same thing when the op's definition in force at its opset is the one still in force
// at opset 6 (Not, And, Identity, Reshape-5, ...); ONNX's schema registry says which definition
// that is. Ops redefined since (Add lost consumed_inputs and gained broadcasting) are refused.
static void check_old_opset(const NodeCtx& c) {
  const std::string& op = c.op_type();
  const auto* then = onnx::OpSchemaRegistry::Schema(op, c.opset(), "");
  if (!then) c.unsupported(str("operator ", op, " does not exist in default-domain opset ", c.opset()));
  const auto* supported = onnx::OpSchemaRegistry::Schema(op, kOldestFullOpset, "");
  if (supported && supported->since_version() == then->since_version()) return;
  std::string oldest = supported ? str(" (the oldest definition Kiln implements is ", op, "-",
                                       supported->since_version(), ")")
                                 : str(" (it no longer exists at opset ", kOldestFullOpset, ")");
  c.unsupported(str("operator ", op, " at opset ", c.opset(), " follows its opset-", then->since_version(),
                    " definition, which a later opset changed", oldest, "; convert the model to opset ",
                    kOldestFullOpset, " or newer, e.g. with onnx.version_converter"));
}

// String tensors reach only the ops that compare or move whole elements (the IR's kStrings rows,
// plus control flow and containers, which pass values along); others are unsupported, named.
static void check_string_operands(NodeCtx& c) {
  static const std::set<std::string> accepted = {
      "Equal",     "Identity", "Reshape", "Expand", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
      "Concat",    "Split",    "Slice",   "Gather", "Shape",   "Size",    "Constant",  "If",
      "Loop",      "Scan",     "SequenceConstruct", "SequenceAt", "SequenceInsert", "SequenceErase",
      "SequenceLength", "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalHasElement",
      "OptionalGetElement"};
  if (accepted.count(c.op_type())) return;
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    const Value* v;
    try {
      v = c.input(i);
    } catch (const Error&) {
      continue;  // an undefined input: the op's own handler reports it
    }
    if (v->type.is_tensor() && v->type.dtype == DType::Str)
      c.unsupported(str(c.op_type(), " on input ", i, " of dtype str (ONNX STRING): string tensors are "
                        "supported by Equal and data movement ops only"));
  }
}

void Importer::import_node(const onnx::NodeProto& n) {
  std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
  int opset = opset_for(domain);
  NodeCtx c(*this, n, opset);
  if (!domain.empty()) c.unsupported(str("operators of domain '", domain, "' are not supported"));
  if (opset < 0) c.fail("the model imports no opset for this domain");
  const auto& reg = op_registry();
  auto it = reg.find(n.op_type());
  if (it == reg.end()) c.unsupported(str("operator ", n.op_type(), " is not supported"));
  if (opset < kOldestFullOpset) check_old_opset(c);
  try {
    check_narrow_operands(c);
    check_string_operands(c);
    it->second(c);
  } catch (const UnsupportedError&) {
    throw;
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.rfind(origin_, 0) == 0) throw;
    c.fail(msg);
  }
  for (int i = 0; i < n.output_size(); ++i)
    if (!n.output(i).empty() && !values_.count(n.output(i)))
      c.unsupported(str("output ", i, " ('", n.output(i), "') is not supported"));
}

std::unique_ptr<Graph> Importer::run() {
  KILN_CHECK(model_.has_graph(), origin_, ": the model has no graph");
  for (const auto& os : model_.opset_import()) {
    std::string d = os.domain() == "ai.onnx" ? "" : os.domain();
    opsets_[d] = int(os.version());
  }
  if (!opsets_.count("") && model_.opset_import_size() == 0) opsets_[""] = 1;  // IR v3 default
  // Opsets 6 and 7 differ from later ones mainly in legacy broadcasting (handled by the binary
  // ops) and in attributes later removed (is_test, spatial), which handlers ignore or check.
  // Older opsets are checked per node (check_old_opset).
  if (model_.functions_size() > 0) {
    // Model-local functions are only a problem when a node calls one: import_node reports it.
  }
  const onnx::GraphProto& gp = model_.graph();
  g_ = std::make_unique<Graph>(gp.name().empty() ? "main" : gp.name());
  graph_ = g_.get();
  make_inputs(gp);
  make_initializers(gp);
  for (const onnx::NodeProto* n : ordered_nodes(gp)) import_node(*n);
  std::vector<Value*> outs;
  for (const auto& o : gp.output()) {
    auto it = values_.find(o.name());
    KILN_CHECK(it != values_.end(), origin_, ": graph output '", o.name(), "' is never produced");
    if (it->second->name.empty() || it->second->producer != nullptr) it->second->name = o.name();
    outs.push_back(it->second);
  }
  KILN_CHECK(!outs.empty(), origin_, ": the graph has no outputs");
  g_->set_outputs(outs);
  return std::move(g_);
}

// ---------------------------------------------------------------- sub-graphs

// Sequences and optionals as graph inputs: a sequence's length and element shapes are part of
// its Kiln type, so they come from ImportOptions::input_types (the conformance runner reads them
// off the test data); an optional of a fully shaped tensor can be typed from its declaration.
TensorType Importer::container_input_type(const onnx::ValueInfoProto& in) const {
  auto given = opts_.input_types.find(in.name());
  std::optional<TensorType> declared = type_from_proto(in.type());
  if (given != opts_.input_types.end()) {
    bool optional = in.type().value_case() == onnx::TypeProto::kOptionalType;
    bool sequence = in.type().value_case() == onnx::TypeProto::kSequenceType;
    KILN_CHECK((optional && given->second.kind == ValueKind::Optional) ||
                   (sequence && given->second.kind == ValueKind::Sequence),
               origin_, ": input '", in.name(), "': the given type ", given->second.to_string(),
               " is not of the declared kind");
    return given->second;
  }
  if (declared) return *declared;
  throw UnsupportedError(str(origin_, ": input '", in.name(), "' is a ",
                             in.type().value_case() == onnx::TypeProto::kMapType ? "map (not supported)"
                             : "sequence or optional whose length or element shapes the model leaves open; pass its "
                               "type in ImportOptions::input_types (e.g. seq<f32[2], f32[3]>)"));
}

std::optional<TensorType> type_from_proto(const onnx::TypeProto& tp) {
  switch (tp.value_case()) {
    case onnx::TypeProto::kTensorType: {
      auto dt = dtype_from_onnx(tp.tensor_type().elem_type());
      if (!dt || !tp.tensor_type().has_shape()) return std::nullopt;
      Shape shape;
      for (const auto& d : tp.tensor_type().shape().dim()) {
        if (!d.has_dim_value() || d.dim_value() < 0 || d.dim_value() >= (int64_t(1) << 40)) return std::nullopt;
        shape.push_back(SymInt(d.dim_value()));
      }
      return TensorType{*dt, shape, Device::CPU};
    }
    case onnx::TypeProto::kOptionalType: {
      const auto& elem = tp.optional_type().elem_type();
      if (elem.value_case() == onnx::TypeProto::kOptionalType) return std::nullopt;
      auto inner = type_from_proto(elem);
      if (!inner) return std::nullopt;
      return TensorType::optional(*inner);
    }
    default: return std::nullopt;  // a sequence's length is never declared
  }
}

namespace {

// Names read by gp's nodes (and by the sub-graphs nested in them) that no enclosing scope in
// `scopes` nor gp itself defines, in first-use order.
void collect_outer_names(const onnx::GraphProto& gp, std::vector<const std::set<std::string>*>& scopes,
                         std::vector<std::string>& out, std::set<std::string>& seen, const NodeCtx& c) {
  if (scopes.size() > 64) c.fail("sub-graphs nest too deeply");
  std::set<std::string> defined;
  for (const auto& in : gp.input()) defined.insert(in.name());
  for (const auto& t : gp.initializer()) defined.insert(t.name());
  for (const auto& n : gp.node())
    for (const auto& o : n.output()) defined.insert(o);
  scopes.push_back(&defined);
  auto local = [&](const std::string& name) {
    for (const auto* scope : scopes)
      if (scope->count(name)) return true;
    return false;
  };
  auto read = [&](const std::string& name) {
    if (!name.empty() && !local(name) && seen.insert(name).second) out.push_back(name);
  };
  for (const auto& n : gp.node()) {
    for (const auto& in : n.input()) read(in);
    for (const auto& a : n.attribute()) {
      if (a.type() == onnx::AttributeProto::GRAPH) collect_outer_names(a.g(), scopes, out, seen, c);
      if (a.type() == onnx::AttributeProto::GRAPHS)
        for (const auto& sub : a.graphs()) collect_outer_names(sub, scopes, out, seen, c);
    }
  }
  for (const auto& o : gp.output()) read(o.name());
  scopes.pop_back();
}

}  // namespace

void Importer::import_body(const onnx::GraphProto& gp, const NodeCtx& c) {
  make_initializers(gp);
  for (const onnx::NodeProto* n : ordered_nodes(gp)) import_node(*n);
  (void)c;
}

GraphAttr Importer::import_subgraph(const NodeCtx& c, const onnx::GraphProto& gp,
                                    const std::vector<TensorType>& formal_types, const std::vector<std::string>& names) {
  auto g = std::make_shared<Graph>(gp.name().empty() ? "body" : gp.name());
  Importer sub(*this, g.get(), c);
  if (gp.input_size() != int(formal_types.size()))
    c.fail(str("sub-graph '", gp.name(), "' declares ", gp.input_size(), " inputs; ", c.op_type(), " passes it ",
               formal_types.size()));
  for (int i = 0; i < gp.input_size(); ++i) {
    const std::string& name = gp.input(i).name();
    KILN_CHECK(!name.empty() && !sub.values_.count(name), origin_, ": sub-graph '", gp.name(), "' input ", i,
               " has an empty or repeated name");
    sub.values_[name] = g->add_input(name, formal_types[size_t(i)]);
  }
  for (const std::string& name : names) {
    if (sub.values_.count(name)) continue;  // a formal input of the same name hides the outer one
    Value* outer = lookup(name, c);
    if (copied_into_subgraph(outer)) {
      HostTensor t = *known(outer);
      Value* v = g->constant(t);
      v->name = name;
      sub.known_[v] = std::move(t);
      sub.values_[name] = v;
    } else {
      sub.values_[name] = g->add_input(name, outer->type);
    }
  }
  sub.import_body(gp, c);
  g->set_outputs(subgraph_outputs(sub, gp));
  return g;
}

std::vector<Value*> Importer::subgraph_outputs(const Importer& sub, const onnx::GraphProto& gp) const {
  std::vector<Value*> outs;
  for (const auto& o : gp.output()) {
    auto it = sub.values_.find(o.name());
    KILN_CHECK(it != sub.values_.end(), origin_, ": sub-graph '", gp.name(), "' output '", o.name(),
               "' is never produced");
    outs.push_back(it->second);
  }
  return outs;
}

std::vector<Value*> Importer::inline_subgraph(const NodeCtx& c, const onnx::GraphProto& gp,
                                              const std::vector<Value*>& formals) {
  Importer sub(*this, graph_, c);
  if (gp.input_size() != int(formals.size()))
    c.fail(str("sub-graph '", gp.name(), "' declares ", gp.input_size(), " inputs; ", c.op_type(), " passes it ",
               formals.size()));
  auto share = [&](const std::string& name, Value* v) {
    sub.values_[name] = v;
    if (auto k = known_.find(v); k != known_.end()) sub.known_[v] = k->second;
    if (auto d = dims_.find(v); d != dims_.end()) sub.dims_[v] = d->second;
  };
  for (int i = 0; i < gp.input_size(); ++i) share(gp.input(i).name(), formals[size_t(i)]);
  std::vector<const std::set<std::string>*> scopes;
  std::vector<std::string> names;
  std::set<std::string> seen;
  collect_outer_names(gp, scopes, names, seen, c);
  for (const std::string& name : names)
    if (!sub.values_.count(name)) share(name, lookup(name, c));
  sub.import_body(gp, c);
  std::vector<Value*> outs = subgraph_outputs(sub, gp);
  for (Value* v : outs) {
    if (auto k = sub.known_.find(v); k != sub.known_.end()) known_[v] = k->second;
    if (auto d = sub.dims_.find(v); d != sub.dims_.end()) dims_[v] = d->second;
  }
  return outs;
}

std::vector<std::string> outer_names(const NodeCtx& c, const std::vector<const onnx::GraphProto*>& graphs) {
  std::vector<const std::set<std::string>*> scopes;
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const auto* gp : graphs) collect_outer_names(*gp, scopes, names, seen, c);
  return names;
}

std::vector<Value*> captured_values(NodeCtx& c, const std::vector<std::string>& names) {
  std::vector<Value*> out;
  for (const std::string& name : names) {
    Value* v = c.importer().lookup(name, c);
    if (!c.importer().copied_into_subgraph(v)) out.push_back(v);
  }
  return out;
}

GraphAttr import_subgraph(NodeCtx& c, const onnx::GraphProto& gp, const std::vector<TensorType>& formal_types,
                          const std::vector<std::string>& names) {
  return c.importer().import_subgraph(c, gp, formal_types, names);
}

std::vector<Value*> inline_subgraph(NodeCtx& c, const onnx::GraphProto& gp, const std::vector<Value*>& formals) {
  return c.importer().inline_subgraph(c, gp, formals);
}

// ---------------------------------------------------------------- public API

}  // namespace kiln::onnx_import

namespace kiln {

std::unique_ptr<Graph> import_onnx_bytes(const std::string& bytes, const std::string& origin,
                                         const ImportOptions& options, const std::string& base_dir) {
  onnx::ModelProto model;
  KILN_CHECK(model.ParseFromString(bytes), origin, ": not a valid ONNX model (protobuf parse failed; ",
             "the file is truncated, corrupted or not ONNX)");
  onnx_import::Importer im(model, origin, base_dir, options);
  return im.run();
}

static std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), path, ": cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<Graph> import_onnx(const std::string& path, const ImportOptions& options) {
  std::string base = std::filesystem::path(path).parent_path().string();
  if (base.empty()) base = ".";
  return import_onnx_bytes(read_file_bytes(path), path, options, base);
}

std::vector<std::string> onnx_input_names(const std::string& path) {
  onnx::ModelProto model;
  KILN_CHECK(model.ParseFromString(read_file_bytes(path)), path, ": not a valid ONNX model");
  std::set<std::string> inits;
  for (const auto& t : model.graph().initializer()) inits.insert(t.name());
  std::vector<std::string> names;
  for (const auto& in : model.graph().input())
    if (!inits.count(in.name())) names.push_back(in.name());
  return names;
}

OnnxValueKinds onnx_value_kinds(const std::string& path) {
  onnx::ModelProto model;
  KILN_CHECK(model.ParseFromString(read_file_bytes(path)), path, ": not a valid ONNX model");
  auto kind = [](const onnx::TypeProto& t) {
    return t.value_case() == onnx::TypeProto::kSequenceType ? ValueKind::Sequence
           : t.value_case() == onnx::TypeProto::kOptionalType ? ValueKind::Optional
                                                              : ValueKind::Tensor;
  };
  std::set<std::string> inits;
  for (const auto& t : model.graph().initializer()) inits.insert(t.name());
  OnnxValueKinds kinds;
  for (const auto& in : model.graph().input())
    if (!inits.count(in.name())) kinds.inputs.push_back(kind(in.type()));
  for (const auto& out : model.graph().output()) kinds.outputs.push_back(kind(out.type()));
  return kinds;
}

}  // namespace kiln
