// The reference interpreter's driver: binds symbolic dims from the inputs, checks guards, then runs
// each node's reference kernel in graph order. Why: the oracle must reject inputs the graph was not
// built for with a message naming the input and dim, never compute on a wrong shape.
#include <set>
#include <unordered_map>

#include "interp/ref_kernels.h"
#include "kiln/error.h"
#include "kiln/interp.h"

namespace kiln::interp {

namespace {

std::string input_label(const Graph& g, size_t i) {
  const Value* v = g.inputs()[i];
  return v->name.empty() ? str("input #", i) : str("input '", v->name, "'");
}

// The name of a dim that is exactly one symbol ("B"), or "" for constants and compound dims.
std::string plain_symbol_name(const SymInt& d) {
  if (d.is_constant()) return "";
  std::set<std::string> symbols;
  d.collect_symbols(symbols);
  if (symbols.size() != 1) return "";
  const std::string& name = *symbols.begin();
  return d == SymInt::symbol(name) ? name : "";
}

std::vector<int64_t> evaluate_shape(const Shape& shape, const std::map<std::string, int64_t>& bindings) {
  std::vector<int64_t> dims;
  dims.reserve(shape.size());
  for (const SymInt& d : shape) dims.push_back(d.evaluate(bindings));
  return dims;
}

void check_guards(const Graph& g, const std::map<std::string, int64_t>& bindings) {
  for (const ShapeGuard& guard : g.guards()) {
    int64_t lhs = 0, rhs = 0;
    try {
      lhs = guard.lhs.evaluate(bindings);
      rhs = guard.rhs.evaluate(bindings);
    } catch (const Error& e) {
      throw Error(str("guard ", guard.to_string(), " cannot be checked: ", e.what()));
    }
    KILN_CHECK(lhs == rhs, "guard ", guard.to_string(), " fails for these inputs: ",
               guard.lhs.to_string(), " = ", lhs, " but ", guard.rhs.to_string(), " = ", rhs);
  }
}

// One tensor of an input with its type and a label; containers contribute their elements.
struct FlatInput {
  const TensorType* type;
  const HostTensor* value;
  std::string label;
};

void flatten_input(const TensorType& type, const HostTensor& t, const std::string& label, std::vector<FlatInput>& out) {
  KILN_CHECK(t.kind() == type.kind, label, ": expected ", type.to_string(), ", got ", t.to_string(2));
  if (type.kind == ValueKind::Tensor) {
    out.push_back({&type, &t, label});
    return;
  }
  if (type.kind == ValueKind::Optional) {  // an empty one carries no dtype worth checking
    if (!t.items().empty()) flatten_input(type.elements[0], t.items()[0], label + " (its value)", out);
    return;
  }
  KILN_CHECK(t.dtype() == type.dtype, label, ": expected ", type.to_string(), ", got elements of dtype ",
             dtype_name(t.dtype()));
  KILN_CHECK(t.items().size() == type.elements.size(), label, ": expected a sequence of ", type.elements.size(),
             " elements (", type.to_string(), "), got ", t.items().size());
  for (size_t i = 0; i < type.elements.size(); ++i)
    flatten_input(type.elements[i], t.items()[i], str(label, " element ", i), out);
}

}  // namespace

std::map<std::string, int64_t> bind_symbols(const Graph& g, const std::vector<HostTensor>& inputs) {
  KILN_CHECK(inputs.size() == g.inputs().size(), "graph '", g.name(), "' takes ", g.inputs().size(),
             " inputs, got ", inputs.size());
  std::vector<FlatInput> flat;
  for (size_t i = 0; i < inputs.size(); ++i) flatten_input(g.inputs()[i]->type, inputs[i], input_label(g, i), flat);
  std::map<std::string, int64_t> bindings;
  std::map<std::string, std::string> bound_by;  // symbol -> "input 'x' dim 0", for messages
  // Pass 1: dtype and rank, and every dim that is a plain symbol binds (first occurrence wins).
  for (const FlatInput& f : flat) {
    const TensorType& type = *f.type;
    const HostTensor& t = *f.value;
    KILN_CHECK(t.dtype() == type.dtype, f.label, ": expected dtype ",
               dtype_name(type.dtype), ", got ", dtype_name(t.dtype()));
    KILN_CHECK(t.rank() == type.rank(), f.label, ": expected rank ", type.rank(), " (",
               type.to_string(), "), got rank ", t.rank(), " ", dims_to_string(t.shape()));
    for (int d = 0; d < type.rank(); ++d) {
      std::string name = plain_symbol_name(type.shape[size_t(d)]);
      if (name.empty()) continue;
      int64_t actual = t.shape()[size_t(d)];
      auto [it, inserted] = bindings.emplace(name, actual);
      if (inserted) {
        bound_by[name] = str(f.label, " dim ", d);
        continue;
      }
      KILN_CHECK(it->second == actual, f.label, " dim ", d, ": expected ", it->second,
                 " (", name, ", bound by ", bound_by[name], "), got ", actual);
    }
  }
  // Pass 2: constants and compound dims are evaluated and checked.
  for (const FlatInput& f : flat) {
    const TensorType& type = *f.type;
    for (int d = 0; d < type.rank(); ++d) {
      const SymInt& dim = type.shape[size_t(d)];
      int64_t expected = 0;
      try {
        expected = dim.evaluate(bindings);
      } catch (const Error& e) {
        throw Error(str(f.label, " dim ", d, " is ", dim.to_string(),
                        ", which no input binds: ", e.what(),
                        " (give some input a dim that is exactly that symbol)"));
      }
      int64_t actual = f.value->shape()[size_t(d)];
      KILN_CHECK(expected == actual, f.label, " dim ", d, ": expected ", expected,
                 dim.is_constant() ? "" : str(" (", dim.to_string(), ")"), ", got ", actual);
    }
  }
  return bindings;
}

std::vector<HostTensor> run(const Graph& g, const std::vector<HostTensor>& inputs) {
  std::map<std::string, int64_t> bindings = bind_symbols(g, inputs);
  check_guards(g, bindings);

  std::unordered_map<const Value*, HostTensor> values;
  std::unordered_map<const Value*, size_t> remaining_uses;  // frees intermediates after last use
  for (size_t i = 0; i < inputs.size(); ++i) values[g.inputs()[i]] = inputs[i];
  for (const auto& node : g.nodes())
    for (const Value* in : node->inputs) ++remaining_uses[in];

  for (const auto& node : g.nodes()) {
    std::vector<HostTensor> in;
    in.reserve(node->inputs.size());
    for (const Value* v : node->inputs) {
      auto it = values.find(v);
      KILN_CHECK(it != values.end(), node->describe(), ": operand value %", v->id,
                 " has not been computed (graph not in topological order?)");
      in.push_back(it->second);
    }
    std::vector<HostTensor> out = allocate_outputs(*node, bindings);
    try {
      run_reference_kernel(KernelArgs{node->op, node->attrs, in, out});
    } catch (const Error& e) {
      throw Error(str(node->describe(), ": ", e.what()));
    }
    check_results(*node, out);
    for (size_t i = 0; i < out.size(); ++i) values[node->outputs[i]] = std::move(out[i]);
    for (const Value* v : node->inputs)
      if (--remaining_uses[v] == 0 && !g.is_output(v)) values.erase(v);
  }

  std::vector<HostTensor> results;
  for (const Value* v : g.outputs()) {
    auto it = values.find(v);
    KILN_CHECK(it != values.end(), "graph '", g.name(), "': output value %", v->id, " is never computed");
    results.push_back(it->second);
  }
  return results;
}

std::vector<HostTensor> allocate_outputs(const Node& node, const std::map<std::string, int64_t>& bindings) {
    std::vector<HostTensor> out;
    out.reserve(node.outputs.size());
    for (const Value* v : node.outputs) {
      if (!v->type.is_tensor()) {  // containers are made by their kernel; this only has the kind
        HostTensor placeholder = HostTensor::sequence(v->type.dtype, {});
        out.push_back(v->type.kind == ValueKind::Optional ? HostTensor::optional(v->type.dtype, {}) : placeholder);
        continue;
      }
      std::vector<int64_t> dims;
      try {
        dims = evaluate_shape(v->type.shape, bindings);
      } catch (const Error& e) {
        throw Error(str(node.describe(), ": output type ", v->type.to_string(), ": ", e.what()));
      }
      for (int64_t d : dims)
        KILN_CHECK(d >= 0, node.describe(), ": output type ", v->type.to_string(),
                   " evaluates to a negative dim for these inputs");
      out.push_back(HostTensor::empty(v->type.dtype, dims));
    }
    return out;
}

void check_results(const Node& node, const std::vector<HostTensor>& out) {
  // Kernels that replace their outputs (control flow, containers) must still match the types.
  if (!node.info().has(kContainer)) return;
  for (size_t i = 0; i < out.size(); ++i) {
    const TensorType& type = node.outputs[i]->type;
    KILN_CHECK(out[i].kind() == type.kind && out[i].dtype() == type.dtype &&
                   (!type.is_tensor() || out[i].rank() == type.rank()),
               node.describe(), ": result ", i, " is ", out[i].to_string(2), " but its type is ", type.to_string());
  }
}

std::vector<HostTensor> run_node(const Node& node, const std::vector<HostTensor>& inputs,
                                 const std::map<std::string, int64_t>& bindings) {
  std::vector<HostTensor> out = allocate_outputs(node, bindings);
  try {
    run_reference_kernel(KernelArgs{node.op, node.attrs, inputs, out});
  } catch (const Error& e) {
    throw Error(str(node.describe(), ": ", e.what()));
  }
  check_results(node, out);
  return out;
}

std::vector<HostTensor> run_op(Op op, const Attrs& attrs, const std::vector<HostTensor>& inputs) {
  Graph g(std::string(op_name(op)));
  std::vector<Value*> operands;
  for (size_t i = 0; i < inputs.size(); ++i)
    operands.push_back(g.add_input(str("in", i), type_of(inputs[i])));
  g.set_outputs(g.add_node(op, operands, attrs));
  return run(g, inputs);
}

void run_reference_kernel(const KernelArgs& a) {
  switch (a.op) {
#define OP(e, ...)  \
  case Op::e:       \
    ref_##e(a);     \
    return;
#include "ir/ops.def"
#undef OP
  }
  KILN_ASSERT(false && "op without a reference kernel");
}

}  // namespace kiln::interp
