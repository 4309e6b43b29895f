// Decompositions of high-level ops into primitives (ops whose ops.def row has no decomposition).
// Why: the scheduler and code generators only need to understand primitives; each function here
// rebuilds one high-level node at the graph's insertion point from primitives and scalar constants.
//
// Symbolic dims: element counts (1/N in means, 1/sqrt(D) in attention) use a scalar constant when
// the dims are static and otherwise are computed at run time from shape_of + gather + reduce_prod
// + cast; the causal mask of attention is a constant when Tq and Tk are static and is otherwise
// built from arange and a comparison. Nothing here requires static shapes.
#include "ir/decompositions.h"

#include <cmath>
#include <limits>

#include "kiln/error.h"

namespace kiln {

namespace {

Value* mul(Graph& g, Value* a, Value* b) { return g.add(Op::Mul, {a, b}); }
Value* add(Graph& g, Value* a, Value* b) { return g.add(Op::Add, {a, b}); }
Value* sub(Graph& g, Value* a, Value* b) { return g.add(Op::Sub, {a, b}); }
Value* scalar_like(Graph& g, Value* x, double v) { return g.scalar(x->type.dtype, v); }

Attrs reduce_attrs(const std::vector<int64_t>& axes, bool keepdim) {
  return Attrs{{"axes", axes}, {"keepdim", int64_t(keepdim ? 1 : 0)}};
}

// The axes a reduction node reduces, normalised (empty attribute = every axis).
std::vector<int64_t> reduced_axes_of(const Node& n, int rank) {
  std::vector<int64_t> axes;
  const auto& given = n.attrs.get_ints("axes");
  if (given.empty()) {
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  } else {
    for (int64_t a : given) axes.push_back(a < 0 ? a + rank : a);
  }
  return axes;
}

std::vector<int64_t> axes_from(int first, int rank) {
  std::vector<int64_t> axes;
  for (int i = first; i < rank; ++i) axes.push_back(i);
  return axes;
}

// N = product of x's dims at `axes`, computed from shape_of at run time (an i64 scalar).
Value* runtime_count(Graph& g, Value* x, const std::vector<int64_t>& axes) {
  Value* dims = g.add(Op::ShapeOf, {x});
  HostTensor which = HostTensor::empty(DType::I64, {int64_t(axes.size())});
  for (size_t i = 0; i < axes.size(); ++i) which.set_i64(int64_t(i), axes[i]);
  Value* picked = g.add(Op::Gather, {dims, g.constant(which)}, {{"axis", int64_t(0)}});
  return g.add(Op::ReduceProd, {picked}, reduce_attrs({}, false));
}

SymInt count_at(const Value* x, const std::vector<int64_t>& axes) {
  SymInt count(1);
  for (int64_t a : axes) count = count * x->type.shape[size_t(a)];
  return count;
}

// A scalar of x's dtype holding f(N). Static N folds into a constant (rounded once); symbolic N is
// computed at run time (in f32 for the 16-bit floats, so that large counts do not overflow f16
// before f is applied).
template <typename Fn>
Value* function_of_count(Graph& g, Value* x, const std::vector<int64_t>& axes, Op unary_op, Fn fn) {
  SymInt count = count_at(x, axes);
  DType dt = x->type.dtype;
  if (count.is_constant()) return g.scalar(dt, fn(double(count.constant())));
  DType compute = dt == DType::F64 ? DType::F64 : DType::F32;
  Value* f = g.add(unary_op, {g.add(Op::Cast, {runtime_count(g, x, axes)}, {{"dtype", compute}})});
  return compute == dt ? f : g.add(Op::Cast, {f}, {{"dtype", dt}});
}

Value* reciprocal_count(Graph& g, Value* x, const std::vector<int64_t>& axes) {
  return function_of_count(g, x, axes, Op::Reciprocal, [](double n) { return 1.0 / n; });
}

Value* mean_over(Graph& g, Value* x, const std::vector<int64_t>& axes, bool keepdim) {
  Value* sum = g.add(Op::ReduceSum, {x}, reduce_attrs(axes, keepdim));
  DType dt = x->type.dtype;
  // sum * (1/N) with 1/N rounded to the dtype is off by up to half an ulp of 1/N in every mean —
  // 2^-9 in bf16, 3e-8 in f32 — so a layer norm of a constant row is not 0. A static N the dtype
  // holds exactly (every N below 2^24 in f32, 256 in bf16, 2048 in f16, and most model widths)
  // divides instead, once per row, in float inside the kernels. Otherwise (f16 has no 70001;
  // symbolic N) the reciprocal, computed in f32 and rounded once.
  SymInt count = count_at(x, axes);
  if (count.is_constant()) {
    HostTensor n = HostTensor::scalar(dt, double(count.constant()));
    if (n.get_f64(0) == double(count.constant())) return g.add(Op::Div, {sum, g.constant(n)});
  }
  return mul(g, sum, reciprocal_count(g, x, axes));
}

// exp(x - max) / sum(exp(x - max)) along one axis, or its log form.
Value* softmax_of(Graph& g, Value* x, int64_t axis, bool log_form) {
  Attrs along = reduce_attrs({axis}, true);
  Value* shifted = sub(g, x, g.add(Op::ReduceMax, {x}, along));
  Value* exps = g.add(Op::Exp, {shifted});
  Value* sum = g.add(Op::ReduceSum, {exps}, along);
  if (log_form) return sub(g, shifted, g.add(Op::Log, {sum}));
  return g.add(Op::Div, {exps, sum});
}

int normalized_axis(const Node& n, int rank) {
  int64_t axis = n.attrs.get_int("axis");
  return int(axis < 0 ? axis + rank : axis);
}

// Causal keep-mask [Tq, Tk]: key j is visible from query i when j <= i + (Tk - Tq).
Value* causal_keep_mask(Graph& g, const SymInt& Tq, const SymInt& Tk, Value* q, Value* k) {
  if (Tq.is_constant() && Tk.is_constant()) {
    int64_t tq = Tq.constant(), tk = Tk.constant();
    HostTensor keep = HostTensor::empty(DType::Bool, {tq, tk});
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t j = 0; j < tk; ++j) keep.set_i64(i * tk + j, j <= i + (tk - tq));
    return g.constant(keep);
  }
  // Symbolic lengths: rows = arange(Tq) + (Tk - Tq) as [Tq, 1], cols = arange(Tk) as [1, Tk].
  auto length_of = [&](Value* t) {
    Value* dims = g.add(Op::ShapeOf, {t});
    HostTensor which = HostTensor::scalar(DType::I64, double(t->type.rank() - 2));
    return g.add(Op::Gather, {dims, g.constant(which)}, {{"axis", int64_t(0)}});
  };
  Value* offset = sub(g, length_of(k), length_of(q));
  Value* rows = g.add(Op::Arange, {}, {{"size", Shape{Tq}}, {"dtype", DType::I64}});
  rows = g.add(Op::Reshape, {add(g, rows, offset)}, {{"shape", Shape{Tq, 1}}});
  Value* cols = g.add(Op::Arange, {}, {{"size", Shape{Tk}}, {"dtype", DType::I64}});
  cols = g.add(Op::Reshape, {cols}, {{"shape", Shape{1, Tk}}});
  return g.add(Op::Le, {cols, rows});
}

}  // namespace

