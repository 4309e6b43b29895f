// Graph construction and mutation: typed-at-birth nodes, use lists, topological order, cloning.
#include "kiln/graph.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "kiln/error.h"

namespace kiln {

std::string Node::describe() const {
  if (!name.empty()) return str("node '", name, "' (", op_name(op), ")");
  return str("node #", id, " (", op_name(op), ")");
}

bool Node::has_string_values() const {
  for (const Value* v : inputs)
    if (v->type.is_tensor() && v->type.dtype == DType::Str) return true;
  for (const Value* v : outputs)
    if (v->type.is_tensor() && v->type.dtype == DType::Str) return true;
  return false;
}

std::string ShapeGuard::to_string() const {
  return lhs.to_string() + " == " + rhs.to_string() + "  [" + reason + "]";
}

Value* Graph::new_value(TensorType t) {
  auto v = std::make_unique<Value>();
  v->id = int(values_.size());
  v->type = std::move(t);
  values_.push_back(std::move(v));
  return values_.back().get();
}

Value* Graph::value_by_id(int id) const {
  if (id < 0 || id >= int(values_.size())) return nullptr;
  return values_[size_t(id)].get();
}

Value* Graph::add_input(const std::string& name, TensorType type) {
  for (const Value* in : inputs_)
    KILN_CHECK(in->name != name || name.empty(), "graph '", name_, "' already has an input named '",
               name, "'");
  Value* v = new_value(std::move(type));
  v->name = name;
  inputs_.push_back(v);
  return v;
}

Attrs Graph::complete_attrs(Op op, Attrs attrs, const std::string& where) {
  const OpInfo& info = op_info(op);
  for (const auto& [name, value] : attrs.items()) {
    const AttrSpec* spec = info.find_attr(name);
    KILN_CHECK(spec != nullptr, where, ": op '", info.name, "' has no attribute '", name, "'");
    AttrKind got = attr_kind_of(value);
    bool ok = got == spec->kind ||
              (spec->kind == AttrKind::Float && got == AttrKind::Int) ||
              (spec->kind == AttrKind::Shape && got == AttrKind::Ints) ||
              (spec->kind == AttrKind::Floats && got == AttrKind::Ints);
    KILN_CHECK(ok, where, ": attribute '", name, "' of '", info.name, "' must be ",
               attr_kind_name(spec->kind), ", got ", attr_kind_name(got));
  }
  // Normalise lenient kinds so the stored attribute always has the declared kind.
  for (const auto& spec : info.attrs) {
    if (!attrs.has(spec.name)) {
      KILN_CHECK(!spec.required, where, ": op '", info.name, "' requires attribute '", spec.name,
                 "' (", attr_kind_name(spec.kind), ")");
      attrs.set(spec.name, spec.default_value);
      continue;
    }
    AttrKind got = attr_kind_of(attrs.get(spec.name));
    if (got == spec.kind) continue;
    if (spec.kind == AttrKind::Float) attrs.set(spec.name, attrs.get_float(spec.name));
    if (spec.kind == AttrKind::Shape) attrs.set(spec.name, attrs.get_shape(spec.name));
    if (spec.kind == AttrKind::Floats) attrs.set(spec.name, attrs.get_floats(spec.name));
  }
  return attrs;
}

std::vector<TensorType> Graph::infer_types(Op op, const std::vector<TensorType>& in,
                                           const Attrs& attrs, const std::string& where) {
  InferCtx ctx{op, in, attrs, &guards_, where};
  return run_shape_rule(ctx);
}

std::vector<Value*> Graph::add_node(Op op, const std::vector<Value*>& inputs, Attrs attrs,
                                    const std::string& node_name) {
  const OpInfo& info = op_info(op);
  std::string where = node_name.empty() ? str("op '", info.name, "'")
                                        : str("node '", node_name, "' (", info.name, ")");
  int n = int(inputs.size());
  KILN_CHECK(n >= info.min_operands && (info.max_operands < 0 || n <= info.max_operands), where,
             ": expects ",
             info.max_operands < 0 ? str("at least ", info.min_operands)
             : info.min_operands == info.max_operands
                 ? str(info.min_operands)
                 : str(info.min_operands, " to ", info.max_operands),
             " operands, got ", n);
  std::vector<TensorType> in_types;
  for (int i = 0; i < n; ++i) {
    KILN_CHECK(inputs[size_t(i)] != nullptr, where, ": operand ", i, " is null");
    in_types.push_back(inputs[size_t(i)]->type);
  }
  attrs = complete_attrs(op, std::move(attrs), where);
  std::vector<TensorType> out_types = infer_types(op, in_types, attrs, where);

  auto node = std::make_unique<Node>();
  node->id = next_node_id_++;
  node->op = op;
  node->attrs = std::move(attrs);
  node->name = node_name;
  node->inputs = inputs;
  Node* raw = node.get();
  for (int i = 0; i < n; ++i) inputs[size_t(i)]->uses.push_back(Use{raw, i});
  for (size_t i = 0; i < out_types.size(); ++i) {
    Value* v = new_value(out_types[i]);
    v->producer = raw;
    v->output_index = int(i);
    raw->outputs.push_back(v);
  }
  std::list<std::unique_ptr<Node>>::iterator it;
  if (insert_before_ != nullptr) {
    it = nodes_.insert(node_pos_.at(insert_before_), std::move(node));
  } else {
    it = nodes_.insert(nodes_.end(), std::move(node));
  }
  node_pos_[raw] = it;
  return raw->outputs;
}

Value* Graph::constant(HostTensor t) {
  return add(Op::Constant, {}, Attrs{{"value", std::move(t)}});
}

void Graph::set_outputs(std::vector<Value*> outs) {
  for (Value* v : outs) KILN_CHECK(v != nullptr, "graph '", name_, "': null output");
  outputs_ = std::move(outs);
}

bool Graph::is_output(const Value* v) const {
  return std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end();
}

std::vector<Node*> Graph::node_list() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

void Graph::set_operand(Node* n, int index, Value* v) {
  Value* old = n->inputs.at(size_t(index));
  auto& uses = old->uses;
  for (auto it = uses.begin(); it != uses.end(); ++it) {
    if (it->user == n && it->operand_index == index) {
      uses.erase(it);
      break;
    }
  }
  n->inputs[size_t(index)] = v;
  v->uses.push_back(Use{n, index});
}

void Graph::replace_all_uses(Value* from, Value* to) {
  if (from == to) return;
  std::vector<Use> uses = from->uses;
  for (const Use& u : uses) set_operand(u.user, u.operand_index, to);
  for (auto& o : outputs_)
    if (o == from) o = to;
}

void Graph::erase_node(Node* n) {
  for (Value* out : n->outputs)
    KILN_CHECK(out->uses.empty() && !is_output(out), "cannot erase ", n->describe(),
               ": its result is still used");
  for (size_t i = 0; i < n->inputs.size(); ++i) {
    auto& uses = n->inputs[i]->uses;
    for (auto it = uses.begin(); it != uses.end(); ++it) {
      if (it->user == n && it->operand_index == int(i)) {
        uses.erase(it);
        break;
      }
    }
  }
  if (insert_before_ == n) insert_before_ = nullptr;
  auto pos = node_pos_.at(n);
  node_pos_.erase(n);
  nodes_.erase(pos);
}

void Graph::topological_sort() {
  std::unordered_map<const Node*, int> pending;
  std::vector<Node*> ready, order;
  for (const auto& n : nodes_) {
    int deps = 0;
    for (Value* in : n->inputs)
      if (in->producer) ++deps;
    pending[n.get()] = deps;
    if (deps == 0) ready.push_back(n.get());
  }
  // Stable: among ready nodes, keep the original relative order.
  std::unordered_map<const Node*, size_t> original;
  size_t k = 0;
  for (const auto& n : nodes_) original[n.get()] = k++;
  auto by_original = [&](Node* a, Node* b) { return original[a] > original[b]; };
  std::make_heap(ready.begin(), ready.end(), by_original);
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end(), by_original);
    Node* n = ready.back();
    ready.pop_back();
    order.push_back(n);
    for (Value* out : n->outputs)
      for (const Use& u : out->uses)
        if (--pending[u.user] == 0) {
          ready.push_back(u.user);
          std::push_heap(ready.begin(), ready.end(), by_original);
        }
  }
  if (order.size() != nodes_.size()) {
    for (const auto& n : nodes_)
      if (pending[n.get()] > 0) throw Error(str("graph '", name_, "' has a cycle through ", n->describe()));
  }
  std::list<std::unique_ptr<Node>> sorted;
  std::unordered_map<const Node*, std::unique_ptr<Node>*> owner;
  for (auto& n : nodes_) owner[n.get()] = &n;
  for (Node* n : order) sorted.push_back(std::move(*owner[n]));
  nodes_ = std::move(sorted);
  node_pos_.clear();
  for (auto it = nodes_.begin(); it != nodes_.end(); ++it) node_pos_[it->get()] = it;
}

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>(name_);
  std::unordered_map<const Value*, Value*> map;
  for (Value* in : inputs_) map[in] = g->add_input(in->name, in->type);
  for (const auto& n : nodes_) {
    auto node = std::make_unique<Node>();
    node->id = g->next_node_id_++;
    node->op = n->op;
    node->attrs = n->attrs;
    node->name = n->name;
    Node* raw = node.get();
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      Value* v = map.at(n->inputs[i]);
      raw->inputs.push_back(v);
      v->uses.push_back(Use{raw, int(i)});
    }
    for (Value* out : n->outputs) {
      Value* v = g->new_value(out->type);
      v->producer = raw;
      v->output_index = out->output_index;
      v->name = out->name;
      raw->outputs.push_back(v);
      map[out] = v;
    }
    auto it = g->nodes_.insert(g->nodes_.end(), std::move(node));
    g->node_pos_[raw] = it;
  }
  std::vector<Value*> outs;
  for (Value* o : outputs_) outs.push_back(map.at(o));
  g->outputs_ = outs;
  g->guards_ = guards_;
  return g;
}

