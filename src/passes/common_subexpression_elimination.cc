// CSE by hashing (op, operands, attributes) in topological order. Operands of commutative ops
// are compared as an unordered pair (a+b and b+a are the same IEEE value). Constants compare by
// bytes, so 0.0 and -0.0 stay distinct.
#include "passes/common_subexpression_elimination.h"

#include <functional>
#include <unordered_map>

#include "passes/graph_utils.h"

namespace kiln::passes {

namespace {

size_t mix(size_t seed, size_t v) { return seed ^ (v + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2)); }

size_t hash_attrs(const Attrs& attrs) {
  size_t h = 0;
  for (const auto& [name, value] : attrs.items()) {
    h = mix(h, std::hash<std::string>()(name));
    if (const auto* t = std::get_if<HostTensor>(&value)) {
      // Hash a bounded prefix of the bytes: equality is checked in full anyway.
      size_t n = std::min<size_t>(t->nbytes(), 256);
      h = mix(h, std::hash<std::string_view>()(
                     std::string_view(static_cast<const char*>(t->raw()), n)));
      h = mix(h, t->nbytes());
    } else {
      h = mix(h, std::hash<std::string>()(attr_to_string(value)));
    }
  }
  return h;
}

std::vector<const Value*> operand_key(const Node& n) {
  std::vector<const Value*> ops(n.inputs.begin(), n.inputs.end());
  if (n.info().has(kCommutative) && ops.size() == 2 && ops[1]->id < ops[0]->id)
    std::swap(ops[0], ops[1]);
  return ops;
}

size_t hash_node(const Node& n) {
  size_t h = std::hash<int>()(int(n.op));
  for (const Value* v : operand_key(n)) h = mix(h, std::hash<int>()(v->id));
  return mix(h, hash_attrs(n.attrs));
}

bool same_computation(const Node& a, const Node& b) {
  if (a.op != b.op || a.outputs.size() != b.outputs.size()) return false;
  if (operand_key(a) != operand_key(b) || !(a.attrs == b.attrs)) return false;
  for (size_t i = 0; i < a.outputs.size(); ++i)
    if (a.outputs[i]->type != b.outputs[i]->type) return false;
  return true;
}

}  // namespace

bool CommonSubexpressionElimination::run(Graph& g) {
  std::unordered_multimap<size_t, Node*> seen;
  std::vector<Node*> replaced;
  for (Node* n : g.node_list()) {
    if (n->info().has(kSideEffect)) continue;
    size_t h = hash_node(*n);
    Node* earlier = nullptr;
    auto [lo, hi] = seen.equal_range(h);
    for (auto it = lo; it != hi; ++it)
      if (same_computation(*it->second, *n)) {
        earlier = it->second;
        break;
      }
    if (earlier == nullptr) {
      seen.emplace(h, n);
      continue;
    }
    for (size_t i = 0; i < n->outputs.size(); ++i) replace_value(g, n->outputs[i], earlier->outputs[i]);
    replaced.push_back(n);
  }
  erase_dead_from(g, replaced);
  return !replaced.empty();
}

}  // namespace kiln::passes
