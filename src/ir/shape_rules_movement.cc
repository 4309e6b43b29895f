// Shape rules for movement and indexing ops (reshape, permute, slice, concat, gather, ...).
#include <algorithm>
#include <climits>

#include "ir/shape_rules.h"
#include "kiln/error.h"
#include "kiln/graph.h"

namespace kiln {

namespace {
TensorType with_shape(const TensorType& t, Shape s) { return TensorType{t.dtype, std::move(s), t.device}; }
// Slice bounds at or beyond this mean "to the end" (ONNX exports use INT64_MAX).
constexpr int64_t kToEnd = int64_t(1) << 40;
}  // namespace

std::vector<TensorType> rule_reshape(const InferCtx& ctx) {
  const TensorType& in = ctx.inputs[0];
  Shape target = ctx.attrs.get_shape("shape");
  int infer_at = -1;
  SymInt known(1);
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i].is_constant() && target[i].constant() == -1) {
      if (infer_at >= 0) ctx.fail("reshape target " + shape_to_string(target) + " has more than one -1");
      infer_at = int(i);
    } else {
      if (target[i].is_constant() && target[i].constant() < 0)
        ctx.fail("reshape target " + shape_to_string(target) + " has a negative dim");
      known = known * target[i];
    }
  }
  SymInt numel = in.numel();
  if (infer_at >= 0) {
    if (known == SymInt(0)) ctx.fail("reshape cannot infer -1 next to a zero-sized dim");
    SymInt inferred = floordiv(numel, known);
    if (known.is_constant() && numel.is_constant() && numel.constant() % known.constant() != 0)
      ctx.fail(str("cannot reshape ", in.to_string(), " to ", shape_to_string(target),
                   ": ", numel.to_string(), " elements do not divide by ", known.to_string()));
    target[size_t(infer_at)] = inferred;
    known = known * inferred;
  }
  ctx.require_equal(known, numel, str("reshape of ", in.to_string(), " to ",
                                      shape_to_string(target), " must keep the element count"));
  return {with_shape(in, target)};
}

std::vector<TensorType> rule_permute(const InferCtx& ctx) {
  const TensorType& in = ctx.inputs[0];
  const auto& perm = ctx.attrs.get_ints("perm");
  if (int(perm.size()) != in.rank())
    ctx.fail(str("permute needs ", in.rank(), " entries in perm, got ", perm.size()));
  std::vector<bool> seen(perm.size(), false);
  Shape out;
  for (int64_t p : perm) {
    int ax = ctx.normalize_axis(p, in.rank(), "perm entry");
    if (seen[size_t(ax)]) ctx.fail(str("perm repeats axis ", p));
    seen[size_t(ax)] = true;
    out.push_back(in.shape[size_t(ax)]);
  }
  return {with_shape(in, out)};
}

std::vector<TensorType> rule_expand(const InferCtx& ctx) {
  const TensorType& in = ctx.inputs[0];
  Shape target = ctx.attrs.get_shape("shape");
  if (target.size() < in.shape.size())
    ctx.fail(str("expand target ", shape_to_string(target), " has lower rank than the operand"));
  size_t off = target.size() - in.shape.size();
  for (size_t i = 0; i < in.shape.size(); ++i) {
    const SymInt& d = in.shape[i];
    if (d == SymInt(1)) continue;
    target[off + i] = ctx.require_equal(d, target[off + i], str("expand of dim ", i, " to ",
                                                                shape_to_string(target)));
  }
  return {with_shape(in, target)};
}

SymInt slice_length(const InferCtx& ctx, const SymInt& dim, int64_t start, int64_t end, int64_t step) {
  if (step == 0) ctx.fail("slice step cannot be 0");
  if (dim.is_constant()) {
    int64_t D = dim.constant();
    auto norm = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0) v = (v < -kToEnd) ? lo : v + D;
      if (v > kToEnd) v = hi;
      return std::clamp(v, lo, hi);
    };
    if (step > 0) {
      int64_t s = norm(start, 0, D), e = norm(end, 0, D);
      return SymInt(e > s ? (e - s + step - 1) / step : 0);
    }
    int64_t s = norm(start, -1, D - 1), e = norm(end, -1, D - 1);
    return SymInt(s > e ? (s - e + (-step) - 1) / (-step) : 0);
  }
  if (step < 0) ctx.fail("negative slice steps need a static dim, got " + dim.to_string());
  // Symbolic dim: assume the bounds lie inside it (the common shapes: x[a:], x[-k:], x[a:b]).
  SymInt s = start >= 0 ? SymInt(start) : dim + SymInt(start);
  SymInt e = end >= kToEnd ? dim : (end >= 0 ? SymInt(end) : dim + SymInt(end));
  return floordiv(e - s + SymInt(step - 1), SymInt(step));
}