namespace {
// DOT strings are double-quoted; ONNX names may contain quotes and backslashes.
std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}
}  // namespace

std::string Graph::to_dot() const {
  std::string out =
      "digraph \"" + dot_escape(name_) + "\" {\n  rankdir=TB;\n  node [fontname=\"monospace\"];\n";
  auto vname = [](const Value* v) { return "v" + std::to_string(v->id); };
  for (Value* in : inputs_)
    out += "  " + vname(in) + " [shape=box, style=rounded, label=\"" + dot_escape(in->name) + "\\n" +
           in->type.to_string() + "\"];\n";
  for (const auto& n : nodes_) {
    std::string id = "n" + std::to_string(n->id);
    std::string label(op_name(n->op));
    for (Value* o : n->outputs) label += "\\n" + o->type.to_string();
    out += "  " + id + " [shape=box, label=\"" + label + "\"];\n";
    for (Value* in : n->inputs) {
      std::string src = in->producer ? "n" + std::to_string(in->producer->id) : vname(in);
      out += "  " + src + " -> " + id + ";\n";
    }
  }
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const Value* o = outputs_[i];
    std::string src = o->producer ? "n" + std::to_string(o->producer->id) : vname(o);
    out += "  out" + std::to_string(i) + " [shape=box, style=rounded, label=\"output " +
           std::to_string(i) + "\"];\n  " + src + " -> out" + std::to_string(i) + ";\n";
  }
  return out + "}\n";
}

std::string Graph::to_text() const { return print_graph(*this); }

}  // namespace kiln
