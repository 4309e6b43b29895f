// Shape rules for the selection and sampling ops (sort, argsort, sample; docs/sampling.md).
#include <cmath>

#include "ir/shape_rules.h"
#include "kiln/error.h"
#include "kiln/graph.h"

namespace kiln {

namespace {

void check_sortable(const InferCtx& ctx, const TensorType& x) {
  if (!is_float(x.dtype) && !is_integer(x.dtype)) ctx.fail("sort needs a numeric dtype");
  if (x.rank() == 0) ctx.fail("sort needs rank >= 1");
  ctx.normalize_axis(ctx.attrs.get_int("axis"), x.rank());
}

// A per-row operand of sample: [B] of `dtype`.
void check_row_operand(const InferCtx& ctx, size_t i, const char* name, DType dtype, const SymInt& rows) {
  if (ctx.inputs.size() <= i) return;
  const TensorType& t = ctx.inputs[i];
  if (t.rank() != 1 || t.dtype != dtype)
    ctx.fail(str("sample's ", name, " must be a [B] ", dtype_name(dtype), " tensor (one value per row of logits)"));
  ctx.require_equal(t.shape[0], rows, str("sample's ", name, " length vs the logits' rows"));
}

}  // namespace

std::vector<TensorType> rule_sort(const InferCtx& ctx) {
  const TensorType& x = ctx.inputs[0];
  check_sortable(ctx, x);
  return {x, TensorType{DType::I64, x.shape, x.device}};
}

std::vector<TensorType> rule_argsort(const InferCtx& ctx) {
  const TensorType& x = ctx.inputs[0];
  check_sortable(ctx, x);
  return {TensorType{DType::I64, x.shape, x.device}};
}

std::vector<TensorType> rule_sample(const InferCtx& ctx) {
  const TensorType& logits = ctx.inputs[0];
  if (!is_float(logits.dtype) || logits.rank() != 2) ctx.fail("sample needs floating-point logits [B, V]");
  const SymInt& rows = logits.shape[0];
  check_row_operand(ctx, 1, "seeds", DType::I64, rows);
  check_row_operand(ctx, 2, "steps", DType::I64, rows);
  check_row_operand(ctx, 3, "temperature", DType::F32, rows);
  check_row_operand(ctx, 4, "top_k", DType::I64, rows);
  check_row_operand(ctx, 5, "top_p", DType::F32, rows);
  check_row_operand(ctx, 6, "min_p", DType::F32, rows);
  if (ctx.inputs.size() > 7) {
    const TensorType& ids = ctx.inputs[7];
    if (ids.rank() != 2 || ids.dtype != DType::I64) ctx.fail("sample's penalty_ids must be [B, L] i64 token ids (negative = padding)");
    ctx.require_equal(ids.shape[0], rows, "sample's penalty_ids rows vs the logits' rows");
  }
  const double temperature = ctx.attrs.get_float("temperature"), top_p = ctx.attrs.get_float("top_p"),
               min_p = ctx.attrs.get_float("min_p"), repetition = ctx.attrs.get_float("repetition_penalty");
  if (!(temperature >= 0) || std::isinf(temperature)) ctx.fail(str("sample's temperature must be finite and >= 0 (0 = greedy), got ", temperature));
  if (ctx.attrs.get_int("top_k") < 0) ctx.fail(str("sample's top_k must be >= 0 (0 = off), got ", ctx.attrs.get_int("top_k")));
  if (!(top_p > 0 && top_p <= 1)) ctx.fail(str("sample's top_p must be in (0, 1] (1 = off), got ", top_p));
  if (!(min_p >= 0 && min_p <= 1)) ctx.fail(str("sample's min_p must be in [0, 1] (0 = off), got ", min_p));
  if (!(repetition > 0) || std::isinf(repetition)) ctx.fail(str("sample's repetition_penalty must be finite and > 0 (1 = off), got ", repetition));
  if (!std::isfinite(ctx.attrs.get_float("frequency_penalty")) || !std::isfinite(ctx.attrs.get_float("presence_penalty")))
    ctx.fail("sample's frequency_penalty and presence_penalty must be finite");
  return {TensorType{DType::I64, Shape{rows}, logits.device}};
}

}  // namespace kiln