std::vector<TensorType> rule_slice(const InferCtx& ctx) {
  const TensorType& in = ctx.inputs[0];
  const auto& starts = ctx.attrs.get_ints("starts");
  const auto& ends = ctx.attrs.get_ints("ends");
  std::vector<int64_t> axes = ctx.attrs.get_ints("axes");
  std::vector<int64_t> steps = ctx.attrs.get_ints("steps");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    ctx.fail("slice starts, ends, axes and steps must have equal lengths");
  Shape out = in.shape;
  std::vector<bool> seen(size_t(in.rank()), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    int ax = ctx.normalize_axis(axes[i], in.rank(), "slice axis");
    if (seen[size_t(ax)]) ctx.fail(str("slice axis ", axes[i], " repeated"));
    seen[size_t(ax)] = true;
    out[size_t(ax)] = slice_length(ctx, in.shape[size_t(ax)], starts[i], ends[i], steps[i]);
  }
  return {with_shape(in, out)};
}

std::vector<TensorType> rule_concat(const InferCtx& ctx) {
  const TensorType& first = ctx.inputs[0];
  if (first.rank() == 0) ctx.fail("concat needs rank >= 1");
  int axis = ctx.normalize_axis(ctx.attrs.get_int("axis"), first.rank());
  Shape out = first.shape;
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    const TensorType& t = ctx.inputs[i];
    if (t.dtype != first.dtype) ctx.fail(str("concat operand ", i, " has a different dtype"));
    if (t.rank() != first.rank()) ctx.fail(str("concat operand ", i, " has a different rank"));
    for (int d = 0; d < first.rank(); ++d) {
      if (d == axis) continue;
      out[size_t(d)] = ctx.require_equal(out[size_t(d)], t.shape[size_t(d)],
                                         str("concat operand ", i, " dim ", d));
    }
    out[size_t(axis)] = out[size_t(axis)] + t.shape[size_t(axis)];
  }
  return {with_shape(first, out)};
}

std::vector<TensorType> rule_pad(const InferCtx& ctx) {
  const TensorType& in = ctx.inputs[0];
  const auto& pads = ctx.attrs.get_ints("pads");
  if (int(pads.size()) != 2 * in.rank())
    ctx.fail(str("pad needs 2*rank = ", 2 * in.rank(), " pads, got ", pads.size()));
  const std::string& mode = ctx.attrs.get_string("mode");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    ctx.fail("pad mode must be constant, reflect or edge, got \"" + mode + "\"");
  Shape out = in.shape;
  for (int i = 0; i < in.rank(); ++i) {
    out[size_t(i)] = in.shape[size_t(i)] + SymInt(pads[size_t(i)] + pads[size_t(i + in.rank())]);
    if (out[size_t(i)].is_constant() && out[size_t(i)].constant() < 0)
      ctx.fail(str("pad makes dim ", i, " negative"));
    if (mode == "reflect" && in.shape[size_t(i)].is_constant() &&
        (pads[size_t(i)] >= in.shape[size_t(i)].constant() ||
         pads[size_t(i + in.rank())] >= in.shape[size_t(i)].constant()) &&
        (pads[size_t(i)] > 0 || pads[size_t(i + in.rank())] > 0))
      ctx.fail(str("reflect padding of dim ", i, " must be smaller than the dim"));
  }
  return {with_shape(in, out)};
}

std::vector<TensorType> rule_squeeze(const InferCtx& ctx) {
  const TensorType& in = ctx.inputs[0];
  const auto& axes = ctx.attrs.get_ints("axes");
  std::vector<bool> drop(size_t(in.rank()), false);
  if (axes.empty()) {
    for (int i = 0; i < in.rank(); ++i) drop[size_t(i)] = in.shape[size_t(i)] == SymInt(1);
  } else {
    for (int64_t a : axes) {
      int ax = ctx.normalize_axis(a, in.rank(), "squeeze axis");
      ctx.require_equal(in.shape[size_t(ax)], SymInt(1), str("squeeze of axis ", a));
      drop[size_t(ax)] = true;
    }
  }
  Shape out;
  for (int i = 0; i < in.rank(); ++i)
    if (!drop[size_t(i)]) out.push_back(in.shape[size_t(i)]);
  return {with_shape(in, out)};
}

