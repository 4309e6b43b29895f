// ONNX indexing ops decomposed into Kiln primitives: GatherND, ScatterND, ScatterElements/Scatter,
// MaxUnpool, Compress, ReverseSequence, CenterCropPad, TensorScatter and Pad's wrap mode. Why: Kiln has gather
// but no scatter op; a scatter is written here as a comparison of linear indices against every
// destination row (an [updates x rows] mask), which is exact (duplicates: last write wins, or the
// reduction) and cheap for the small index sets these ops see, at O(updates * rows) cost.
#include <algorithm>
#include <limits>

#include "frontend/onnx/build_helpers.h"

namespace kiln::onnx_import {

namespace {

// Negative indices count from the end of a dim of size n: idx < 0 ? idx + n : idx (i64).
Value* wrap_negative(NodeCtx& c, Value* idx, Value* n) {
  idx = c.cast(idx, DType::I64);
  Value* neg = c.emit(Op::Lt, {idx, scalar_of(c, DType::I64, 0)});
  return c.emit(Op::Where, {neg, c.emit(Op::Add, {idx, n}), idx});
}

// out = data [M, S] with rows lin [U] (i64 in [0, M)) replaced by / combined with upd [U, S].
Value* scatter_rows(NodeCtx& c, Value* data, Value* lin, Value* upd, const std::string& reduction) {
  int64_t M = static_dim(c, data, 0, "scatter data"), S = static_dim(c, data, 1, "scatter data");
  int64_t U = static_dim(c, lin, 0, "scatter indices");
  DType dt = data->type.dtype;
  Value* rows = c.reshape(c.emit(Op::Arange, {}, {{"size", Shape{SymInt(M)}}, {"dtype", DType::I64}}), {1, M});
  Value* mask = c.emit(Op::Eq, {c.reshape(lin, {U, 1}), rows});  // [U, M]
  if (reduction == "none") {
    // The last update that hits each row wins (ONNX leaves duplicates undefined; the reference
    // implementation applies updates in order).
    Value* order = c.reshape(c.emit(Op::Arange, {}, {{"size", Shape{SymInt(U)}}, {"dtype", DType::I64}}), {U, 1});
    Value* who = c.emit(Op::Where, {mask, order, scalar_of(c, DType::I64, -1)});
    Value* last = c.emit(Op::ReduceMax, {who}, {{"axes", std::vector<int64_t>{0}}});  // [M]
    Value* covered = c.reshape(c.emit(Op::Ge, {last, scalar_of(c, DType::I64, 0)}), {M, 1});
    Value* picked = c.emit(Op::Gather, {upd, c.emit(Op::Maximum, {last, scalar_of(c, DType::I64, 0)})},
                           {{"axis", int64_t(0)}});
    return c.emit(Op::Where, {covered, picked, data});
  }
  Value* mask3 = c.reshape(mask, {U, M, 1});
  Value* upd3 = c.reshape(upd, {U, 1, S});
  std::vector<int64_t> ax0{0};
  if (reduction == "add") {
    Value* sum = c.emit(Op::ReduceSum, {c.emit(Op::Where, {mask3, upd3, scalar_of(c, dt, 0)})}, {{"axes", ax0}});
    return c.emit(Op::Add, {data, sum});
  }
  if (reduction == "mul") {
    Value* prod = c.emit(Op::ReduceProd, {c.emit(Op::Where, {mask3, upd3, scalar_of(c, dt, 1)})}, {{"axes", ax0}});
    return c.emit(Op::Mul, {data, prod});
  }
  if (reduction == "max" || reduction == "min") {
    bool mx = reduction == "max";
    double ident = is_float(dt) ? (mx ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity())
                                : (mx ? -9.2e18 : 9.2e18);
    Value* red = c.emit(mx ? Op::ReduceMax : Op::ReduceMin, {c.emit(Op::Where, {mask3, upd3, scalar_of(c, dt, ident)})},
                        {{"axes", ax0}});
    Value* covered = c.reshape(c.emit(Op::ReduceMax, {c.cast(mask, DType::I64)}, {{"axes", ax0}}), {M, 1});
    Value* combined = c.emit(mx ? Op::Maximum : Op::Minimum, {data, red});
    return c.emit(Op::Where, {c.cast(covered, DType::Bool), combined, data});
  }
  c.fail("unknown reduction '" + reduction + "' (expected none, add, mul, max or min)");
}

// Row-major strides of the first k dims of `shape` (in units of the trailing block).
std::vector<int64_t> leading_strides(const std::vector<int64_t>& shape, size_t k) {
  std::vector<int64_t> st(k, 1);
  for (size_t i = k; i-- > 1;) st[i - 1] = st[i] * shape[i];
  return st;
}

// Linear row index of ND index tuples: idx [..., k] -> sum(idx[..., j] * stride_j), negatives
// wrapped by dims[j]. Returns [prod(idx.shape[:-1])] i64.
Value* linear_index(NodeCtx& c, Value* idx, const std::vector<int64_t>& dshape, int64_t k) {
  std::vector<int64_t> ishape = static_shape_of(c, idx, "indices");
  int64_t U = numel_of_dims(ishape) / std::max<int64_t>(k, 1);
  std::vector<double> dimv, stv;
  auto st = leading_strides(std::vector<int64_t>(dshape.begin(), dshape.begin() + k), size_t(k));
  for (int64_t j = 0; j < k; ++j) {
    dimv.push_back(double(dshape[size_t(j)]));
    stv.push_back(double(st[size_t(j)]));
  }
  Value* i2 = c.reshape(c.cast(idx, DType::I64), {U, k});
  i2 = wrap_negative(c, i2, const_of(c, DType::I64, {k}, dimv));
  return c.emit(Op::ReduceSum, {c.emit(Op::Mul, {i2, const_of(c, DType::I64, {k}, stv)})},
                {{"axes", std::vector<int64_t>{1}}});
}

void scatter_nd(NodeCtx& c) {
  Value* data = c.input(0);
  Value* idx = c.input(1);
  Value* upd = c.input(2);
  auto dshape = static_shape_of(c, data, "data");
  auto ishape = static_shape_of(c, idx, "indices");
  if (ishape.empty()) c.fail("indices must have rank >= 1");
  int64_t k = ishape.back();
  if (k < 1 || k > int64_t(dshape.size())) c.fail(str("indices' last dim ", k, " must be in [1, data rank ", dshape.size(), "]"));
  std::vector<int64_t> ushape(ishape.begin(), ishape.end() - 1);
  ushape.insert(ushape.end(), dshape.begin() + k, dshape.end());
  if (static_shape_of(c, upd, "updates") != ushape) c.fail("updates must have shape indices.shape[:-1] + data.shape[k:]");
  int64_t M = numel_of_dims(std::vector<int64_t>(dshape.begin(), dshape.begin() + k));
  int64_t S = numel_of_dims(dshape) / std::max<int64_t>(M, 1);
  int64_t U = numel_of_dims(ishape) / k;
  Value* lin = linear_index(c, idx, dshape, k);
  Value* out = scatter_rows(c, c.reshape(data, {M, S}), lin, c.reshape(upd, {U, S}), c.attr_string("reduction", "none"));
  c.set_output(0, c.reshape(out, dims(dshape)));
}

// ScatterElements (and the deprecated Scatter): every element of indices names a destination
// whose `axis` coordinate is the index and whose other coordinates are its own.
void scatter_elements(NodeCtx& c) {
  Value* data = c.input(0);
  Value* idx = c.input(1);
  Value* upd = c.input(2);
  auto dshape = static_shape_of(c, data, "data");
  auto ishape = static_shape_of(c, idx, "indices");
  int rank = int(dshape.size());
  if (int(ishape.size()) != rank) c.fail(str("indices must have the data's rank ", rank, ", got ", ishape.size()));
  if (static_shape_of(c, upd, "updates") != ishape) c.fail("updates must have the shape of indices");
  int axis = normalize_axis(c, c.attr_int("axis", 0), rank);
  for (int d = 0; d < rank; ++d)
    if (ishape[size_t(d)] > dshape[size_t(d)] && d != axis) c.fail(str("indices dim ", d, " is larger than data's"));
  auto st = leading_strides(dshape, size_t(rank));
  int64_t U = numel_of_dims(ishape);
  std::vector<double> base = c.table({U}, "index base");  // sum of the non-axis coordinates times their strides
  for (int64_t i = 0; i < U; ++i) {
    int64_t rem = i, acc = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t coord = rem % ishape[size_t(d)];
      rem /= ishape[size_t(d)];
      if (d != axis) acc += coord * st[size_t(d)];
    }
    base[size_t(i)] = double(acc);
  }
  Value* i1 = wrap_negative(c, c.reshape(idx, {U}), scalar_of(c, DType::I64, double(dshape[size_t(axis)])));
  Value* lin = c.emit(Op::Add, {c.emit(Op::Mul, {i1, scalar_of(c, DType::I64, double(st[size_t(axis)]))}),
                                const_of(c, DType::I64, {U}, base)});
  int64_t M = numel_of_dims(dshape);
  Value* out = scatter_rows(c, c.reshape(data, {M, 1}), lin, c.reshape(upd, {U, 1}), c.attr_string("reduction", "none"));
  c.set_output(0, c.reshape(out, dims(dshape)));
}

void gather_nd(NodeCtx& c) {
  Value* data = c.input(0);
  Value* idx = c.input(1);
  auto dshape = static_shape_of(c, data, "data");
  auto ishape = static_shape_of(c, idx, "indices");
  int64_t b = c.attr_int("batch_dims", 0);
  if (ishape.empty()) c.fail("indices must have rank >= 1");
  int64_t k = ishape.back();
  if (b < 0 || b >= int64_t(ishape.size()) || b > int64_t(dshape.size())) c.fail(str("batch_dims ", b, " is out of range"));
  if (k < 1 || b + k > int64_t(dshape.size())) c.fail(str("indices' last dim ", k, " + batch_dims must be <= data rank"));
  for (int64_t i = 0; i < b; ++i)
    if (ishape[size_t(i)] != dshape[size_t(i)]) c.fail(str("batch dim ", i, " differs between data and indices"));
  std::vector<int64_t> inner(dshape.begin() + b, dshape.end());
  int64_t B = numel_of_dims(std::vector<int64_t>(dshape.begin(), dshape.begin() + b));
  int64_t M = numel_of_dims(std::vector<int64_t>(inner.begin(), inner.begin() + k));
  int64_t S = numel_of_dims(inner) / std::max<int64_t>(M, 1);
  int64_t U = numel_of_dims(ishape) / k;  // index tuples, batch included
  Value* lin = linear_index(c, idx, inner, k);
  if (b > 0) {
    std::vector<double> off = c.table({U}, "index offset");
    for (int64_t u = 0; u < U; ++u) off[size_t(u)] = double((u / (U / B)) * M);
    lin = c.emit(Op::Add, {lin, const_of(c, DType::I64, {U}, off)});
  }
  Value* rows = c.emit(Op::Gather, {c.reshape(data, {B * M, S}), lin}, {{"axis", int64_t(0)}});
  std::vector<int64_t> oshape(ishape.begin(), ishape.end() - 1);
  oshape.insert(oshape.end(), inner.begin() + k, inner.end());
  c.set_output(0, c.reshape(rows, dims(oshape)));
}

void max_unpool(NodeCtx& c) {
  Value* x = c.input(0);
  Value* idx = c.input(1);
  auto xs = static_shape_of(c, x, "X");
  if (xs.size() < 3) c.fail("X must be [N, C, spatial...]");
  if (static_shape_of(c, idx, "I") != xs) c.fail("I must have the shape of X");
  size_t sp = xs.size() - 2;
  auto kernel = c.attr_ints("kernel_shape");
  auto strides = c.attr_ints("strides", std::vector<int64_t>(sp, 1));
  auto pads = c.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  if (kernel.size() != sp || strides.size() != sp || pads.size() != 2 * sp)
    c.fail("kernel_shape, strides and pads must match the spatial rank");
  std::vector<int64_t> inferred{xs[0], xs[1]};
  for (size_t i = 0; i < sp; ++i) inferred.push_back((xs[2 + i] - 1) * strides[i] - pads[i] - pads[sp + i] + kernel[i]);
  std::vector<int64_t> want = c.has_input(2) ? c.require_ints(2, "output_shape") : inferred;
  if (want.size() != xs.size()) c.fail("output_shape must have X's rank");
  int64_t M = numel_of_dims(inferred), U = numel_of_dims(xs);
  Value* zeros = c.emit(Op::Full, {}, {{"shape", Shape{SymInt(M), SymInt(1)}}, {"value", 0.0}, {"dtype", x->type.dtype}});
  Value* y = scatter_rows(c, zeros, c.reshape(c.cast(idx, DType::I64), {U}), c.reshape(x, {U, 1}), "none");
  y = c.reshape(y, dims(inferred));
  std::vector<int64_t> padv(2 * xs.size(), 0);
  for (size_t i = 0; i < xs.size(); ++i) {
    if (want[i] < inferred[i]) c.fail(str("output_shape dim ", i, " (", want[i], ") is smaller than the inferred ", inferred[i]));
    padv[xs.size() + i] = want[i] - inferred[i];
  }
  if (want != inferred) y = c.emit(Op::Pad, {y}, {{"pads", padv}});
  c.set_output(0, y);
}

// Compress: the condition fixes the output size, so it must be known at import time.
void compress(NodeCtx& c) {
  Value* x = c.input(0);
  HostTensor cond = c.require_known(1, "condition");
  if (cond.rank() != 1) c.fail("condition must be 1-D");
  int axis = 0;
  if (c.has_attr("axis")) {
    axis = normalize_axis(c, c.attr_int("axis", 0), x->type.rank());
  } else {
    x = c.reshape(x, {SymInt(numel_of_dims(static_shape_of(c, x, "input")))});
  }
  int64_t n = static_dim(c, x, axis, "input");
  if (cond.numel() > n) c.fail(str("condition has ", cond.numel(), " entries, the axis only ", n));
  std::vector<double> keep;
  for (int64_t i = 0; i < cond.numel(); ++i)
    if (cond.get_f64(i) != 0) keep.push_back(double(i));
  Value* ix = const_of(c, DType::I64, {int64_t(keep.size())}, keep);
  c.set_output(0, c.emit(Op::Gather, {x, ix}, {{"axis", int64_t(axis)}}));
}

// ReverseSequence: y[t, b] = x[len[b] - 1 - t, b] for t < len[b], else x[t, b] (a gather_elements).
void reverse_sequence(NodeCtx& c) {
  Value* x = c.input(0);
  auto xs = static_shape_of(c, x, "input");
  int rank = int(xs.size());
  if (rank < 2) c.fail("input must have rank >= 2");
  int64_t ta = c.attr_int("time_axis", 0), ba = c.attr_int("batch_axis", 1);
  if (!((ta == 0 && ba == 1) || (ta == 1 && ba == 0))) c.fail("time_axis and batch_axis must be 0 and 1 (either order)");
  int64_t T = xs[size_t(ta)], B = xs[size_t(ba)];
  Value* len = c.cast(c.input(1), DType::I64);
  if (len->type.rank() != 1 || static_dim(c, len, 0, "sequence_lens") != B)
    c.fail(str("sequence_lens must be 1-D of the batch size ", B));
  Shape tshape(size_t(rank), SymInt(1)), bshape(size_t(rank), SymInt(1));
  tshape[size_t(ta)] = SymInt(T);
  bshape[size_t(ba)] = SymInt(B);
  Value* t = c.reshape(c.emit(Op::Arange, {}, {{"size", Shape{SymInt(T)}}, {"dtype", DType::I64}}), tshape);
  Value* l = c.reshape(len, bshape);
  Value* rev = c.emit(Op::Sub, {c.emit(Op::Sub, {l, scalar_of(c, DType::I64, 1)}), t});
  Value* idx = c.emit(Op::Where, {c.emit(Op::Lt, {t, l}), rev, c.emit(Op::Expand, {t}, {{"shape", Shape{rev->type.shape}}})});
  idx = c.emit(Op::Expand, {idx}, {{"shape", dims(xs)}});
  c.set_output(0, c.emit(Op::GatherElements, {x, idx}, {{"axis", ta}}));
}

// CenterCropPad: per axis, crop (start (d - s) / 2) or zero-pad (before (s - d) / 2) to the size.
void center_crop_pad(NodeCtx& c) {
  Value* x = c.input(0);
  auto xs = static_shape_of(c, x, "input");
  int rank = int(xs.size());
  auto shape = c.require_ints(1, "shape");
  auto axes = c.attr_ints("axes");
  if (axes.empty())
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  if (shape.size() != axes.size()) c.fail(str("shape has ", shape.size(), " entries for ", axes.size(), " axes"));
  std::vector<int64_t> pads(size_t(2 * rank), 0);
  bool any_pad = false;
  for (size_t i = 0; i < axes.size(); ++i) {
    int a = normalize_axis(c, axes[i], rank);
    int64_t d = xs[size_t(a)], s = shape[i];
    if (s < 0) c.fail(str("shape entry ", i, " is negative"));
    if (s < d) x = slice_axis(c, x, a, (d - s) / 2, (d - s) / 2 + s);
    if (s > d) {
      pads[size_t(a)] = (s - d) / 2;
      pads[size_t(a + rank)] = s - d - (s - d) / 2;
      any_pad = true;
    }
  }
  if (any_pad) x = c.emit(Op::Pad, {x}, {{"pads", pads}});
  c.set_output(0, x);
}

// Why: TensorScatter writes a KV-cache update at per-batch positions. Seen from the cache, each
// position p along `axis` takes update row p - write_index[b] (mod the cache length in circular
// mode) when that row exists, so it is a gather of the update plus a where with the old cache.
void tensor_scatter(NodeCtx& c) {
  Value* past = c.input(0);
  Value* update = c.input(1);
  auto ps = static_shape_of(c, past, "past_cache");
  auto us = static_shape_of(c, update, "update");
  int rank = int(ps.size());
  if (rank < 2 || us.size() != ps.size()) c.fail("past_cache and update must have one rank, at least 2");
  int axis = normalize_axis(c, c.attr_int("axis", -2), rank);
  if (axis == 0) c.fail("axis must not be the batch axis 0");
  for (int i = 0; i < rank; ++i)
    if (i != axis && ps[size_t(i)] != us[size_t(i)]) c.fail(str("update dim ", i, " differs from past_cache's"));
  int64_t B = ps[0], M = ps[size_t(axis)], S = us[size_t(axis)];
  if (S > M) c.fail(str("update has ", S, " rows along axis ", axis, ", more than the cache's ", M));
  std::string mode = c.attr_string("mode", "linear");
  if (mode != "linear" && mode != "circular") c.fail("mode must be linear or circular, got '" + mode + "'");
  Value* w = c.has_input(2) ? c.cast(c.input(2), DType::I64) : const_of(c, DType::I64, {B}, std::vector<double>(size_t(B), 0));
  std::vector<double> pos;
  for (int64_t p = 0; p < M; ++p) pos.push_back(double(p));
  Value* rel = c.emit(Op::Sub, {const_of(c, DType::I64, {1, M}, pos), c.reshape(w, {SymInt(B), SymInt(1)})});  // [B, M]
  auto k = [&](double v) { return scalar_of(c, DType::I64, v); };
  if (mode == "circular") rel = c.emit(Op::Where, {c.emit(Op::Lt, {rel, k(0)}), c.emit(Op::Add, {rel, k(double(M))}), rel});
  Value* hit = c.emit(Op::And, {c.emit(Op::Ge, {rel, k(0)}), c.emit(Op::Lt, {rel, k(double(S))})});
  Value* row = c.emit(Op::Clamp, {rel}, {{"min", 0.0}, {"max", double(S - 1)}});
  Shape lined(size_t(rank), SymInt(1));  // [B, 1.., M, 1..]
  lined[0] = SymInt(B);
  lined[size_t(axis)] = SymInt(M);
  Value* idx = c.emit(Op::Expand, {c.reshape(row, lined)}, {{"shape", dims(ps)}});
  Value* taken = c.emit(Op::GatherElements, {update, idx}, {{"axis", int64_t(axis)}});
  c.set_output(0, c.emit(Op::Where, {c.reshape(hit, lined), taken, past}));
}

}  // namespace

