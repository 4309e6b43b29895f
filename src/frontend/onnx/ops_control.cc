// ONNX control flow (If, Loop, Scan, SequenceMap) and sequence/optional ops. Why: ONNX sub-graphs
// read outer-scope tensors by name; Kiln sub-graphs take everything they read as inputs, so each
// handler turns those references into explicit operands (captures) and imports the body as its
// own typed graph (docs/onnx.md, "Control flow and containers").
#include <limits>

#include "frontend/onnx/importer.h"

namespace kiln::onnx_import {

namespace {

const onnx::GraphProto& graph_attr(const NodeCtx& c, const std::string& name) {
  const onnx::AttributeProto* a = c.attr(name);
  if (a == nullptr || a->type() != onnx::AttributeProto::GRAPH) c.fail(str("attribute '", name, "' (a graph) is missing"));
  return a->g();
}

TensorType scalar_type(DType d) { return TensorType{d, {}, Device::CPU}; }

std::vector<Value*> concat_values(std::vector<Value*> a, const std::vector<Value*>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void set_outputs(NodeCtx& c, const std::vector<Value*>& outs) {
  for (size_t i = 0; i < outs.size(); ++i)
    if (c.wants_output(int(i))) c.set_output(int(i), outs[i]);
}

// If: a known condition (a constant, or a shape test in a function expansion) picks its branch at
// import time; otherwise both branches become sub-graphs over the union of their captures.
void import_if(NodeCtx& c) {
  const onnx::GraphProto& then_g = graph_attr(c, "then_branch");
  const onnx::GraphProto& else_g = graph_attr(c, "else_branch");
  if (auto cond = c.known(0); cond && cond->is_tensor() && cond->numel() == 1) {
    set_outputs(c, inline_subgraph(c, cond->get_i64(0) != 0 ? then_g : else_g, {}));
    return;
  }
  std::vector<std::string> names = outer_names(c, {&then_g, &else_g});
  Attrs attrs{{"then_branch", import_subgraph(c, then_g, {}, names)},
              {"else_branch", import_subgraph(c, else_g, {}, names)}};
  std::vector<Value*> operands = concat_values({c.input(0)}, captured_values(c, names));
  set_outputs(c, c.emit_multi(Op::If, operands, std::move(attrs)));
}

void import_loop(NodeCtx& c) {
  const onnx::GraphProto& body = graph_attr(c, "body");
  if (!c.has_input(0) && !c.has_input(1))
    c.fail("a Loop without a trip count and without a condition never ends; give it one of them");
  Value* trip = nullptr;
  if (c.has_input(0)) {
    trip = c.input(0);
  } else {  // "no limit": the largest count (set exactly; a double cannot hold it)
    HostTensor t = HostTensor::scalar(DType::I64, 0);
    t.set_i64(0, std::numeric_limits<int64_t>::max());
    trip = c.constant(t);
  }
  Value* cond = c.has_input(1) ? c.input(1) : c.constant(HostTensor::scalar(DType::Bool, 1));
  std::vector<Value*> carried;
  for (int i = 2; i < c.num_inputs(); ++i) carried.push_back(c.input(i));
  std::vector<TensorType> formals = {scalar_type(DType::I64), scalar_type(DType::Bool)};
  for (Value* v : carried) formals.push_back(v->type);
  int scans = body.output_size() - 1 - int(carried.size());
  if (scans < 0)
    c.fail(str("the body returns ", body.output_size(), " values; with ", carried.size(),
               " loop-carried values it must return at least ", 1 + carried.size()));
  Shape scan_length;
  if (scans > 0) {
    auto dims = c.known_dims(0);
    if (!c.has_input(0) || !dims || dims->size() != 1)
      c.unsupported("a Loop with scan outputs needs its trip count known at import time (Kiln types the scan "
                    "outputs' length); pass the inputs it depends on in ImportOptions::static_input_values");
    scan_length = {(*dims)[0]};
  }
  std::vector<std::string> names = outer_names(c, {&body});
  Attrs attrs{{"body", import_subgraph(c, body, formals, names)},
              {"num_carried", int64_t(carried.size())},
              {"scan_length", scan_length}};
  std::vector<Value*> operands = concat_values(concat_values({trip, cond}, carried), captured_values(c, names));
  set_outputs(c, c.emit_multi(Op::Loop, operands, std::move(attrs)));
}

// Scan-8 has a leading batch dim on every input and a sequence_lens input; with no sequence_lens
// and a batch of 1 it is Scan-9 on the squeezed inputs.
void import_scan(NodeCtx& c) {
  const onnx::GraphProto& body = graph_attr(c, "body");
  int64_t scanned = c.attr_int("num_scan_inputs", -1);
  bool batched = c.opset() < 9;
  int first = batched ? 1 : 0;
  if (batched && c.has_input(0)) c.unsupported("Scan-8 with sequence_lens is not supported");
  std::vector<Value*> inputs;
  for (int i = first; i < c.num_inputs(); ++i) {
    Value* v = c.input(i);
    if (batched) {
      if (v->type.rank() < 1 || !(v->type.shape[0] == SymInt(1)))
        c.unsupported("Scan-8 is supported with a batch of 1 only");
      v = c.emit(Op::Squeeze, {v}, {{"axes", std::vector<int64_t>{0}}});
    }
    inputs.push_back(v);
  }
  int64_t carried = int64_t(inputs.size()) - scanned;
  if (scanned < 1 || carried < 0) c.fail(str("num_scan_inputs = ", scanned, " does not fit ", inputs.size(), " inputs"));
  std::vector<int64_t> in_axes = c.attr_ints("scan_input_axes"), out_axes = c.attr_ints("scan_output_axes");
  std::vector<int64_t> in_dirs = c.attr_ints(batched ? "directions" : "scan_input_directions");
  std::vector<int64_t> out_dirs = c.attr_ints("scan_output_directions");
  if (!in_axes.empty() && int64_t(in_axes.size()) != scanned) c.fail("scan_input_axes needs one entry per scan input");
  std::vector<TensorType> formals;
  for (int64_t k = 0; k < int64_t(inputs.size()); ++k) {
    TensorType t = inputs[size_t(k)]->type;
    if (k >= carried) {
      int64_t axis = in_axes.empty() ? 0 : in_axes.at(size_t(k - carried));
      if (t.rank() < 1) c.fail(str("scan input ", k - carried, " has rank 0"));
      t.shape.erase(t.shape.begin() + normalize_axis(c, axis, t.rank()));
    }
    formals.push_back(t);
  }
  std::vector<std::string> names = outer_names(c, {&body});
  Attrs attrs{{"body", import_subgraph(c, body, formals, names)},
              {"num_carried", carried},
              {"num_scan_inputs", scanned},
              {"scan_input_axes", in_axes},
              {"scan_input_directions", in_dirs},
              {"scan_output_axes", out_axes},
              {"scan_output_directions", out_dirs}};
  std::vector<Value*> outs = c.emit_multi(Op::Scan, concat_values(inputs, captured_values(c, names)), std::move(attrs));
  if (batched)
    for (Value*& v : outs) v = c.emit(Op::Unsqueeze, {v}, {{"axes", std::vector<int64_t>{0}}});
  set_outputs(c, outs);
}

const TensorType& sequence_type(const NodeCtx& c, int i) {
  const TensorType& t = c.input(i)->type;
  if (t.kind != ValueKind::Sequence) c.fail(str("input ", i, " must be a sequence, got ", t.to_string()));
  return t;
}

// A position operand normalised against the sequence length (negative counts from the back).
int64_t position(const NodeCtx& c, int i, int64_t length, int64_t dflt, int64_t upper) {
  if (!c.has_input(i)) return dflt;
  std::vector<int64_t> p = c.require_ints(i, "the position");
  if (p.size() != 1) c.fail("the position must be a single integer");
  int64_t at = p[0] < 0 ? p[0] + length : p[0];
  if (at < 0 || at > upper) c.fail(str("position ", p[0], " is out of range for a sequence of length ", length));
  return at;
}

std::vector<Value*> elements(NodeCtx& c, Value* seq) {
  std::vector<Value*> out;
  for (size_t i = 0; i < seq->type.elements.size(); ++i)
    out.push_back(c.emit(Op::SequenceAt, {seq}, {{"index", int64_t(i)}}));
  return out;
}

Value* make_sequence(NodeCtx& c, const std::vector<Value*>& items, DType dtype) {
  if (items.empty()) return c.emit(Op::SequenceEmpty, {}, {{"dtype", dtype}});
  return c.emit(Op::SequenceConstruct, items);
}

void split_to_sequence(NodeCtx& c) {
  Value* x = c.input(0);
  int axis = normalize_axis(c, c.attr_int("axis", 0), x->type.rank());
  auto len = x->type.shape[size_t(axis)].maybe_constant();
  if (!len) c.unsupported("SplitToSequence needs a static length along the split axis");
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (c.has_input(1)) {
    HostTensor split = c.require_known(1, "split");
    if (split.rank() == 0) {
      int64_t chunk = split.get_i64(0);
      if (chunk <= 0) c.fail("split must be positive");
      for (int64_t done = 0; done < *len; done += chunk) sizes.push_back(std::min(chunk, *len - done));
    } else {
      for (int64_t i = 0; i < split.numel(); ++i) sizes.push_back(split.get_i64(i));
    }
  } else {
    sizes.assign(size_t(*len), 1);
    squeeze = c.attr_int("keepdims", 1) == 0;
  }
  std::vector<Value*> parts =
      sizes.empty() ? std::vector<Value*>{}
                    : c.emit_multi(Op::Split, {x}, {{"axis", int64_t(axis)}, {"sizes", sizes}});
  if (squeeze)
    for (Value*& p : parts) p = c.emit(Op::Squeeze, {p}, {{"axes", std::vector<int64_t>{axis}}});
  c.set_output(0, make_sequence(c, parts, x->type.dtype));
}

void concat_from_sequence(NodeCtx& c) {
  const TensorType& s = sequence_type(c, 0);
  if (s.elements.empty()) c.fail("ConcatFromSequence of an empty sequence");
  bool new_axis = c.attr_int("new_axis", 0) != 0;
  int rank = s.elements[0].rank() + (new_axis ? 1 : 0);
  int axis = normalize_axis(c, c.attr_int("axis", 0), rank);
  std::vector<Value*> items = elements(c, c.input(0));
  if (new_axis)
    for (Value*& v : items) v = c.emit(Op::Unsqueeze, {v}, {{"axes", std::vector<int64_t>{axis}}});
  c.set_output(0, c.emit(Op::Concat, items, {{"axis", int64_t(axis)}}));
}

// SequenceMap over a sequence of static length: the body imported once per element.
void sequence_map(NodeCtx& c) {
  const onnx::GraphProto& body = graph_attr(c, "body");
  size_t n = sequence_type(c, 0).elements.size();
  std::vector<std::vector<Value*>> per_output(size_t(body.output_size()));
  for (size_t i = 0; i < n; ++i) {
    std::vector<Value*> formals;
    for (int k = 0; k < c.num_inputs(); ++k) {
      Value* v = c.input(k);
      if (v->type.kind == ValueKind::Sequence) {
        if (v->type.elements.size() != n) c.fail("SequenceMap's sequences must have one length");
        v = c.emit(Op::SequenceAt, {v}, {{"index", int64_t(i)}});
      }
      formals.push_back(v);
    }
    std::vector<Value*> outs = inline_subgraph(c, body, formals);
    for (size_t j = 0; j < outs.size(); ++j) per_output[j].push_back(outs[j]);
  }
  for (int j = 0; j < body.output_size(); ++j) {
    const auto& tt = body.output(j).type();
    std::optional<DType> dt;
    if (tt.value_case() == onnx::TypeProto::kSequenceType && tt.sequence_type().elem_type().has_tensor_type())
      dt = dtype_from_onnx(tt.sequence_type().elem_type().tensor_type().elem_type());
    if (n == 0 && !dt) c.unsupported("SequenceMap over an empty sequence needs the body's output element type");
    c.set_output(j, make_sequence(c, per_output[size_t(j)], n ? per_output[size_t(j)][0]->type.dtype : *dt));
  }
}

void optional_op(NodeCtx& c) {
  if (c.has_input(0)) {
    c.set_output(0, c.emit(Op::OptionalWrap, {c.input(0)}));
    return;
  }
  const onnx::AttributeProto* a = c.attr("type");
  if (a == nullptr || a->type() != onnx::AttributeProto::TYPE_PROTO) c.fail("an Optional without input needs 'type'");
  std::optional<TensorType> inner = type_from_proto(a->tp());
  if (!inner) c.unsupported("the empty Optional's type leaves a sequence length or a dim open");
  c.set_output(0, c.emit(Op::OptionalNone, {}, {{"type", TensorType::optional(*inner).to_string()}}));
}

}  // namespace

void register_control_ops(OpRegistry& r) {
  r["If"] = import_if;
  r["Loop"] = import_loop;
  r["Scan"] = import_scan;
  r["SequenceMap"] = sequence_map;
  r["SequenceConstruct"] = [](NodeCtx& c) { c.set_output(0, c.emit(Op::SequenceConstruct, c.inputs())); };
  r["SequenceEmpty"] = [](NodeCtx& c) {
    auto dt = dtype_from_onnx(int(c.attr_int("dtype", onnx::TensorProto::FLOAT)));
    if (!dt) c.unsupported("SequenceEmpty of this element type");
    c.set_output(0, c.emit(Op::SequenceEmpty, {}, {{"dtype", *dt}}));
  };
  r["SequenceAt"] = [](NodeCtx& c) {
    int64_t n = int64_t(sequence_type(c, 0).elements.size());
    if (!c.has_input(1)) c.fail("SequenceAt needs a position");
    c.set_output(0, c.emit(Op::SequenceAt, {c.input(0)}, {{"index", position(c, 1, n, 0, n - 1)}}));
  };
  r["SequenceInsert"] = [](NodeCtx& c) {
    int64_t n = int64_t(sequence_type(c, 0).elements.size());
    c.set_output(0, c.emit(Op::SequenceInsert, {c.input(0), c.input(1)}, {{"position", position(c, 2, n, n, n)}}));
  };
  r["SequenceErase"] = [](NodeCtx& c) {
    int64_t n = int64_t(sequence_type(c, 0).elements.size());
    if (n == 0) c.fail("SequenceErase of an empty sequence");
    c.set_output(0, c.emit(Op::SequenceErase, {c.input(0)}, {{"position", position(c, 1, n, n - 1, n - 1)}}));
  };
  r["SequenceLength"] = [](NodeCtx& c) {
    c.set_output(0, c.constant(HostTensor::scalar(DType::I64, double(sequence_type(c, 0).elements.size()))));
  };
  r["SplitToSequence"] = split_to_sequence;
  r["ConcatFromSequence"] = concat_from_sequence;
  r["Optional"] = optional_op;
  r["OptionalHasElement"] = [](NodeCtx& c) {
    if (!c.has_input(0) || c.input(0)->type.kind != ValueKind::Optional) {  // no input: empty; else present
      c.set_output(0, c.constant(HostTensor::scalar(DType::Bool, c.has_input(0) ? 1 : 0)));
      return;
    }
    c.set_output(0, c.emit(Op::OptionalHas, {c.input(0)}));
  };
  r["OptionalGetElement"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    c.set_output(0, x->type.kind == ValueKind::Optional ? c.emit(Op::OptionalGet, {x}) : x);
  };
}

}  // namespace kiln::onnx_import
