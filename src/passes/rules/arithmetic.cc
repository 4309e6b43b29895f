// Rules rooted at add, sub, mul, div, neg and pow. Only identities that hold bit for bit in IEEE
// arithmetic run by default; the ones that do not (x + 0.0, x - x, reassociation) need fast_math.
#include <cmath>

#include "passes/graph_utils.h"
#include "passes/rules/rules.h"

namespace kiln::passes::rules {

namespace {

bool is_float_op(const Node& root) { return is_float(result_type(root).dtype); }

// The operand of a commutative root that is not the splat `x`, when one operand is that splat.
Value* other_than_splat(const Node& root, double x) {
  if (is_splat_of(root.inputs[1], x)) return root.inputs[0];
  if (is_splat_of(root.inputs[0], x)) return root.inputs[1];
  return nullptr;
}

// x + (-0.0) -> x: exact for every x, -0.0 included (-0 + -0 = -0). x + 0.0 is NOT exact:
// -0.0 + 0.0 = +0.0; it is rewritten only with fast_math. Integers: x + 0 -> x.
Value* add_zero(RuleContext& ctx, Node& root) {
  if (!is_float_op(root)) {
    Value* x = other_than_splat(root, 0.0);
    return x ? if_same_type(root, x) : nullptr;
  }
  if (Value* x = other_than_splat(root, -0.0)) return if_same_type(root, x);
  if (ctx.options.fast_math)
    if (Value* x = other_than_splat(root, 0.0)) return if_same_type(root, x);
  return nullptr;
}

// x - 0.0 -> x: exact (-0 - 0 = -0). x - (-0.0) is x + 0.0, not exact: fast_math only.
Value* sub_zero(RuleContext& ctx, Node& root) {
  if (is_splat_of(root.inputs[1], 0.0)) return if_same_type(root, root.inputs[0]);
  if (ctx.options.fast_math && is_float_op(root) && is_splat_of(root.inputs[1], -0.0))
    return if_same_type(root, root.inputs[0]);
  return nullptr;
}

// x - x -> 0: exact for integers; for floats inf - inf and NaN - NaN are NaN, so fast_math only.
Value* sub_self(RuleContext& ctx, Node& root) {
  if (root.inputs[0] != root.inputs[1]) return nullptr;
  if (is_float_op(root) && !ctx.options.fast_math) return nullptr;
  return zeros_like_result(ctx, root);
}

// x * 1 -> x: exact for every x (NaN stays NaN, -0 stays -0).
Value* mul_one(RuleContext&, Node& root) {
  Value* x = other_than_splat(root, 1.0);
  return x ? if_same_type(root, x) : nullptr;
}

// x / 1 -> x: exact, as for x * 1; integer division by 1 too.
Value* div_one(RuleContext&, Node& root) {
  return is_splat_of(root.inputs[1], 1.0) ? if_same_type(root, root.inputs[0]) : nullptr;
}

// -(-x) -> x: negation only flips the sign bit.
Value* neg_neg(RuleContext&, Node& root) {
  Node* inner = producer_of(root.inputs[0], Op::Neg);
  return inner ? if_same_type(root, inner->inputs[0]) : nullptr;
}

// x ^ 1 -> x: pow(x, 1) is x for every x, NaN included (C99 F.9.4.4).
Value* pow_one(RuleContext&, Node& root) {
  return is_splat_of(root.inputs[1], 1.0) ? if_same_type(root, root.inputs[0]) : nullptr;
}

// (x op c1) op c2 -> x op (c1 op c2) for op in {add, mul} with constants c1, c2: reassociation
// changes float rounding, so fast_math only (for integers too, to keep one simple rule). The new c1 op c2 node is left to constant folding.
Value* reassociate_constants(RuleContext& ctx, Node& root) {
  if (!ctx.options.fast_math) return nullptr;
  Value* c2 = root.inputs[1];
  Node* inner = producer_of(root.inputs[0], root.op);
  if (inner == nullptr || !constant_tensor(c2)) return nullptr;
  Value* c1 = inner->inputs[1];
  if (!constant_tensor(c1)) return nullptr;
  Value* folded = ctx.g.add(root.op, {c1, c2});
  return if_same_type(root, ctx.g.add(root.op, {inner->inputs[0], folded}));
}

}  // namespace

void add_arithmetic_rules(RuleTable& t) {
  t[size_t(Op::Add)] = {{"add_zero", add_zero}, {"reassociate_constants", reassociate_constants}};
  t[size_t(Op::Sub)] = {{"sub_zero", sub_zero}, {"sub_self", sub_self}};
  t[size_t(Op::Mul)] = {{"mul_one", mul_one}, {"reassociate_constants", reassociate_constants}};
  t[size_t(Op::Div)] = {{"div_one", div_one}};
  t[size_t(Op::Neg)] = {{"neg_neg", neg_neg}};
  t[size_t(Op::Pow)] = {{"pow_one", pow_one}};
}

}  // namespace kiln::passes::rules
