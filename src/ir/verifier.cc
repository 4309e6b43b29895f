// The Graph IR verifier. Why: builders type nodes at birth, but passes mutate graphs in place
// (set_operand, attrs, types); running verify() between passes catches a broken rewrite at the pass
// that made it, naming the node and the rule rather than failing later somewhere else.
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "kiln/error.h"
#include "kiln/graph.h"

namespace kiln {

namespace {

// Named values print as %name; unnamed ones by id, which differs from the text IR's positional
// numbers, so they read "value #id" to avoid pointing at the wrong %N.
std::string describe_value(const Value* v) {
  if (v == nullptr) return "null";
  return v->name.empty() ? str("value #", v->id) : "%" + v->name;
}

class Verifier {
 public:
  explicit Verifier(const Graph& g) : graph_(g) {}

  void run() {
    size_t index = 0;
    for (const auto& n : graph_.nodes()) position_[n.get()] = index++;
    check_inputs();
    for (const auto& n : graph_.nodes()) {
      check_operands(*n);
      check_attrs(*n);
      check_subgraphs(*n);
      check_outputs(*n);
    }
    check_use_lists();
    check_graph_outputs();
  }

 private:
  [[noreturn]] void fail(const Node& n, const std::string& rule) const {
    throw Error(str("verify: ", n.describe(), ": ", rule));
  }
  [[noreturn]] void fail_graph(const std::string& rule) const {
    throw Error(str("verify: graph '", graph_.name(), "': ", rule));
  }
  bool in_graph(const Node* n) const { return position_.count(n) != 0; }

  void check_inputs() {
    std::set<std::string> names;
    for (size_t i = 0; i < graph_.inputs().size(); ++i) {
      const Value* in = graph_.inputs()[i];
      if (in == nullptr) fail_graph(str("input ", i, " is null"));
      if (in->producer != nullptr)
        fail_graph(str("input ", i, " (", describe_value(in), ") is produced by ", in->producer->describe()));
      if (!defined_.insert(in).second) fail_graph(str("input ", i, " (", describe_value(in), ") is listed twice"));
      definition_order_.push_back(in);
      if (!in->name.empty() && !names.insert(in->name).second)
        fail_graph(str("two inputs are named '", in->name, "'"));
    }
  }

  // True when `from`'s node reaches `target` by following operands backwards: a cycle.
  bool depends_on(const Node* from, const Node* target) const {
    std::vector<const Node*> stack = {from};
    std::unordered_set<const Node*> seen;
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (n == target) return true;
      if (!seen.insert(n).second) continue;
      for (const Value* in : n->inputs)
        if (in && in->producer && in_graph(in->producer)) stack.push_back(in->producer);
    }
    return false;
  }

  void check_operands(const Node& n) {
    const OpInfo& info = n.info();
    int count = int(n.inputs.size());
    if (count < info.min_operands || (info.max_operands >= 0 && count > info.max_operands))
      fail(n, str("has ", count, " operands; '", info.name, "' takes ",
                  info.max_operands < 0 ? str("at least ", info.min_operands)
                  : info.min_operands == info.max_operands ? str(info.min_operands)
                                                           : str(info.min_operands, " to ", info.max_operands)));
    for (int i = 0; i < count; ++i) {
      const Value* v = n.inputs[size_t(i)];
      std::string operand = str("operand ", i, " (", describe_value(v), ")");
      if (v == nullptr) fail(n, str("operand ", i, " is null"));
      if (defined_.count(v)) continue;
      if (v->producer == nullptr) fail(n, operand + " is neither a graph input nor a node's result");
      if (!in_graph(v->producer))
        fail(n, operand + " is dangling: its producer " + v->producer->describe() + " is not in the graph");
      if (depends_on(v->producer, &n))
        fail(n, operand + " closes a cycle through " + v->producer->describe());
      fail(n, operand + " is used before it is defined (by " + v->producer->describe() +
                  ", later in the node list)");
    }
  }

