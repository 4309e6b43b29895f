// The shrinker (see shrink.h). Graphs are rebuilt rather than edited: a rebuild copies only what
// the kept outputs need, so every candidate is a clean, typed graph with no dead inputs or nodes.
#include "fuzz/shrink.h"

#include <chrono>
#include <map>
#include <set>

#include "kiln/error.h"

namespace kiln::fuzz {

namespace {

// Values replaced while rebuilding: by another value of the graph, or (null) by a fresh input.
using Cuts = std::map<const Value*, const Value*>;

FuzzCase rebuild(const FuzzCase& c, const Cuts& cuts, const std::vector<const Value*>& outputs) {
  const Graph& g = *c.graph;
  std::set<const Value*> live;
  std::vector<const Value*> work(outputs.begin(), outputs.end());
  while (!work.empty()) {
    const Value* v = work.back();
    work.pop_back();
    if (!live.insert(v).second) continue;
    if (auto it = cuts.find(v); it != cuts.end()) {
      if (it->second) work.push_back(it->second);
      continue;
    }
    if (v->producer)
      for (const Value* in : v->producer->inputs) work.push_back(in);
  }
  FuzzCase out;
  out.graph = std::make_unique<Graph>(g.name());
  out.bindings = c.bindings;
  out.input_seed = c.input_seed;
  out.special_rate = c.special_rate;
  out.note = c.note;
  std::map<const Value*, Value*> map;
  for (const Value* in : g.inputs()) {
    if (!live.count(in) || cuts.count(in)) continue;
    map[in] = out.graph->add_input(in->name, in->type);
    if (auto it = c.specs.find(in->name); it != c.specs.end()) out.specs[in->name] = it->second;
  }
  // Fresh inputs for cuts to nothing, named after the value they replace.
  for (const auto& [from, to] : cuts) {
    if (to || !live.count(from)) continue;
    std::string name = str("cut", from->id);
    map[from] = out.graph->add_input(name, from->type);
    InputSpec s;
    if (!is_float(from->type.dtype)) s.lo = -9, s.hi = 9;
    out.specs[name] = s;
  }
  // A value cut to another one reads as that one (whose producer comes earlier: it is an operand).
  auto resolve = [&](const Value* v) {
    auto it = cuts.find(v);
    return map.at(it != cuts.end() && it->second ? it->second : v);
  };
  for (const Node* n : g.node_list()) {
    bool needed = false;
    for (const Value* o : n->outputs) needed |= live.count(o) && !cuts.count(o);
    if (!needed) continue;
    std::vector<Value*> ins;
    for (const Value* in : n->inputs) ins.push_back(resolve(in));
    std::vector<Value*> outs = out.graph->add_node(n->op, ins, n->attrs, n->name);
    for (size_t i = 0; i < outs.size(); ++i) map[n->outputs[i]] = outs[i];
  }
  std::vector<Value*> outs;
  for (const Value* o : outputs) outs.push_back(resolve(o));
  out.graph->set_outputs(outs);
  return out;
}

std::vector<const Value*> outputs_of(const Graph& g) {
  return std::vector<const Value*>(g.outputs().begin(), g.outputs().end());
}

class Shrinker {
 public:
  Shrinker(const FuzzCase& c, const std::function<bool(const FuzzCase&)>& fails, const ShrinkOptions& o)
      : best_(c.clone()), fails_(fails), opt_(o), start_(std::chrono::steady_clock::now()) {}

  FuzzCase run() {
    for (bool progress = true; progress && !out_of_budget();) {
      progress = drop_outputs() | cut_nodes() | drop_specials() | lower_bindings();
    }
    return std::move(best_);
  }

 private:
  bool out_of_budget() const {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    return attempts_ >= opt_.max_attempts || s > opt_.max_seconds;
  }
  // Adopts `candidate` when it still fails.
  bool try_case(FuzzCase candidate) {
    if (out_of_budget()) return false;
    ++attempts_;
    if (!fails_(candidate)) return false;
    best_ = std::move(candidate);
    return true;
  }
  bool try_rebuild(const Cuts& cuts, const std::vector<const Value*>& outputs) {
    FuzzCase candidate;
    try {
      candidate = rebuild(best_, cuts, outputs);
    } catch (const Error&) {
      return false;  // e.g. an op refused a replacement's type
    }
    if (candidate.graph->num_nodes() == 0) return false;  // nothing left to compile
    return try_case(std::move(candidate));
  }

  bool drop_outputs() {
    bool any = false;
    for (size_t i = 0; best_.graph->outputs().size() > 1 && i < best_.graph->outputs().size();) {
      auto outs = outputs_of(*best_.graph);
      outs.erase(outs.begin() + long(i));
      if (try_rebuild({}, outs)) any = true; else ++i;
    }
    return any;
  }

  // From the outputs up: a node's result replaced by one of its operands of the same type, else by
  // a fresh input. Node lists are re-read after every success (the graph was rebuilt).
  bool cut_nodes() {
    bool any = false;
    for (bool again = true; again && !out_of_budget();) {
      again = false;
      std::vector<Node*> nodes = best_.graph->node_list();
      for (auto it = nodes.rbegin(); it != nodes.rend() && !again; ++it) {
        for (const Value* out : (*it)->outputs) {
          std::vector<const Value*> replacements;
          for (const Value* in : (*it)->inputs)
            if (in->type == out->type) replacements.push_back(in);
          replacements.push_back(nullptr);
          for (const Value* r : replacements)
            if (try_rebuild({{out, r}}, outputs_of(*best_.graph))) {
              again = any = true;
              break;
            }
          if (again) break;
        }
      }
    }
    return any;
  }

  bool drop_specials() {
    bool any = false;
    for (const auto& [name, spec] : std::map<std::string, InputSpec>(best_.specs)) {  // best_ changes
      if (!spec.specials) continue;
      FuzzCase candidate = best_.clone();
      candidate.specs[name].specials = false;
      if (try_case(std::move(candidate))) any = true;
    }
    return any;
  }

  bool lower_bindings() {
    bool any = false;
    for (const auto& [name, v] : std::map<std::string, int64_t>(best_.bindings))
      for (int64_t smaller = 0; smaller < v; ++smaller) {
        FuzzCase candidate = best_.clone();
        candidate.bindings[name] = smaller;
        if (try_case(std::move(candidate))) {
          any = true;
          break;
        }
      }
    return any;
  }

  FuzzCase best_;
  const std::function<bool(const FuzzCase&)>& fails_;
  ShrinkOptions opt_;
  std::chrono::steady_clock::time_point start_;
  int attempts_ = 0;
};

}  // namespace

FuzzCase shrink(const FuzzCase& c, const std::function<bool(const FuzzCase&)>& still_fails,
                const ShrinkOptions& options) {
  return Shrinker(c, still_fails, options).run();
}

}  // namespace kiln::fuzz
