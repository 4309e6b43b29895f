// The rule driver: visits nodes in topological order, tries the rules rooted at each node's op,
// and simplifies a replacement built by a rule right away (a rule's output may match another).
#include "passes/algebraic_simplification.h"

#include <algorithm>

#include "kiln/error.h"
#include "passes/graph_utils.h"
#include "passes/rules/rules.h"

namespace kiln::passes {

namespace {

constexpr int kMaxRewritesPerNode = 8;

// Tries the rules of n's op in order; returns the replacement of n's result or null.
Value* try_rules(Graph& g, const OptimizeOptions& options, Node* n) {
  if (n->outputs.size() != 1) return nullptr;
  rules::RuleContext ctx{g, options};
  for (const rules::Rule& rule : rules::rules_for(n->op)) {
    Value* replacement = nullptr;
    try {
      replacement = rule.apply(ctx, *n);
    } catch (const Error&) {
      replacement = nullptr;  // a rule whose rebuilt node does not type-check does not apply
    }
    if (replacement != nullptr && replacement->type == n->output()->type) return replacement;
  }
  return nullptr;
}

}  // namespace

bool AlgebraicSimplification::run(Graph& g) {
  std::vector<Node*> nodes = g.node_list();
  int first_new_id = 0;
  for (const Node* n : nodes) first_new_id = std::max(first_new_id, n->id + 1);
  std::vector<Node*> replaced;
  for (Node* n : nodes) {
    if (is_dead(g, n)) continue;
    Node* current = n;
    for (int i = 0; i < kMaxRewritesPerNode && current != nullptr; ++i) {
      InsertBefore at(g, current);
      Value* replacement = try_rules(g, options_, current);
      if (replacement == nullptr) break;
      replace_value(g, current->output(), replacement);
      replaced.push_back(current);
      // A node a rule just built has not been visited yet: give its own rules a chance now.
      current = replacement->producer;
      if (current != nullptr && current->id < first_new_id) current = nullptr;
    }
  }
  bool changed = !replaced.empty();  // every chain of rewrites starts at an original node
  // Rules may build nodes and then decline (the result type did not match): collect those too.
  for (Node* n : g.node_list())
    if (n->id >= first_new_id) replaced.push_back(n);
  erase_dead_from(g, replaced);
  return changed;
}

}  // namespace kiln::passes