std::vector<Value*> decompose_gelu(Graph& g, const Node& n) {
  Value* x = n.inputs[0];
  if (n.attrs.get_string("approximate") == "tanh") {
    // 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): the same function
    // without 1 + tanh(u) cancelling to 0 for large negative x.
    Value* cube = mul(g, mul(g, x, x), x);
    Value* poly = add(g, x, mul(g, cube, scalar_like(g, x, 0.044715)));
    Value* two_u = mul(g, poly, scalar_like(g, x, 1.5957691216057308 /* 2 sqrt(2/pi) */));
    return {mul(g, x, g.add(Op::Sigmoid, {two_u}))};
  }
  Value* half_x = mul(g, x, scalar_like(g, x, 0.5));
  Value* inner = g.add(Op::Erf, {mul(g, x, scalar_like(g, x, 0.7071067811865476 /* 1/sqrt(2) */))});
  return {mul(g, half_x, add(g, inner, scalar_like(g, x, 1.0)))};
}

std::vector<Value*> decompose_silu(Graph& g, const Node& n) {
  Value* x = n.inputs[0];
  return {mul(g, x, g.add(Op::Sigmoid, {x}))};
}

std::vector<Value*> decompose_reduce_mean(Graph& g, const Node& n) {
  Value* x = n.inputs[0];
  return {mean_over(g, x, reduced_axes_of(n, x->type.rank()), n.attrs.get_int("keepdim") != 0)};
}

// squeeze, unsqueeze and flatten only relabel dims: a reshape to the node's (possibly symbolic)
// output shape.
std::vector<Value*> decompose_to_reshape(Graph& g, const Node& n) {
  return {g.add(Op::Reshape, {n.inputs[0]}, {{"shape", n.output()->type.shape}})};
}

std::vector<Value*> decompose_index_select(Graph& g, const Node& n) {
  return {g.add(Op::Gather, {n.inputs[0], n.inputs[1]}, {{"axis", n.attrs.get_int("axis")}})};
}

std::vector<Value*> decompose_global_avg_pool(Graph& g, const Node& n) {
  Value* x = n.inputs[0];
  return {mean_over(g, x, axes_from(2, x->type.rank()), true)};
}

std::vector<Value*> decompose_softmax(Graph& g, const Node& n) {
  Value* x = n.inputs[0];
  return {softmax_of(g, x, normalized_axis(n, x->type.rank()), false)};
}

