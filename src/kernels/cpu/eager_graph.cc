// Eager execution of a whole graph: the baseline for models that arrive as graphs (ONNX).
#include <map>
#include <unordered_map>

#include "kernels/cpu/eager.h"
#include "kiln/error.h"
#include "kiln/interp.h"

namespace kiln::eager {

Attrs bind_shape_attrs(const Attrs& attrs, const std::map<std::string, int64_t>& bindings) {
  Attrs out = attrs;
  for (const auto& [name, value] : attrs.items()) {
    if (const Shape* s = std::get_if<Shape>(&value)) {
      Shape bound;
      for (const SymInt& d : *s) bound.push_back(SymInt(d.evaluate(bindings)));
      out.set(name, bound);
    }
  }
  return out;
}

std::vector<HostTensor> run_graph(const Graph& g, const std::vector<HostTensor>& inputs, Scoreboard* sb) {
  std::map<std::string, int64_t> bindings = interp::bind_symbols(g, inputs);
  std::unordered_map<const Value*, HostTensor> values;
  for (size_t i = 0; i < g.inputs().size(); ++i) values[g.inputs()[i]] = inputs[i];
  for (const auto& node : g.nodes()) {
    std::vector<HostTensor> args;
    for (const Value* in : node->inputs) args.push_back(values.at(in));
    std::vector<HostTensor> outs;
    try {
      outs = run_op(node->op, bind_shape_attrs(node->attrs, bindings), args, sb);
    } catch (const Error& e) {
      throw Error(str(node->describe(), ": ", e.what()));
    }
    for (size_t i = 0; i < outs.size(); ++i) values[node->outputs[i]] = std::move(outs[i]);
  }
  std::vector<HostTensor> result;
  for (const Value* out : g.outputs()) result.push_back(values.at(out));
  return result;
}

}  // namespace kiln::eager
