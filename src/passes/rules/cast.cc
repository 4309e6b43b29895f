// Rules rooted at cast: no-op casts and chains through a type that loses nothing.
#include "passes/rules/rules.h"

namespace kiln::passes::rules {

namespace {

// True when every value of `from` is exactly representable in `to`, so a cast from -> to -> X
// converts the same value as from -> X.
bool is_lossless(DType from, DType to) {
  if (from == to || from == DType::Bool) return true;
  switch (from) {
    case DType::U8:
    case DType::I8:
      // up to 256 in magnitude: exact in bf16 (8 significant bits) and every wider type; u8 is
      // not representable in i8, i8 not in u8.
      return to != DType::Bool && to != DType::U8 && to != DType::I8;
    case DType::I16: return to == DType::I32 || to == DType::I64 || to == DType::F32 || to == DType::F64;
    case DType::I32: return to == DType::I64 || to == DType::F64;
    case DType::F16:
    case DType::BF16: return to == DType::F32 || to == DType::F64;
    case DType::F32: return to == DType::F64;
    default: return false;
  }
}

// cast(x, dtype(x)) -> x.
Value* cast_to_same_dtype(RuleContext&, Node& root) {
  return if_same_type(root, root.inputs[0]);
}

// cast(cast(x, T1), T2) -> cast(x, T2) when x -> T1 is lossless (it changes no value), and
// straight to x when T2 is x's own type. Not done when the inner cast rounds or truncates.
Value* cast_through_lossless(RuleContext& ctx, Node& root) {
  Node* inner = producer_of(root.inputs[0], Op::Cast);
  if (inner == nullptr) return nullptr;
  Value* x = inner->inputs[0];
  if (!is_lossless(x->type.dtype, inner->output()->type.dtype)) return nullptr;
  if (x->type == result_type(root)) return x;
  return if_same_type(root, ctx.g.add(Op::Cast, {x}, {{"dtype", result_type(root).dtype}}));
}

}  // namespace

void add_cast_rules(RuleTable& t) {
  t[size_t(Op::Cast)] = {{"cast_to_same_dtype", cast_to_same_dtype},
                         {"cast_through_lossless", cast_through_lossless}};
}

}  // namespace kiln::passes::rules