// Pad with mode "wrap": each axis becomes concat(x[-before:], x, x[:after]); negative pads crop.
Value* pad_wrap(NodeCtx& c, Value* x, const std::vector<int64_t>& pads) {
  int rank = x->type.rank();
  for (int a = 0; a < rank; ++a) {
    int64_t before = pads[size_t(a)], after = pads[size_t(a + rank)];
    if (before == 0 && after == 0) continue;
    int64_t n = static_dim(c, x, a, "input");
    if (before < 0) { x = slice_axis(c, x, a, -before, n); n += before; before = 0; }
    if (after < 0) { x = slice_axis(c, x, a, 0, n + after); n += after; after = 0; }
    if (before > n || after > n) c.unsupported(str("wrap padding larger than dim ", a, " (", n, ")"));
    std::vector<Value*> parts;
    if (before > 0) parts.push_back(slice_axis(c, x, a, n - before, n));
    parts.push_back(x);
    if (after > 0) parts.push_back(slice_axis(c, x, a, 0, after));
    if (parts.size() > 1) x = c.emit(Op::Concat, parts, {{"axis", int64_t(a)}});
  }
  return x;
}

void register_index_ops(OpRegistry& r) {
  r["ScatterND"] = scatter_nd;
  r["ScatterElements"] = scatter_elements;
  r["Scatter"] = scatter_elements;
  r["GatherND"] = gather_nd;
  r["MaxUnpool"] = max_unpool;
  r["Compress"] = compress;
  r["ReverseSequence"] = reverse_sequence;
  r["CenterCropPad"] = center_crop_pad;
  r["TensorScatter"] = tensor_scatter;
}

}  // namespace kiln::onnx_import
