// Prints a Graph as text IR. Why: dumps, pass tests and bug reports read graphs as text, and the
// parser (parser.cc) reads exactly this form back; docs/ir.md describes the format.
#include <set>
#include <unordered_map>

#include "ir/text_syntax.h"
#include "kiln/error.h"
#include "kiln/graph.h"

namespace kiln {

namespace {

class Printer {
 public:
  explicit Printer(const Graph& g) : graph_(g) {}

  std::string print() {
    assign_labels();
    out_ = "graph @" + text_syntax::bare_or_quoted(graph_.name()) + "(";
    for (size_t i = 0; i < graph_.inputs().size(); ++i) {
      const Value* in = graph_.inputs()[i];
      out_ += (i ? ", " : "") + ref(in) + ": " + in->type.to_string();
    }
    out_ += ") {\n";
    for (const auto& node : graph_.nodes()) print_node(*node);
    out_ += "  return";
    for (size_t i = 0; i < graph_.outputs().size(); ++i)
      out_ += (i ? ", " : " ") + ref(graph_.outputs()[i]);
    out_ += "\n}\n";
    return out_;
  }

 private:
  // Labels are fixed before printing, in definition order, so numbering is the print order and a
  // value used before its definition (an invalid graph) still prints under its own label.
  void assign_labels() {
    for (const Value* in : graph_.inputs()) assign_label(in);
    for (const auto& node : graph_.nodes())
      for (const Value* out : node->outputs) assign_label(out);
  }

  // A value prints by its name unless the name is empty, purely numeric (it would read as a
  // position) or already printed for an earlier value; those print as the next number.
  void assign_label(const Value* v) {
    if (labels_.count(v)) return;
    const std::string& name = v->name;
    if (!name.empty() && !text_syntax::is_numeric(name) && names_taken_.insert(name).second) {
      labels_[v] = "%" + text_syntax::bare_or_quoted(name);
    } else {
      labels_[v] = "%" + std::to_string(next_number_++);
    }
  }

  std::string ref(const Value* v) const {
    if (v == nullptr) return "%\"<null>\"";
    auto it = labels_.find(v);
    // Only an invalid graph reaches this: the text then fails to parse, naming the value.
    if (it == labels_.end()) return "%" + text_syntax::quote(str("<value #", v->id, " not in graph>"));
    return it->second;
  }

  void print_node(const Node& n) {
    out_ += "  ";
    for (size_t i = 0; i < n.outputs.size(); ++i) out_ += (i ? ", " : "") + ref(n.outputs[i]);
    if (!n.outputs.empty()) out_ += " = ";
    out_ += std::string(op_name(n.op)) + "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) out_ += (i ? ", " : "") + ref(n.inputs[i]);
    out_ += ")";
    if (!n.attrs.items().empty()) {
      out_ += " {";
      bool first = true;
      for (const auto& [name, value] : n.attrs.items()) {  // Attrs keeps them sorted by name
        out_ += (first ? "" : ", ") + name + " = " + attr_text(value);
        first = false;
      }
      out_ += "}";
    }
    if (!n.outputs.empty()) {
      out_ += " : ";
      for (size_t i = 0; i < n.outputs.size(); ++i)
        out_ += (i ? ", " : "") + n.outputs[i]->type.to_string();
    }
    if (!n.name.empty()) out_ += " loc(" + text_syntax::quote(n.name) + ")";
    out_ += "\n";
  }

  // A sub-graph prints nested, its lines indented under the node; it has its own value names.
  static std::string attr_text(const AttrValue& value) {
    if (attr_kind_of(value) != AttrKind::Graph) return attr_to_string(value);
    std::string text = attr_to_string(value), out;
    if (!text.empty() && text.back() == '\n') text.pop_back();
    for (char c : text) {
      out += c;
      if (c == '\n') out += "  ";
    }
    return out;
  }

  const Graph& graph_;
  std::unordered_map<const Value*, std::string> labels_;
  std::set<std::string> names_taken_;
  int next_number_ = 0;
  std::string out_;
};

}  // namespace

std::string print_graph(const Graph& g) { return Printer(g).print(); }

}  // namespace kiln
