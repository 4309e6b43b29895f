// Constant folding through kiln::interp::run_op, one node at a time in topological order, so a
// chain of constant nodes folds in one run.
#include "passes/constant_folding.h"

#include "kiln/error.h"
#include "kiln/interp.h"
#include "passes/graph_utils.h"

namespace kiln::passes {

namespace {

int64_t static_bytes(const TensorType& t) {
  int64_t n = dtype_size(t.dtype);
  for (const SymInt& d : t.shape) n *= d.constant();
  return n;
}

}  // namespace

bool ConstantFolding::run(Graph& g) {
  std::vector<Node*> replaced;
  for (Node* n : g.node_list()) {
    const OpInfo& info = n->info();
    if (n->op == Op::Constant || info.has(kSideEffect) || is_dead(g, n)) continue;
    // Control flow and containers are opaque here (a constant holds a tensor, not a sequence).
    if (info.has(kSubgraph) || info.has(kContainer)) continue;
    std::vector<HostTensor> operands;
    int64_t operand_bytes = 0;
    bool all_constant = true;
    for (Value* in : n->inputs) {
      const HostTensor* t = constant_tensor(in);
      if (t == nullptr) {
        all_constant = false;
        break;
      }
      operands.push_back(*t);
      operand_bytes += int64_t(t->nbytes());
    }
    if (!all_constant) continue;
    int64_t result_bytes = 0;
    bool all_static = true;
    for (Value* out : n->outputs) {
      if (!out->type.is_static()) {
        all_static = false;
        break;
      }
      result_bytes += static_bytes(out->type);
    }
    if (!all_static || result_bytes > max_bytes_ ||
        result_bytes > operand_bytes + max_growth_bytes_)
      continue;
    std::vector<HostTensor> results;
    try {
      results = interp::run_op(n->op, n->attrs, operands);
    } catch (const Error&) {
      continue;  // an op the interpreter cannot evaluate here stays for run time to report
    }
    if (results.size() != n->outputs.size()) continue;
    InsertBefore at(g, n);
    std::vector<Value*> folded;
    bool same_types = true;
    for (size_t i = 0; i < results.size(); ++i) {
      folded.push_back(g.constant(std::move(results[i])));
      same_types &= folded.back()->type == n->outputs[i]->type;
    }
    if (!same_types) {  // e.g. a result placed on another device: leave the node alone
      for (Value* v : folded) g.erase_node(v->producer);
      continue;
    }
    for (size_t i = 0; i < folded.size(); ++i) replace_value(g, n->outputs[i], folded[i]);
    replaced.push_back(n);
  }
  erase_dead_from(g, replaced);
  return !replaced.empty();
}

}  // namespace kiln::passes
