// Rules for ops that are identities in some situation: idempotent unary ops, binary ops of a
// value with itself, selects with equal branches or a constant condition, unbounded clamps and
// reductions over size-1 dims.
#include <cmath>

#include "passes/graph_utils.h"
#include "passes/rules/rules.h"

namespace kiln::passes::rules {

namespace {

// f(f(x)) -> f(x) for relu, abs, floor, ceil, round, sign: applying them twice changes nothing.
Value* idempotent_unary(RuleContext&, Node& root) {
  Node* inner = producer_of(root.inputs[0], root.op);
  return inner ? if_same_type(root, inner->output()) : nullptr;
}

// abs(neg(x)) -> abs(x): abs clears the sign bit neg flipped.
Value* abs_of_neg(RuleContext& ctx, Node& root) {
  Node* inner = producer_of(root.inputs[0], Op::Neg);
  return inner ? if_same_type(root, ctx.g.add(Op::Abs, {inner->inputs[0]})) : nullptr;
}

// max(x, x), min(x, x), and(x, x), or(x, x) -> x (max(NaN, NaN) is that NaN, max(-0, -0) is -0).
Value* same_operands(RuleContext&, Node& root) {
  return root.inputs[0] == root.inputs[1] ? if_same_type(root, root.inputs[0]) : nullptr;
}

// where(c, x, x) -> x; where(true, a, b) -> a; where(false, a, b) -> b (when shapes allow).
Value* trivial_where(RuleContext&, Node& root) {
  if (root.inputs[1] == root.inputs[2]) return if_same_type(root, root.inputs[1]);
  std::optional<double> cond = splat_value(root.inputs[0]);
  if (!cond.has_value()) return nullptr;
  return if_same_type(root, *cond != 0 ? root.inputs[1] : root.inputs[2]);
}

// clamp(x, -inf, inf) -> x: max(x, -inf) and min(x, inf) are x, NaN and -0 included.
Value* unbounded_clamp(RuleContext&, Node& root) {
  double lo = root.attrs.get_float("min"), hi = root.attrs.get_float("max");
  if (!(std::isinf(lo) && lo < 0 && std::isinf(hi) && hi > 0)) return nullptr;
  return if_same_type(root, root.inputs[0]);
}

// reduce_{max,min,prod} over size-1 dims only -> reshape: the one element is the result
// (the interpreter starts max at -inf, prod at 1: max(-inf, x) and 1 * x are x bit for bit).
// reduce_sum/mean are left alone for floats: the interpreter's 0.0 + (-0.0) gives +0.0.
Value* reduce_over_unit_dims(RuleContext& ctx, Node& root) {
  const Shape& in = root.inputs[0]->type.shape;
  if (root.op == Op::ReduceSum && is_float(root.inputs[0]->type.dtype)) return nullptr;
  std::vector<int64_t> axes = root.attrs.get_ints("axes");
  if (axes.empty())
    for (size_t i = 0; i < in.size(); ++i) axes.push_back(int64_t(i));
  for (int64_t a : axes) {
    int64_t axis = a < 0 ? a + int64_t(in.size()) : a;
    if (axis < 0 || axis >= int64_t(in.size())) return nullptr;
    const SymInt& d = in[size_t(axis)];
    if (!d.is_constant() || d.constant() != 1) return nullptr;
  }
  if (root.inputs[0]->type == result_type(root)) return root.inputs[0];
  return if_same_type(root, ctx.g.add(Op::Reshape, {root.inputs[0]}, {{"shape", result_type(root).shape}}));
}

}  // namespace

void add_identity_rules(RuleTable& t) {
  for (Op op : {Op::Relu, Op::Floor, Op::Ceil, Op::Round, Op::Sign})
    t[size_t(op)] = {{"idempotent_unary", idempotent_unary}};
  t[size_t(Op::Abs)] = {{"idempotent_unary", idempotent_unary}, {"abs_of_neg", abs_of_neg}};
  for (Op op : {Op::Maximum, Op::Minimum, Op::And, Op::Or})
    t[size_t(op)] = {{"same_operands", same_operands}};
  t[size_t(Op::Where)] = {{"trivial_where", trivial_where}};
  t[size_t(Op::Clamp)] = {{"unbounded_clamp", unbounded_clamp}};
  for (Op op : {Op::ReduceMax, Op::ReduceMin, Op::ReduceProd, Op::ReduceSum})
    t[size_t(op)] = {{"reduce_over_unit_dims", reduce_over_unit_dims}};
}

}  // namespace kiln::passes::rules
