// Rules rooted at movement ops (reshape, squeeze/unsqueeze/flatten, permute, expand, slice,
// concat, pad). Movement ops only move elements, so removing or merging them is always exact; the
// rules only have to get the shapes right.
#include <numeric>

#include "passes/rules/rules.h"

namespace kiln::passes::rules {

namespace {

bool is_reshape_like(Op op) {
  return op == Op::Reshape || op == Op::Squeeze || op == Op::Unsqueeze || op == Op::Flatten;
}

bool provably_one(const SymInt& d) { return d.is_constant() && d.constant() == 1; }

// A view op whose result has its operand's shape does nothing: reshape, expand, squeeze...
Value* same_shape_is_identity(RuleContext&, Node& root) {
  return if_same_type(root, root.inputs[0]);
}

// reshape(reshape(x)) -> reshape(x), and the same through squeeze/unsqueeze/flatten: only the
// final shape matters. Squeeze, unsqueeze and flatten become reshapes to their result shape, so
// there is one spelling of "view with a new shape" for CSE and for the lowering.
Value* merge_into_one_reshape(RuleContext& ctx, Node& root) {
  Value* x = root.inputs[0];
  bool through_inner = x->producer != nullptr && is_reshape_like(x->producer->op);
  if (through_inner) x = x->producer->inputs[0];
  if (!through_inner && root.op == Op::Reshape) {
    // A reshape with a -1 or a shape that differs from its result only in spelling is spelled
    // out explicitly; otherwise nothing to do.
    if (root.attrs.get_shape("shape") == result_type(root).shape) return nullptr;
  }
  if (x->type == result_type(root)) return x;
  return if_same_type(root, ctx.g.add(Op::Reshape, {x}, {{"shape", result_type(root).shape}}));
}

bool is_identity_perm(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i)) return false;
  return true;
}

// permute(x, [0, 1, ...]) -> x.
Value* identity_permute(RuleContext&, Node& root) {
  return is_identity_perm(root.attrs.get_ints("perm")) ? if_same_type(root, root.inputs[0]) : nullptr;
}

// permute(permute(x, p1), p2) -> permute(x, p) with p[i] = p1[p2[i]]: result dim i is inner dim
// p2[i], which is x's dim p1[p2[i]]. An identity p removes both.
Value* compose_permutes(RuleContext& ctx, Node& root) {
  Node* inner = producer_of(root.inputs[0], Op::Permute);
  if (inner == nullptr) return nullptr;
  const auto& p1 = inner->attrs.get_ints("perm");
  const auto& p2 = root.attrs.get_ints("perm");
  std::vector<int64_t> p(p2.size());
  for (size_t i = 0; i < p2.size(); ++i) p[i] = p1[size_t(p2[i])];
  Value* x = inner->inputs[0];
  if (is_identity_perm(p)) return if_same_type(root, x);
  return if_same_type(root, ctx.g.add(Op::Permute, {x}, {{"perm", p}}));
}

// A permute that only moves size-1 dims keeps the elements in order: it is a reshape.
Value* permute_of_unit_dims_is_reshape(RuleContext& ctx, Node& root) {
  const Shape& in = root.inputs[0]->type.shape;
  const auto& perm = root.attrs.get_ints("perm");
  int64_t last = -1;
  for (int64_t axis : perm) {
    if (provably_one(in[size_t(axis)])) continue;
    if (axis < last) return nullptr;
    last = axis;
  }
  return if_same_type(root, ctx.g.add(Op::Reshape, {root.inputs[0]}, {{"shape", result_type(root).shape}}));
}

// expand(expand(x, s1), s2) -> expand(x, s2): broadcasting to s1 then to s2 is broadcasting to s2.
Value* merge_expands(RuleContext& ctx, Node& root) {
  Node* inner = producer_of(root.inputs[0], Op::Expand);
  if (inner == nullptr) return nullptr;
  return if_same_type(root, ctx.g.add(Op::Expand, {inner->inputs[0]}, {{"shape", result_type(root).shape}}));
}

// A slice with unit steps whose result has its operand's shape takes everything.
Value* full_slice(RuleContext&, Node& root) {
  for (int64_t step : root.attrs.get_ints("steps"))
    if (step != 1) return nullptr;
  return if_same_type(root, root.inputs[0]);
}

// concat of one operand is that operand.
Value* single_operand_concat(RuleContext&, Node& root) {
  return root.inputs.size() == 1 ? if_same_type(root, root.inputs[0]) : nullptr;
}

// pad by zero everywhere is the operand, whatever the mode.
Value* zero_pad(RuleContext&, Node& root) {
  for (int64_t p : root.attrs.get_ints("pads"))
    if (p != 0) return nullptr;
  return if_same_type(root, root.inputs[0]);
}

}  // namespace

// op(reshape(x)) -> reshape(op(x)) for a unary elementwise op when nothing else reads the reshape.
// Exact: an elementwise op does not care where an element sits. Why: the op then fuses with x's
// producer; ATen's linear is a 2-D addmm whose result is viewed back to 3-D before the activation,
// which left GPT-2's gelu a kernel of its own, outside the matmul's post-ops.
Value* sink_reshape_below_unary(RuleContext& ctx, Node& root) {
  Value* v = root.inputs[0];
  if (v->producer == nullptr || !is_reshape_like(v->producer->op) || v->uses.size() != 1 || ctx.g.is_output(v))
    return nullptr;
  Value* y = ctx.g.add(root.op, {v->producer->inputs[0]}, root.attrs);
  return if_same_type(root, ctx.g.add(Op::Reshape, {y}, {{"shape", result_type(root).shape}}));
}

void add_movement_rules(RuleTable& t) {
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& info = op_info(Op(i));
    if (info.has(kElementwise) && info.max_operands == 1 && info.min_operands == 1 && Op(i) != Op::Cast)
      t[size_t(i)].push_back({"sink_reshape_below_unary", sink_reshape_below_unary});
  }
  for (Op op : {Op::Reshape, Op::Squeeze, Op::Unsqueeze, Op::Flatten})
    t[size_t(op)] = {{"same_shape_is_identity", same_shape_is_identity},
                     {"merge_into_one_reshape", merge_into_one_reshape}};
  t[size_t(Op::Permute)] = {{"identity_permute", identity_permute},
                            {"compose_permutes", compose_permutes},
                            {"permute_of_unit_dims_is_reshape", permute_of_unit_dims_is_reshape}};
  t[size_t(Op::Expand)] = {{"same_shape_is_identity", same_shape_is_identity},
                           {"merge_expands", merge_expands}};
  t[size_t(Op::Slice)] = {{"full_slice", full_slice}};
  t[size_t(Op::Concat)] = {{"single_operand_concat", single_operand_concat}};
  t[size_t(Op::Pad)] = {{"zero_pad", zero_pad}};
}

}  // namespace kiln::passes::rules
