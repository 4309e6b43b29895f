// Channels-last depthwise convs and permute sinking (see channels_last.h).
#include "codegen/cuda/channels_last.h"

#include <numeric>
#include <memory>
#include <optional>
#include <unordered_map>

#include "codegen/cuda/library_kernels.h"
#include "kiln/interp.h"
#include "passes/graph_utils.h"

namespace kiln::codegen::cuda {

namespace {

using Perm = std::vector<int64_t>;
const Perm kToNhwc = {0, 2, 3, 1}, kToNchw = {0, 3, 1, 2};

const Perm* perm_of(const Value* v) {
  if (!v->producer || v->producer->op != Op::Permute) return nullptr;
  return &v->producer->attrs.get_ints("perm");
}

bool is_identity(const Perm& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != int64_t(i)) return false;
  return true;
}

Perm inverse(const Perm& p) {
  Perm inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[size_t(p[i])] = int64_t(i);
  return inv;
}

// t (of rank <= perm's, leading 1s implied) permuted: out dim i = in dim perm[i], computed by the
// reference interpreter's permute.
std::optional<HostTensor> permute_constant(const HostTensor& t, const Perm& perm) {
  if (t.rank() > int64_t(perm.size()) || t.dtype() == DType::Str || is_narrow(t.dtype())) return std::nullopt;
  Shape aligned(perm.size() - size_t(t.rank()), SymInt(1));
  for (int64_t d : t.shape()) aligned.push_back(SymInt(d));
  Graph g("permute_constant");
  Value* v = g.add(Op::Reshape, {g.constant(t)}, {{"shape", aligned}});
  g.set_outputs({g.add(Op::Permute, {v}, {{"perm", perm}})});
  return interp::run(g, {})[0];
}

// Elements a graph moves through permutes of computed values (constants fold away).
int64_t permuted_elements(const Graph& g) {
  int64_t total = 0;
  for (const auto& n : g.nodes()) {
    if (n->op != Op::Permute || passes::constant_tensor(n->inputs[0])) continue;
    if (std::optional<std::vector<int64_t>> dims = passes::static_dims(n->outputs[0]->type.shape))
      total += std::accumulate(dims->begin(), dims->end(), int64_t(1), std::multiplies<int64_t>());
  }
  return total;
}

// A depthwise conv2d, NCHW, whose filter the channels-last kernel takes.
bool converts(const Node& n) {
  if (n.op != Op::Conv2d || is_channels_last(n) || !is_depthwise_conv(n) || !is_float(n.outputs[0]->type.dtype))
    return false;
  const Shape& w = n.inputs[1]->type.shape;
  return w[2].is_constant() && w[3].is_constant() && w[2].constant() * w[3].constant() <= kDepthwiseNhwcMaxTaps;
}

bool convert_conv(Graph& g, Node* n) {
  passes::InsertBefore at(g, n);
  std::vector<Value*> ins = n->inputs;
  ins[0] = g.add(Op::Permute, {ins[0]}, {{"perm", kToNhwc}});
  Attrs attrs = n->attrs;
  attrs.set("layout", std::string("NHWC"));
  Value* y = g.add(Op::Conv2d, ins, attrs, n->name);
  return passes::replace_value(g, n->outputs[0], g.add(Op::Permute, {y}, {{"perm", kToNchw}}));
}

// permute(permute(u, p1), p2) == u: uses of the outer permute read u.
bool cancel(Graph& g, Node* n) {
  if (n->op != Op::Permute) return false;
  const Perm* inner = perm_of(n->inputs[0]);
  if (!inner) return false;
  const Perm& outer = n->attrs.get_ints("perm");
  if (inner->size() != outer.size()) return false;
  Perm composed(outer.size());
  for (size_t i = 0; i < outer.size(); ++i) composed[i] = (*inner)[size_t(outer[i])];
  if (!is_identity(composed)) return false;
  return passes::replace_value(g, n->outputs[0], n->inputs[0]->producer->inputs[0]);
}

// Where each node stood when this sweep began (nodes made since are not in it).
using Order = std::unordered_map<const Node*, size_t>;

// An existing permute(v, perm) (a reader of v) that comes before `before`, or null.
Value* permuted_reader(Value* v, const Perm& perm, const Node* before, const Order& order) {
  const auto limit = order.find(before);
  if (limit == order.end()) return nullptr;
  for (const Use& u : v->uses) {
    const auto at = order.find(u.user);
    if (u.user->op == Op::Permute && at != order.end() && at->second < limit->second &&
        u.user->attrs.get_ints("perm") == perm)
      return u.user->outputs[0];
  }
  return nullptr;
}

// e(permute(a, p), permute(b, p), c, u) -> permute(e(a, b, c', u'), p), with c' a constant c
// permuted by p's inverse and u' a permute(u, p's inverse) the graph already computes (the one a
// channels-last conv reads, say), when that removes at least as many permutes as it adds (each
// permuted operand read only here goes away; one permute is added).
bool sink(Graph& g, Node* n, const Order& order) {
  if (!op_info(n->op).has(kElementwise) || n->outputs.size() != 1 || n->inputs.empty()) return false;
  const int64_t rank = n->outputs[0]->type.rank();
  auto permuted = [&](const Value* v) {
    const Perm* q = perm_of(v);
    return q && int64_t(q->size()) == rank && v->type.rank() == rank ? q : nullptr;
  };
  const Perm* p = nullptr;
  for (const Value* v : n->inputs)
    if (const Perm* q = permuted(v)) {
      if (p && *p != *q) return false;
      p = q;
    }
  if (!p) return false;
  const Perm perm = *p, inv = inverse(perm);
  int removed = 0;
  for (Value* v : n->inputs) {
    if (permuted(v)) removed += v->uses.size() == 1 && !g.is_output(v);
    else if (passes::constant_tensor(v) ? v->type.rank() > rank : v->type.rank() != rank || !permuted_reader(v, inv, n, order))
      return false;
  }
  if (removed < 1) return false;
  std::vector<Value*> ins;
  passes::InsertBefore at(g, n);
  for (Value* v : n->inputs) {
    if (permuted(v)) {
      ins.push_back(v->producer->inputs[0]);
    } else if (!passes::constant_tensor(v)) {
      ins.push_back(permuted_reader(v, inv, n, order));
    } else if (const HostTensor& c = *passes::constant_tensor(v); c.rank() == 0) {
      ins.push_back(v);
    } else if (std::optional<HostTensor> moved = permute_constant(c, inv)) {
      ins.push_back(g.constant(std::move(*moved)));
    } else {
      return false;  // nothing built is used: dce collects it
    }
  }
  Value* e = g.add_node(n->op, ins, n->attrs, n->name).at(0);
  return passes::replace_value(g, n->outputs[0], g.add(Op::Permute, {e}, {{"perm", perm}}));
}

// Cancels and sinks to a fixpoint; returns whether anything changed.
bool settle(Graph& g) {
  bool any = false;
  for (bool changed = true; changed;) {
    changed = false;
    const std::vector<Node*> nodes = g.node_list();
    Order order;
    for (size_t i = 0; i < nodes.size(); ++i) order[nodes[i]] = i;
    for (Node* n : nodes) {
      if (passes::is_dead(g, n)) continue;
      if (cancel(g, n) || sink(g, n, order)) changed = any = true;
    }
    std::vector<Node*> all = g.node_list();
    passes::erase_dead_from(g, all);
  }
  return any;
}

bool rewrite(Graph& g) {
  bool converted = false;
  for (Node* n : g.node_list())
    if (converts(*n)) converted |= convert_conv(g, n);
  if (!converted) return false;
  std::vector<Node*> all = g.node_list();
  passes::erase_dead_from(g, all);
  settle(g);
  return true;
}

}  // namespace

bool channels_last_depthwise(Graph& g) {
  bool any = false;
  for (const auto& n : g.nodes()) any = any || converts(*n);
  if (!any) return false;
  // Decide on a copy: keep the rewrite only where fewer elements are permuted after it.
  std::unique_ptr<Graph> trial = g.clone();
  rewrite(*trial);
  if (permuted_elements(*trial) >= permuted_elements(g)) return false;
  return rewrite(g);
}

}  // namespace kiln::codegen::cuda