std::vector<Value*> decompose_log_softmax(Graph& g, const Node& n) {
  Value* x = n.inputs[0];
  return {softmax_of(g, x, normalized_axis(n, x->type.rank()), true)};
}

// (x - mean) * rsqrt(mean((x - mean)^2) + eps) * weight + bias over dims axis..
std::vector<Value*> decompose_layer_norm(Graph& g, const Node& n) {
  Value* x = n.inputs[0];
  std::vector<int64_t> axes = axes_from(normalized_axis(n, x->type.rank()), x->type.rank());
  Value* centered = sub(g, x, mean_over(g, x, axes, true));
  Value* var = mean_over(g, mul(g, centered, centered), axes, true);
  Value* inv_std = g.add(Op::Rsqrt, {add(g, var, scalar_like(g, x, n.attrs.get_float("eps")))});
  Value* y = mul(g, centered, inv_std);
  if (n.inputs.size() > 1) y = mul(g, y, n.inputs[1]);
  if (n.inputs.size() > 2) y = add(g, y, n.inputs[2]);
  return {y};
}

// x * rsqrt(mean(x^2) + eps) * weight over dims axis..
std::vector<Value*> decompose_rms_norm(Graph& g, const Node& n) {
  Value* x = n.inputs[0];
  std::vector<int64_t> axes = axes_from(normalized_axis(n, x->type.rank()), x->type.rank());
  Value* mean_square = mean_over(g, mul(g, x, x), axes, true);
  Value* inv_rms = g.add(Op::Rsqrt, {add(g, mean_square, scalar_like(g, x, n.attrs.get_float("eps")))});
  Value* y = mul(g, x, inv_rms);
  if (n.inputs.size() > 1) y = mul(g, y, n.inputs[1]);
  return {y};
}

// (x - mean) * (scale * rsqrt(var + eps)) + bias, with the [C] parameters reshaped to [C, 1, ...]
// so that they broadcast along dim 1.
std::vector<Value*> decompose_batch_norm(Graph& g, const Node& n) {
  Value* x = n.inputs[0];
  Value *scale = n.inputs[1], *bias = n.inputs[2], *mean = n.inputs[3], *var = n.inputs[4];
  auto channel_column = [&](Value* v) {
    Shape per_channel = {v->type.shape[0]};
    for (int i = 2; i < x->type.rank(); ++i) per_channel.push_back(SymInt(1));
    return g.add(Op::Reshape, {v}, {{"shape", per_channel}});
  };
  Value* inv_std = g.add(Op::Rsqrt, {add(g, var, scalar_like(g, x, n.attrs.get_float("eps")))});
  Value* factor = channel_column(mul(g, scale, inv_std));
  Value* centered = sub(g, x, channel_column(mean));
  return {add(g, mul(g, centered, factor), channel_column(bias))};
}

// softmax(q k^T * scale + mask) v, where a bool mask or the causal rule replaces masked scores by
// -inf (a fully masked row is then NaN, as in the reference kernel).
std::vector<Value*> decompose_attention(Graph& g, const Node& n) {
  Value *q = n.inputs[0], *k = n.inputs[1], *v = n.inputs[2];
  Value* mask = n.inputs.size() > 3 ? n.inputs[3] : nullptr;
  int rank = q->type.rank();
  std::vector<int64_t> swap_last_two = axes_from(0, rank);
  std::swap(swap_last_two[size_t(rank - 2)], swap_last_two[size_t(rank - 1)]);
  Value* scores = g.add(Op::MatMul, {q, g.add(Op::Permute, {k}, {{"perm", swap_last_two}})});

  double scale = n.attrs.get_float("scale");
  Value* scale_value = scale != 0 ? scalar_like(g, q, scale)
                                  : function_of_count(g, q, {rank - 1}, Op::Rsqrt,
                                                      [](double d) { return 1.0 / std::sqrt(d); });
  scores = mul(g, scores, scale_value);

  Value* minus_inf = scalar_like(g, q, -std::numeric_limits<double>::infinity());
  if (mask && mask->type.dtype == DType::Bool) scores = g.add(Op::Where, {mask, scores, minus_inf});
  else if (mask) scores = add(g, scores, mask);
  if (n.attrs.get_int("causal") != 0) {
    const SymInt& Tq = q->type.shape[size_t(rank - 2)];
    const SymInt& Tk = k->type.shape[size_t(rank - 2)];
    scores = g.add(Op::Where, {causal_keep_mask(g, Tq, Tk, q, k), scores, minus_inf});
  }
  Value* weights = softmax_of(g, scores, rank - 1, false);
  if (n.attrs.get_int("zero_nan_rows") != 0)  // a NaN row of the softmax weighs every value by 0
    weights = g.add(Op::Where, {g.add(Op::IsNan, {weights}), scalar_like(g, q, 0.0), weights});
  Value* out = g.add(Op::MatMul, {weights, v});
  if (n.attrs.get_int("heads_last") != 0) out = g.add(Op::Permute, {out}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  return {out};
}

}  // namespace kiln
