// Python bindings of the Graph IR builder (see graph_builder.h).
#include "graph_builder.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <variant>

#include "arrays.h"
#include "kiln/error.h"
#include "kiln/interp.h"

namespace kiln::py {

namespace {

using Dim = std::variant<int64_t, std::string>;

SymInt dim_from_py(const Dim& d) {
  if (const int64_t* c = std::get_if<int64_t>(&d)) return SymInt(*c);
  return parse_symint(std::get<std::string>(d));
}

Shape shape_from_py(const std::vector<Dim>& dims) {
  Shape s;
  for (const Dim& d : dims) s.push_back(dim_from_py(d));
  return s;
}

std::vector<Dim> shape_to_py(const Shape& s) {
  std::vector<Dim> out;
  for (const SymInt& d : s) {
    if (auto c = d.maybe_constant()) out.emplace_back(*c);
    else out.emplace_back(d.to_string());
  }
  return out;
}

// One attribute value from Python, converted to the kind the op table declares for it.
AttrValue attr_from_py(const AttrSpec& spec, nb::handle v, const std::string& where) {
  std::string what = str(where, ": attribute '", spec.name, "'");
  try {
    switch (spec.kind) {
      case AttrKind::Int: return nb::cast<int64_t>(v);
      case AttrKind::Float: return nb::cast<double>(v);
      case AttrKind::Ints: return nb::cast<std::vector<int64_t>>(v);
      case AttrKind::Floats: return nb::cast<std::vector<double>>(v);
      case AttrKind::String: return nb::cast<std::string>(v);
      case AttrKind::DType: return dtype_named(nb::cast<std::string>(v), what);
      case AttrKind::Shape: return shape_from_py(nb::cast<std::vector<Dim>>(v));
      case AttrKind::Tensor: {
        auto pair = nb::cast<std::pair<InArray, std::string>>(v);
        return copy_array(pair.first, dtype_named(pair.second, what), what);
      }
      case AttrKind::Graph: break;
    }
  } catch (const nb::cast_error&) {
    throw Error(str(what, " expects ", attr_kind_name(spec.kind), ", got ",
                    nb::cast<std::string>(nb::str(nb::handle(v.type())))));
  }
  throw Error(str(what, ": sub-graph attributes cannot be built from Python"));
}

Attrs attrs_from_py(Op op, const nb::dict& attrs, const std::string& where) {
  Attrs out;
  const OpInfo& info = op_info(op);
  for (auto [k, v] : attrs) {
    std::string name = nb::cast<std::string>(k);
    const AttrSpec* spec = info.find_attr(name);
    KILN_CHECK(spec != nullptr, where, ": op ", info.name, " has no attribute '", name, "'");
    out.set(name, attr_from_py(*spec, v, where));
  }
  return out;
}

PyValue wrap(const PyGraph& g, Value* v) { return PyValue{g.graph, v}; }

}  // namespace

void bind_graph(nb::module_& m) {
  nb::class_<PyValue>(m, "Value", "An SSA value of a Graph: its type and name.")
      .def_prop_ro("dtype", [](const PyValue& v) { return std::string(dtype_name(v.value->type.dtype)); })
      .def_prop_ro("shape", [](const PyValue& v) { return shape_to_py(v.value->type.shape); },
                   "Dims: ints, or strings for symbolic dims ('s0', 'B*T').")
      .def_prop_rw("name", [](const PyValue& v) { return v.value->name; },
                   [](PyValue& v, const std::string& name) { v.value->name = name; },
                   "The user-facing name (graph inputs and outputs: what sessions and `kiln run` call them).")
      .def_prop_ro("id", [](const PyValue& v) { return v.value->id; })
      .def("__repr__", [](const PyValue& v) { return str("<kiln Value %", v.value->id, ": ", v.value->type.to_string(), ">"); });

  nb::class_<PyGraph>(m, "Graph", "A Kiln graph (typed SSA), built op by op through the op table.")
      .def(nb::new_([](const std::string& name) { return PyGraph{std::make_shared<Graph>(name)}; }),
           nb::arg("name") = "main")
      .def_static("parse", [](const std::string& text) { return PyGraph{std::shared_ptr<Graph>(parse_graph(text))}; },
                  nb::arg("text"), "Parses Kiln's text IR (docs/ir.md).")
      .def("input",
           [](PyGraph& g, const std::string& name, const std::string& dtype, const std::vector<Dim>& shape) {
             return wrap(g, g.graph->add_input(name, TensorType{dtype_named(dtype, str("input '", name, "'")),
                                                                 shape_from_py(shape)}));
           },
           nb::arg("name"), nb::arg("dtype"), nb::arg("shape"), "Adds a graph input.")
      .def("node",
           [](PyGraph& g, const std::string& op_text, const std::vector<PyValue>& inputs, const nb::dict& attrs,
              const std::string& name) {
             std::optional<Op> op = op_from_name(op_text);
             KILN_CHECK(op.has_value(), "no op named '", op_text, "' in Kiln's op table (src/ir/ops.def)");
             std::string where = name.empty() ? str("node (", op_text, ")") : str("node '", name, "' (", op_text, ")");
             std::vector<Value*> operands;
             for (const PyValue& v : inputs) {
               KILN_CHECK(v.graph == g.graph, where, ": an operand belongs to another graph");
               operands.push_back(v.value);
             }
             std::vector<PyValue> out;
             for (Value* v : g.graph->add_node(*op, operands, attrs_from_py(*op, attrs, where), name)) out.push_back(wrap(g, v));
             return out;
           },
           nb::arg("op"), nb::arg("inputs"), nb::arg("attrs") = nb::dict(), nb::arg("name") = "",
           "Adds a node of op `op` (its name in ops.def); returns its outputs. Attributes are converted to the "
           "kinds the op table declares (shapes: ints or symbolic strings; dtypes: 'f32'...).")
      .def("constant",
           [](PyGraph& g, const InArray& a, const std::string& dtype) {
             return wrap(g, g.graph->constant(copy_array(a, dtype_named(dtype, "constant"), "constant")));
           },
           nb::arg("array"), nb::arg("dtype"), "A constant (copied into the graph).")
      .def("set_outputs",
           [](PyGraph& g, const std::vector<PyValue>& outs) {
             std::vector<Value*> vs;
             for (const PyValue& v : outs) vs.push_back(v.value);
             g.graph->set_outputs(vs);
           })
      .def_prop_ro("inputs", [](const PyGraph& g) {
        std::vector<PyValue> out;
        for (Value* v : g.graph->inputs()) out.push_back(wrap(g, v));
        return out;
      })
      .def_prop_ro("outputs", [](const PyGraph& g) {
        std::vector<PyValue> out;
        for (Value* v : g.graph->outputs()) out.push_back(wrap(g, v));
        return out;
      })
      .def_prop_ro("num_nodes", [](const PyGraph& g) { return g.graph->num_nodes(); })
      .def("op_counts", [](const PyGraph& g) {
        std::map<std::string, int> counts;
        for (const auto& n : g.graph->nodes()) ++counts[std::string(n->info().name)];
        return counts;
      }, "Nodes by op name.")
      .def("verify", [](const PyGraph& g) { verify(*g.graph); }, "Runs the IR verifier (raises kiln.Error).")
      .def("text", [](const PyGraph& g) { return print_graph(*g.graph); }, "The text IR.")
      .def("interpret",
           [](const PyGraph& g, const std::vector<InArray>& arrays, const std::vector<std::string>& dtypes) {
             KILN_CHECK(arrays.size() == dtypes.size(), "interpret: ", arrays.size(), " arrays, ", dtypes.size(), " dtypes");
             std::vector<HostTensor> in;
             for (size_t i = 0; i < arrays.size(); ++i)
               in.push_back(borrow_array(arrays[i], dtype_named(dtypes[i], "interpret"), str("input ", i)));
             std::vector<HostTensor> out;
             {
               nb::gil_scoped_release release;
               out = interp::run(*g.graph, in);
             }
             unalias_outputs(out, in);
             std::vector<std::pair<nb::object, std::string>> result;
             for (HostTensor& t : out) {
               std::string d(dtype_name(t.dtype()));
               result.emplace_back(array_of(std::move(t)), d);
             }
             return result;
           },
           nb::arg("arrays"), nb::arg("dtypes"),
           "Runs the reference interpreter (float64 math): [(array, dtype)] per output.");
}

}  // namespace kiln::py
