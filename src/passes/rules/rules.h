// Rewrite rules of the algebraic simplifier, grouped by the op at the root of the pattern (one
// file per family: arithmetic.cc, cast.cc, movement.cc, identity.cc). Why: the driver only tries
// the rules of a node's own op, and a reader finds every rule about `reshape` in one place.
//
// Every rule must be exact in IEEE arithmetic (bit-identical results, NaN and -0.0 included)
// unless it checks OptimizeOptions::fast_math. The comment on each rule says why it is exact.
#pragma once

#include <array>
#include <vector>

#include "kiln/graph.h"
#include "kiln/passes.h"

namespace kiln::passes::rules {

struct RuleContext {
  Graph& g;  // new nodes go before the root (the insertion point is set by the driver)
  const OptimizeOptions& options;
};

// Looks at `root`; returns the value that replaces root's (single) result, or null when the rule
// does not apply. The replacement must have root's type; it may be a new node.
using RuleFn = Value* (*)(RuleContext& ctx, Node& root);

struct Rule {
  const char* name;
  RuleFn apply;
};

using RuleTable = std::array<std::vector<Rule>, kNumOps>;

// The rules whose pattern is rooted at `op`.
const std::vector<Rule>& rules_for(Op op);

// Each family file fills in its roots.
void add_arithmetic_rules(RuleTable& table);
void add_cast_rules(RuleTable& table);
void add_movement_rules(RuleTable& table);
void add_identity_rules(RuleTable& table);

// ---- helpers for rule bodies ----
// The node producing v when it applies `op`; null otherwise.
Node* producer_of(const Value* v, Op op);
// The result type of root, which any replacement must have.
inline const TensorType& result_type(const Node& root) { return root.outputs.at(0)->type; }
// `v` when it can replace root's result as is (same type); null otherwise.
Value* if_same_type(const Node& root, Value* v);
// A zero-filled tensor of root's type (a full node; constant folding may turn it into a constant).
Value* zeros_like_result(RuleContext& ctx, const Node& root);

}  // namespace kiln::passes::rules
