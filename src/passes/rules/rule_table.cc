// The rule table and the helpers rule bodies share.
#include "passes/rules/rules.h"

namespace kiln::passes::rules {

const std::vector<Rule>& rules_for(Op op) {
  static const RuleTable table = [] {
    RuleTable t;
    add_arithmetic_rules(t);
    add_cast_rules(t);
    add_identity_rules(t);
    add_movement_rules(t);  // last: it appends to the unary ops' lists the others assign
    return t;
  }();
  return table[size_t(op)];
}

Node* producer_of(const Value* v, Op op) {
  return v->producer != nullptr && v->producer->op == op && v->producer->outputs.size() == 1
             ? v->producer
             : nullptr;
}

Value* if_same_type(const Node& root, Value* v) {
  return v->type == result_type(root) ? v : nullptr;
}

Value* zeros_like_result(RuleContext& ctx, const Node& root) {
  const TensorType& t = result_type(root);
  if (t.device != Device::CPU) return nullptr;
  return ctx.g.add(Op::Full, {}, {{"shape", t.shape}, {"value", 0.0}, {"dtype", t.dtype}});
}

}  // namespace kiln::passes::rules
