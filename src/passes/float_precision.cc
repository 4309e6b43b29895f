// to_float_precision (see include/kiln/passes.h): an f32 graph rebuilt in f16 or bf16 with f32 at
// its boundaries. Why: real models arrive in f32; on a GPU they should run in 16-bit with the
// kernels accumulating in f32 (their compute type), checked against the f32 reference.
#include <map>

#include "kiln/error.h"
#include "kiln/passes.h"

namespace kiln {

namespace {
// The attributes that name a result dtype (cast, arange, full, the random sources).
void retype_dtype_attr(Attrs& attrs, DType to) {
  if (attrs.has("dtype") && attrs.get_dtype("dtype") == DType::F32) attrs.set("dtype", to);
}

HostTensor converted(const HostTensor& t, DType to) {
  HostTensor out = HostTensor::empty(to, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) out.set_f64(i, t.get_f64(i));
  return out;
}
}  // namespace

std::unique_ptr<Graph> to_float_precision(const Graph& g, DType to) {
  KILN_CHECK(to == DType::F16 || to == DType::BF16 || to == DType::F32, "to_float_precision: dtype ", dtype_name(to),
             " is not f32, f16 or bf16");
  if (to == DType::F32) return g.clone();
  auto out = std::make_unique<Graph>(g.name());
  std::map<const Value*, Value*> map;
  for (const Value* in : g.inputs()) {
    Value* v = out->add_input(in->name, in->type);
    map[in] = in->type.is_tensor() && in->type.dtype == DType::F32 ? out->add(Op::Cast, {v}, {{"dtype", to}}) : v;
  }
  for (const auto& node : g.nodes()) {
    const Node& n = *node;
    KILN_CHECK(!n.info().has(kSubgraph), "to_float_precision: ", n.describe(),
               ": graphs with control flow (if/loop/scan) keep their precision; run them in f32");
    Attrs attrs = n.attrs;
    if (n.op == Op::Constant) {
      const HostTensor& value = n.attrs.get_tensor("value");
      if (value.is_tensor() && value.dtype() == DType::F32) attrs.set("value", converted(value, to));
    }
    retype_dtype_attr(attrs, to);
    std::vector<Value*> operands;
    for (const Value* v : n.inputs) operands.push_back(v ? map.at(v) : nullptr);
    std::vector<Value*> results = out->add_node(n.op, operands, attrs, n.name);
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      results[i]->name = n.outputs[i]->name;
      map[n.outputs[i]] = results[i];
    }
  }
  std::vector<Value*> outputs;
  for (const Value* o : g.outputs()) {
    Value* v = map.at(o);
    if (o->type.is_tensor() && o->type.dtype == DType::F32 && v->type.dtype != DType::F32) {
      v->name = o->name.empty() ? "" : str(o->name, "_", dtype_name(to));
      v = out->add(Op::Cast, {v}, {{"dtype", DType::F32}});
      v->name = o->name;  // callers find the output by its name
    }
    outputs.push_back(v);
  }
  out->set_outputs(outputs);
  out->guards() = g.guards();
  return out;
}

}  // namespace kiln
