// Cutting a graph at its host nodes (host_segments.h).
#include "runtime/host_segments.h"

#include <map>
#include <set>

#include "kiln/error.h"
#include "kiln/target.h"

namespace kiln::runtime {

bool runs_on_host(const Node& n) {
  if (n.info().has(kSubgraph) || n.info().has(kContainer) || n.has_string_values()) return true;
  // Ops the CUDA table runs on the host that read data (sort, sample: no GPU kernel yet); sources,
  // constants and shape_of are Host there too, but are computed inside a segment's binding.
  const OpInfo& info = n.info();
  if (op_support(TargetKind::Cuda, n.op).decision == OpDecision::Host && !info.has(kSource) && !info.has(kShapeOnly))
    return true;
  auto host_only = [](const Value* v) { return !v->type.is_tensor() || is_narrow(v->type.dtype); };
  for (const Value* v : n.inputs)
    if (host_only(v)) return true;
  for (const Value* v : n.outputs)
    if (host_only(v)) return true;
  return false;
}

bool has_host_nodes(const Graph& g) {
  for (const auto& n : g.nodes())
    if (runs_on_host(*n)) return true;
  for (const Value* v : g.inputs())
    if (!v->type.is_tensor() || is_narrow(v->type.dtype)) return true;
  return false;
}

namespace {

// The value's type with every derived dim replaced by a fresh symbol.
TensorType input_type(const Value* v, int& fresh) {
  TensorType t = v->type;
  for (SymInt& d : t.shape) {
    if (d.is_constant()) continue;
    std::set<std::string> names;
    d.collect_symbols(names);
    if (names.size() == 1 && d == SymInt::symbol(*names.begin())) continue;
    d = SymInt::symbol(str("kiln_cut", fresh++));
  }
  return t;
}

bool is_constant_node(const Node* n) { return n && n->op == Op::Constant; }

}  // namespace

std::vector<GraphPiece> split_at_host_nodes(const Graph& g) {
  // Each non-constant node's piece: host nodes alone, runs of device nodes between them together.
  std::vector<std::vector<const Node*>> runs;
  std::vector<const Node*> hosts;  // per piece: the host node or null
  std::map<const Node*, size_t> piece_of;
  for (const Node* n : g.node_list()) {
    if (is_constant_node(n)) continue;
    if (runs_on_host(*n)) {
      piece_of[n] = runs.size();
      runs.push_back({n});
      hosts.push_back(n);
      continue;
    }
    if (runs.empty() || hosts.back() != nullptr) {
      runs.emplace_back();
      hosts.push_back(nullptr);
    }
    piece_of[n] = runs.size() - 1;
    runs.back().push_back(n);
  }
  // Which pieces read each value (graph outputs: read after the last piece).
  std::map<const Value*, std::set<size_t>> readers;
  for (const Node* n : g.node_list())
    if (!is_constant_node(n))
      for (const Value* v : n->inputs) readers[v].insert(piece_of.at(n));
  std::set<const Value*> graph_outputs(g.outputs().begin(), g.outputs().end());

  std::vector<GraphPiece> pieces;
  int fresh = 0;
  for (size_t p = 0; p < runs.size(); ++p) {
    GraphPiece piece;
    if (hosts[p]) {
      piece.host = hosts[p];
      pieces.push_back(std::move(piece));
      continue;
    }
    auto seg = std::make_unique<Graph>(str(g.name(), "_segment", p));
    std::map<const Value*, Value*> mapped;
    std::set<const Node*> members(runs[p].begin(), runs[p].end());
    auto operand = [&](const Value* v) -> Value* {
      auto it = mapped.find(v);
      if (it != mapped.end()) return it->second;
      Value* m;
      if (is_constant_node(v->producer)) {
        m = seg->constant(v->producer->attrs.get_tensor("value"));
      } else {
        m = seg->add_input(v->name.empty() ? str("v", v->id) : v->name, input_type(v, fresh));
        piece.inputs.push_back(v);
      }
      return mapped[v] = m;
    };
    for (const Node* n : runs[p]) {
      std::vector<Value*> in;
      for (const Value* v : n->inputs) in.push_back(operand(v));
      std::vector<Value*> out = seg->add_node(n->op, in, n->attrs, n->name);
      for (size_t i = 0; i < out.size(); ++i) mapped[n->outputs[i]] = out[i];
    }
    std::vector<Value*> outs;
    for (const Node* n : runs[p])
      for (const Value* v : n->outputs) {
        bool read_later = graph_outputs.count(v) != 0;
        for (size_t r : readers[v]) read_later |= r != p;
        if (!read_later) continue;
        piece.outputs.push_back(v);
        outs.push_back(mapped.at(v));
      }
    if (outs.empty()) continue;  // nothing it computes is read: dead
    seg->set_outputs(outs);
    piece.segment = std::move(seg);
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

}  // namespace kiln::runtime
