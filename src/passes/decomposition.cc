// Decomposition driver: repeats until no node left is both decomposable and non-native, since a
// decomposition may emit other high-level ops (attention emits softmax).
#include "passes/decomposition.h"

#include "kiln/error.h"
#include "passes/graph_utils.h"

namespace kiln::passes {

namespace {
constexpr int kMaxRounds = 8;
}

bool Decomposition::run(Graph& g) {
  bool changed = false;
  for (int round = 0; round < kMaxRounds; ++round) {
    std::vector<Node*> replaced;
    for (Node* n : g.node_list()) {
      const OpInfo& info = n->info();
      if (info.decompose == nullptr || target_.is_native(n->op) || is_dead(g, n)) continue;
      std::vector<Value*> outs;
      {
        InsertBefore at(g, n);
        outs = info.decompose(g, *n);
      }
      KILN_CHECK(outs.size() == n->outputs.size(), "the decomposition of ", n->describe(),
                 " returned ", outs.size(), " values for ", n->outputs.size(), " results");
      for (size_t i = 0; i < outs.size(); ++i)
        KILN_CHECK(replace_value(g, n->outputs[i], outs[i]), "the decomposition of ",
                   n->describe(), " changed result ", i, "'s type from ",
                   n->outputs[i]->type.to_string(), " to ", outs[i]->type.to_string());
      replaced.push_back(n);
    }
    if (replaced.empty()) break;
    erase_dead_from(g, replaced);
    changed = true;
  }
  return changed;
}

}  // namespace kiln::passes
