// Dead-code elimination: one walk from the last node to the first, so a node whose readers were
// all erased is itself seen (and erased) later in the same walk.
#include "passes/dead_code_elimination.h"

#include "passes/graph_utils.h"

namespace kiln::passes {

bool DeadCodeElimination::run(Graph& g) {
  std::vector<Node*> nodes = g.node_list();
  bool changed = false;
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    if (!is_dead(g, *it)) continue;
    g.erase_node(*it);
    changed = true;
  }
  return changed;
}

}  // namespace kiln::passes