  // Attributes must be exactly the op's declared set, each of its declared kind (add_node fills
  // defaults and normalises lenient kinds, so a built graph always satisfies this).
  void check_attrs(const Node& n) {
    const OpInfo& info = n.info();
    for (const auto& [name, value] : n.attrs.items()) {
      const AttrSpec* spec = info.find_attr(name);
      if (spec == nullptr) fail(n, str("has attribute '", name, "' that '", info.name, "' does not declare"));
      if (attr_kind_of(value) != spec->kind)
        fail(n, str("attribute '", name, "' is ", attr_kind_name(attr_kind_of(value)), ", the op table says ",
                    attr_kind_name(spec->kind)));
    }
    for (const AttrSpec& spec : info.attrs)
      if (!n.attrs.has(spec.name))
        fail(n, str("lacks attribute '", spec.name, "' (", attr_kind_name(spec.kind), ")",
                    spec.required ? "" : "; add_node fills defaults, so a pass erased it"));
  }

  // Sub-graphs verify on their own: they read only their own inputs (captures are operands).
  void check_subgraphs(const Node& n) {
    for (const auto& [name, value] : n.attrs.items()) {
      const GraphAttr* sub = std::get_if<GraphAttr>(&value);
      if (sub == nullptr) continue;
      if (*sub == nullptr) fail(n, str("sub-graph '", name, "' is null"));
      try {
        verify(**sub);
      } catch (const Error& e) {
        fail(n, str("sub-graph '", name, "': ", e.what()));
      }
    }
  }

  void check_outputs(const Node& n) {
    std::vector<TensorType> operand_types;
    for (const Value* v : n.inputs) operand_types.push_back(v->type);
    std::vector<ShapeGuard> scratch_guards;  // re-inference must not add guards to the graph
    InferCtx ctx{n.op, operand_types, n.attrs, &scratch_guards, n.describe()};
    std::vector<TensorType> expected;
    try {
      expected = run_shape_rule(ctx);
    } catch (const Error& e) {
      fail(n, str("its shape rule rejects the operands: ", e.what()));
    }
    if (expected.size() != n.outputs.size())
      fail(n, str("has ", n.outputs.size(), " results; its shape rule gives ", expected.size()));
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Value* out = n.outputs[i];
      if (out == nullptr) fail(n, str("result ", i, " is null"));
      if (out->producer != &n || out->output_index != int(i))
        fail(n, str("result ", i, " (", describe_value(out), ") does not point back to this node as result ", i));
      if (out->type != expected[i])
        fail(n, str("result ", i, " (", describe_value(out), ") has type ", out->type.to_string(),
                    "; re-inference gives ", expected[i].to_string()));
      if (!defined_.insert(out).second)
        fail(n, str("result ", i, " (", describe_value(out), ") is already defined earlier"));
      definition_order_.push_back(out);
    }
  }

  // Every operand slot appears exactly once in its value's use list, and nothing else does.
  void check_use_lists() {
    using Slot = std::pair<const Node*, int>;
    std::unordered_map<const Value*, std::map<Slot, int>> expected;
    for (const auto& n : graph_.nodes())
      for (size_t i = 0; i < n->inputs.size(); ++i) ++expected[n->inputs[i]][Slot{n.get(), int(i)}];
    for (const auto& n : graph_.nodes()) {
      for (size_t i = 0; i < n->inputs.size(); ++i) {
        const Value* v = n->inputs[i];
        int listed = int(std::count_if(v->uses.begin(), v->uses.end(), [&](const Use& u) {
          return u.user == n.get() && u.operand_index == int(i);
        }));
        if (listed != 1)
          fail(*n, str("operand ", i, " (", describe_value(v), ") appears ", listed,
                       " times in that value's use list; expected once"));
      }
    }
    for (const Value* v : definition_order_) {
      const auto& slots = expected[v];
      for (const Use& u : v->uses) {
        if (u.user == nullptr || !in_graph(u.user))
          fail_graph(str(describe_value(v), " lists a use by a node that is not in the graph"));
        if (!slots.count(Slot{u.user, u.operand_index}))
          fail(*u.user, str(describe_value(v), " lists a use as operand ", u.operand_index,
                            " of this node, which reads something else there"));
      }
    }
  }

  void check_graph_outputs() {
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      const Value* v = graph_.outputs()[i];
      if (v == nullptr) fail_graph(str("output ", i, " is null"));
      if (!defined_.count(v))
        fail_graph(str("output ", i, " (", describe_value(v), ") is not defined in the graph"));
    }
  }

  const Graph& graph_;
  std::unordered_map<const Node*, size_t> position_;
  std::unordered_set<const Value*> defined_;
  std::vector<const Value*> definition_order_;  // defined_ in order, for deterministic reports
};

}  // namespace

void verify(const Graph& g) { Verifier(g).run(); }

}  // namespace kiln