std::vector<TensorType> rule_unsqueeze(const InferCtx& ctx) {
  const TensorType& in = ctx.inputs[0];
  const auto& axes = ctx.attrs.get_ints("axes");
  int out_rank = in.rank() + int(axes.size());
  std::vector<bool> inserted(size_t(out_rank), false);
  for (int64_t a : axes) {
    int ax = ctx.normalize_axis(a, out_rank, "unsqueeze axis");
    if (inserted[size_t(ax)]) ctx.fail(str("unsqueeze axis ", a, " repeated"));
    inserted[size_t(ax)] = true;
  }
  Shape out;
  size_t k = 0;
  for (int i = 0; i < out_rank; ++i) out.push_back(inserted[size_t(i)] ? SymInt(1) : in.shape[k++]);
  return {with_shape(in, out)};
}

std::vector<TensorType> rule_flatten(const InferCtx& ctx) {
  const TensorType& in = ctx.inputs[0];
  if (in.rank() == 0) return {with_shape(in, {SymInt(1)})};
  int s = ctx.normalize_axis(ctx.attrs.get_int("start_dim"), in.rank(), "start_dim");
  int e = ctx.normalize_axis(ctx.attrs.get_int("end_dim"), in.rank(), "end_dim");
  if (s > e) ctx.fail("flatten start_dim is after end_dim");
  Shape out(in.shape.begin(), in.shape.begin() + s);
  SymInt merged(1);
  for (int i = s; i <= e; ++i) merged = merged * in.shape[size_t(i)];
  out.push_back(merged);
  out.insert(out.end(), in.shape.begin() + e + 1, in.shape.end());
  return {with_shape(in, out)};
}

std::vector<TensorType> rule_split(const InferCtx& ctx) {
  const TensorType& in = ctx.inputs[0];
  if (in.rank() == 0) ctx.fail("split needs rank >= 1");
  int axis = ctx.normalize_axis(ctx.attrs.get_int("axis"), in.rank());
  const auto& sizes = ctx.attrs.get_ints("sizes");
  if (sizes.empty()) ctx.fail("split needs at least one size");
  int64_t total = 0;
  std::vector<TensorType> outs;
  for (int64_t s : sizes) {
    if (s < 0) ctx.fail("split sizes must be >= 0");
    total += s;
    Shape sh = in.shape;
    sh[size_t(axis)] = SymInt(s);
    outs.push_back(with_shape(in, sh));
  }
  ctx.require_equal(SymInt(total), in.shape[size_t(axis)], "split sizes must add up to the dim");
  return outs;
}

namespace {
void require_index_dtype(const InferCtx& ctx, int i) {
  DType d = ctx.inputs[size_t(i)].dtype;
  if (d != DType::I32 && d != DType::I64)
    ctx.fail(str("operand ", i, " holds indices and must be i32 or i64, got ", dtype_name(d)));
}
}  // namespace

std::vector<TensorType> rule_gather(const InferCtx& ctx) {
  const TensorType& x = ctx.inputs[0];
  require_index_dtype(ctx, 1);
  if (x.rank() == 0) ctx.fail("gather needs rank >= 1");
  int axis = ctx.normalize_axis(ctx.attrs.get_int("axis"), x.rank());
  Shape out(x.shape.begin(), x.shape.begin() + axis);
  out.insert(out.end(), ctx.inputs[1].shape.begin(), ctx.inputs[1].shape.end());
  out.insert(out.end(), x.shape.begin() + axis + 1, x.shape.end());
  return {with_shape(x, out)};
}

std::vector<TensorType> rule_gather_elements(const InferCtx& ctx) {
  const TensorType& x = ctx.inputs[0];
  require_index_dtype(ctx, 1);
  if (x.rank() == 0) ctx.fail("gather_elements needs rank >= 1");
  if (ctx.inputs[1].rank() != x.rank()) ctx.fail("gather_elements indices must have the data's rank");
  ctx.normalize_axis(ctx.attrs.get_int("axis"), x.rank());
  return {with_shape(x, ctx.inputs[1].shape)};
}

std::vector<TensorType> rule_index_select(const InferCtx& ctx) {
  const TensorType& x = ctx.inputs[0];
  require_index_dtype(ctx, 1);
  if (ctx.inputs[1].rank() != 1) ctx.fail("index_select index must be 1-D");
  if (x.rank() == 0) ctx.fail("index_select needs rank >= 1");
  int axis = ctx.normalize_axis(ctx.attrs.get_int("axis"), x.rank());
  Shape out = x.shape;
  out[size_t(axis)] = ctx.inputs[1].shape[0];
  return {with_shape(x, out)};
}

}  // namespace kiln
