// ONNX movement, indexing and shape ops (Reshape, Transpose, Slice, Gather, Pad, Shape, Range...).
// Why: Kiln keeps shapes and slice bounds as attributes, so operands that ONNX passes as tensors
// (a Reshape's target, a Slice's starts) are read here as import-time values, symbolic included.
#include <algorithm>
#include <cmath>
#include <limits>

#include "frontend/onnx/build_helpers.h"

namespace kiln::onnx_import {

namespace {

std::vector<int64_t> axes_operand_or_attr(NodeCtx& c, int input_index, int since_opset, const char* what) {
  if (c.opset() >= since_opset) {
    if (!c.has_input(input_index)) return {};
    return c.require_ints(input_index, what);
  }
  return c.attr_ints("axes");
}

// Resolves a -1 in a symbolic target by cancelling dims the input and target share (so [B, 3, 4]
// to [B, -1] gives [B, 12], not [B, 12*B // B]); leaves it to the shape rule otherwise.
void resolve_minus_one(const Shape& in, Shape& target) {
  auto minus = std::find(target.begin(), target.end(), SymInt(-1));
  if (minus == target.end()) return;
  std::vector<SymInt> rest(in.begin(), in.end());
  int64_t target_const = 1;
  for (auto it = target.begin(); it != target.end(); ++it) {
    if (it == minus) continue;
    auto same = std::find(rest.begin(), rest.end(), *it);
    if (same != rest.end()) rest.erase(same);
    else if (it->is_constant()) target_const *= it->constant();
    else return;
  }
  SymInt rest_prod(1);
  for (const auto& d : rest) rest_prod = rest_prod * d;
  if (!rest_prod.is_constant()) {
    if (target_const == 1) *minus = rest_prod;
    return;
  }
  if (target_const != 0 && rest_prod.constant() % target_const == 0) *minus = SymInt(rest_prod.constant() / target_const);
}

void reshape(NodeCtx& c) {
  Value* x = c.input(0);
  std::vector<SymInt> target = c.require_dims(1, "the target shape");
  bool allowzero = c.attr_int("allowzero", 0) != 0;
  Shape shape;
  for (size_t i = 0; i < target.size(); ++i) {
    const SymInt& t = target[i];
    if (t == SymInt(0) && !allowzero) {
      if (i >= x->type.shape.size()) c.fail(str("target dim ", i, " is 0 (copy) but the input has rank ", x->type.rank()));
      shape.push_back(x->type.shape[i]);
    } else {
      if (t.is_constant() && t.constant() < -1) c.fail(str("target shape has invalid dim ", t.constant()));
      shape.push_back(t);
    }
  }
  resolve_minus_one(x->type.shape, shape);
  c.set_output(0, c.emit(Op::Reshape, {x}, {{"shape", shape}}));
}

void flatten(NodeCtx& c) {
  Value* x = c.input(0);
  int rank = x->type.rank();
  int64_t axis = c.attr_int("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) c.fail(str("axis ", c.attr_int("axis", 1), " is out of range for rank ", rank));
  SymInt outer(1), inner(1);
  for (int i = 0; i < rank; ++i) (i < axis ? outer : inner) = (i < axis ? outer : inner) * x->type.shape[size_t(i)];
  c.set_output(0, c.emit(Op::Reshape, {x}, {{"shape", Shape{outer, inner}}}));
}

void split(NodeCtx& c) {
  Value* x = c.input(0);
  int axis = normalize_axis(c, c.attr_int("axis", 0), x->type.rank());
  std::vector<int64_t> sizes;
  if (c.opset() >= 13 && c.has_input(1)) sizes = c.require_ints(1, "split sizes");
  else if (c.opset() < 13) sizes = c.attr_ints("split");
  if (sizes.empty()) {
    auto dim = x->type.shape[size_t(axis)].maybe_constant();
    if (!dim) c.unsupported("splitting a symbolic dim into equal parts");
    int64_t parts = c.has_attr("num_outputs") ? c.attr_int("num_outputs", 1) : c.num_outputs();
    if (parts <= 0) c.fail("num_outputs must be positive");
    int64_t chunk = (*dim + parts - 1) / parts;
    if (!c.has_attr("num_outputs") && *dim % parts != 0)
      c.fail(str("dim ", *dim, " does not split evenly into ", parts, " outputs"));
    for (int64_t i = 0, left = *dim; i < parts; ++i, left -= chunk) sizes.push_back(std::min(chunk, std::max<int64_t>(left, 0)));
  }
  if (int64_t(sizes.size()) != c.num_outputs())
    c.fail(str("split has ", sizes.size(), " sizes but ", c.num_outputs(), " outputs"));
  auto outs = c.emit_multi(Op::Split, {x}, {{"axis", int64_t(axis)}, {"sizes", sizes}});
  for (size_t i = 0; i < outs.size(); ++i) c.set_output(int(i), outs[i]);
}

void slice(NodeCtx& c) {
  Value* x = c.input(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset() >= 10) {
    starts = c.require_ints(1, "starts");
    ends = c.require_ints(2, "ends");
    if (c.has_input(3)) axes = c.require_ints(3, "axes");
    if (c.has_input(4)) steps = c.require_ints(4, "steps");
  } else {
    starts = c.attr_ints("starts");
    ends = c.attr_ints("ends");
    axes = c.attr_ints("axes");
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  for (auto& a : axes) a = normalize_axis(c, a, x->type.rank());
  if (steps.empty()) steps.assign(starts.size(), 1);
  c.set_output(0, c.emit(Op::Slice, {x}, {{"starts", starts}, {"ends", ends}, {"axes", axes}, {"steps", steps}}));
}

// Maps negative indices into range: constant indices are rewritten, others get a where().
Value* wrap_indices(NodeCtx& c, Value* indices, const SymInt& dim, int operand) {
  auto k = c.known(operand);
  if (k) {
    auto d = dim.maybe_constant();
    if (!d) return indices;
    HostTensor t = k->clone();
    for (int64_t i = 0; i < t.numel(); ++i) {
      int64_t v = t.get_i64(i);
      if (v < -*d || v >= *d) c.fail(str("index ", v, " is out of range for a dim of ", *d));
      if (v < 0) t.set_i64(i, v + *d);
    }
    return c.constant(t);
  }
  auto d = dim.maybe_constant();
  if (!d) return indices;
  Value* neg = c.emit(Op::Lt, {indices, c.scalar_like(indices, 0)});
  Value* shifted = c.emit(Op::Add, {indices, c.scalar_like(indices, double(*d))});
  return c.emit(Op::Where, {neg, shifted, indices});
}

void gather(NodeCtx& c) {
  Value* x = c.input(0);
  int axis = normalize_axis(c, c.attr_int("axis", 0), x->type.rank());
  Value* idx = wrap_indices(c, c.input(1), x->type.shape[size_t(axis)], 1);
  c.set_output(0, c.emit(Op::Gather, {x, idx}, {{"axis", int64_t(axis)}}));
}

void gather_elements(NodeCtx& c) {
  Value* x = c.input(0);
  int axis = normalize_axis(c, c.attr_int("axis", 0), x->type.rank());
  Value* idx = wrap_indices(c, c.input(1), x->type.shape[size_t(axis)], 1);
  c.set_output(0, c.emit(Op::GatherElements, {x, idx}, {{"axis", int64_t(axis)}}));
}

void expand(NodeCtx& c) {
  Value* x = c.input(0);
  std::vector<SymInt> target = c.require_dims(1, "the target shape");
  Shape out = broadcast_dims(c, x->type.shape, Shape(target.begin(), target.end()));
  c.set_output(0, c.emit(Op::Expand, {x}, {{"shape", out}}));
}

// Tile = reshape to [1, d0, 1, d1, ...], expand to [r0, d0, r1, d1, ...], merge pairs.
void tile(NodeCtx& c) {
  Value* x = c.input(0);
  std::vector<int64_t> reps = c.require_ints(1, "repeats");
  if (int(reps.size()) != x->type.rank()) c.fail(str("repeats has ", reps.size(), " entries, the input has rank ", x->type.rank()));
  Shape inter, expanded, merged;
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 0) c.fail("repeats must be >= 0");
    const SymInt& d = x->type.shape[i];
    inter.insert(inter.end(), {SymInt(1), d});
    expanded.insert(expanded.end(), {SymInt(reps[i]), d});
    merged.push_back(SymInt(reps[i]) * d);
  }
  Value* y = c.reshape(x, inter);
  y = c.emit(Op::Expand, {y}, {{"shape", expanded}});
  c.set_output(0, c.reshape(y, merged));
}

void pad(NodeCtx& c) {
  Value* x = c.input(0);
  int rank = x->type.rank();
  std::string mode = c.attr_string("mode", "constant");
  std::vector<int64_t> pads;
  double value = 0;
  std::vector<int64_t> axes;
  if (c.opset() >= 11) {
    pads = c.require_ints(1, "pads");
    if (c.has_input(2)) {
      HostTensor v = c.require_known(2, "constant_value");
      if (v.numel() != 1) c.fail("constant_value must hold one value");
      value = v.get_f64(0);
    }
    if (c.has_input(3)) axes = c.require_ints(3, "axes");
  } else {
    pads = c.attr_ints("pads");
    value = c.attr_float("value", 0.0);
  }
  std::vector<int64_t> full(size_t(2 * rank), 0);
  if (axes.empty()) {
    if (int(pads.size()) != 2 * rank) c.fail(str("pads has ", pads.size(), " entries, expected 2 * rank = ", 2 * rank));
    full = pads;
  } else {
    if (pads.size() != 2 * axes.size()) c.fail("pads must have 2 entries per axis");
    for (size_t i = 0; i < axes.size(); ++i) {
      int a = normalize_axis(c, axes[i], rank);
      full[size_t(a)] = pads[i];
      full[size_t(a + rank)] = pads[i + axes.size()];
    }
  }
  if (mode == "wrap") {
    c.set_output(0, pad_wrap(c, x, full));
    return;
  }
  c.set_output(0, c.emit(Op::Pad, {x}, {{"pads", full}, {"mode", mode}, {"value", value}}));
}

void shape(NodeCtx& c) {
  Value* x = c.input(0);
  Value* s = c.emit(Op::ShapeOf, {x});
  int rank = x->type.rank();
  int64_t start = c.attr_int("start", 0), end = c.attr_int("end", rank);
  if (c.has_attr("start") || c.has_attr("end")) {
    auto clampi = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
    s = c.emit(Op::Slice, {s}, {{"starts", std::vector<int64_t>{clampi(start)}},
                                {"ends", std::vector<int64_t>{clampi(end)}}});
  }
  c.set_output(0, s);
}

void size(NodeCtx& c) {
  Value* x = c.input(0);
  if (x->type.is_static()) {
    c.set_output(0, c.constant(HostTensor::scalar(DType::I64, double(numel_of(x->type.static_shape())))));
    return;
  }
  c.set_output(0, c.emit(Op::ReduceProd, {c.emit(Op::ShapeOf, {x})}));
}

void constant_of_shape(NodeCtx& c) {
  std::vector<SymInt> dims = c.require_dims(0, "the shape");
  DType dt = DType::F32;
  double value = 0;
  if (c.has_attr("value")) {
    HostTensor v = c.attr_tensor("value");
    if (v.numel() != 1) c.fail("'value' must hold exactly one element");
    dt = v.dtype();
    value = v.get_f64(0);
  }
  for (const auto& d : dims)
    if (d.is_constant() && d.constant() < 0) c.fail("shape has a negative dim");
  c.set_output(0, c.emit(Op::Full, {}, {{"shape", Shape(dims.begin(), dims.end())}, {"value", value}, {"dtype", dt}}));
}

void constant(NodeCtx& c) {
  if (c.node().attribute_size() != 1) c.fail("needs exactly one value attribute");
  const auto& a = c.node().attribute(0);
  HostTensor t;
  if (a.name() == "value") t = c.attr_tensor("value");
  else if (a.name() == "value_float") t = HostTensor::scalar(DType::F32, c.attr_float("value_float", 0));
  else if (a.name() == "value_int") t = HostTensor::scalar(DType::I64, double(c.attr_int("value_int", 0)));
  else if (a.name() == "value_floats") {
    auto v = c.attr_floats("value_floats");
    t = HostTensor::from_doubles(DType::F32, {int64_t(v.size())}, v);
  } else if (a.name() == "value_ints") {
    auto v = c.attr_ints("value_ints");
    t = HostTensor::zeros(DType::I64, {int64_t(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.set_i64(int64_t(i), v[i]);
  } else {
    c.unsupported(str("constant attribute '", a.name(), "' is not supported"));
  }
  c.set_output(0, c.constant(t));
}

void range(NodeCtx& c) {
  HostTensor start = c.require_known(0, "start"), limit = c.require_known(1, "limit"), delta = c.require_known(2, "delta");
  double s = start.get_f64(0), l = limit.get_f64(0), d = delta.get_f64(0);
  if (d == 0) c.fail("delta must not be 0");
  int64_t n = std::max<int64_t>(int64_t(std::ceil((l - s) / d)), 0);
  c.set_output(0, c.emit(Op::Arange, {}, {{"size", Shape{SymInt(n)}}, {"start", s}, {"step", d}, {"dtype", start.dtype()}}));
}

void dropout(NodeCtx& c) {
  Value* x = c.input(0);
  bool training = false;
  if (c.opset() >= 12 && c.has_input(2)) training = c.require_known(2, "training_mode").get_f64(0) != 0;
  if (training) {
    double ratio = c.has_input(1) ? c.require_known(1, "ratio").get_f64(0) : 0.5;
    if (ratio != 0) c.unsupported("dropout in training mode (random masks) is not supported");
  }
  c.set_output(0, x);
  if (c.wants_output(1))
    c.set_output(1, c.emit(Op::Full, {}, {{"shape", x->type.shape}, {"value", 1.0}, {"dtype", DType::Bool}}));
}

void trilu(NodeCtx& c) {
  int64_t k = c.has_input(1) ? c.require_ints(1, "k").at(0) : 0;
  bool upper = c.attr_int("upper", 1) != 0;
  c.set_output(0, c.emit(upper ? Op::Triu : Op::Tril, {c.input(0)}, {{"k", k}}));
}

void depth_to_space(NodeCtx& c) {
  Value* x = c.input(0);
  if (x->type.rank() != 4) c.fail("input must be [N, C, H, W]");
  int64_t b = c.attr_int("blocksize", 0);
  if (b <= 0) c.fail("blocksize must be positive");
  const Shape& s = x->type.shape;
  SymInt cb = floordiv(s[1], SymInt(b * b));
  bool crd = c.attr_string("mode", "DCR") == "CRD";
  Value* y = crd ? c.reshape(x, {s[0], cb, SymInt(b), SymInt(b), s[2], s[3]})
                 : c.reshape(x, {s[0], SymInt(b), SymInt(b), cb, s[2], s[3]});
  std::vector<int64_t> perm = crd ? std::vector<int64_t>{0, 1, 4, 2, 5, 3} : std::vector<int64_t>{0, 3, 4, 1, 5, 2};
  y = c.emit(Op::Permute, {y}, {{"perm", perm}});
  c.set_output(0, c.reshape(y, {s[0], cb, s[2] * SymInt(b), s[3] * SymInt(b)}));
}

void space_to_depth(NodeCtx& c) {
  Value* x = c.input(0);
  if (x->type.rank() != 4) c.fail("input must be [N, C, H, W]");
  int64_t b = c.attr_int("blocksize", 0);
  if (b <= 0) c.fail("blocksize must be positive");
  const Shape& s = x->type.shape;
  SymInt h = floordiv(s[2], SymInt(b)), w = floordiv(s[3], SymInt(b));
  Value* y = c.reshape(x, {s[0], s[1], h, SymInt(b), w, SymInt(b)});
  y = c.emit(Op::Permute, {y}, {{"perm", std::vector<int64_t>{0, 3, 5, 1, 2, 4}}});
  c.set_output(0, c.reshape(y, {s[0], s[1] * SymInt(b * b), h, w}));
}

// OneHot = where(unsqueeze(indices) == arange(depth) along axis, on, off).
void one_hot(NodeCtx& c) {
  Value* idx = c.input(0);
  HostTensor depth_t = c.require_known(1, "depth");
  Value* values = c.input(2);  // [off, on], read at run time
  if (values->type.rank() != 1 || values->type.shape[0] != SymInt(2)) c.fail("values must be [off, on]");
  int64_t depth = int64_t(depth_t.get_f64(0));
  int out_rank = idx->type.rank() + 1;
  int axis = normalize_axis(c, c.attr_int("axis", -1), out_rank);
  Value* i64 = c.cast(idx, DType::I64);
  Value* neg = c.emit(Op::Lt, {i64, c.scalar_like(i64, 0)});
  i64 = c.emit(Op::Where, {neg, c.emit(Op::Add, {i64, c.scalar_like(i64, double(depth))}), i64});
  i64 = c.emit(Op::Unsqueeze, {i64}, {{"axes", std::vector<int64_t>{axis}}});
  Shape ar_shape(size_t(out_rank), SymInt(1));
  ar_shape[size_t(axis)] = SymInt(depth);
  Value* ar = c.emit(Op::Arange, {}, {{"size", Shape{SymInt(depth)}}, {"dtype", DType::I64}});
  ar = c.reshape(ar, ar_shape);
  Value* hit = c.emit(Op::Eq, {i64, ar});
  Value* off = c.reshape(slice_axis(c, values, 0, 0, 1), {});
  Value* on = c.reshape(slice_axis(c, values, 0, 1, 2), {});
  c.set_output(0, c.emit(Op::Where, {hit, on, off}));
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
  r["Reshape"] = reshape;
  r["Flatten"] = flatten;
  r["Transpose"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    std::vector<int64_t> perm = c.attr_ints("perm");
    if (perm.empty())
      for (int i = x->type.rank() - 1; i >= 0; --i) perm.push_back(i);
    c.set_output(0, c.emit(Op::Permute, {x}, {{"perm", perm}}));
  };
  r["Squeeze"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    auto axes = axes_operand_or_attr(c, 1, 13, "axes");
    for (auto& a : axes) a = normalize_axis(c, a, x->type.rank());
    c.set_output(0, c.emit(Op::Squeeze, {x}, {{"axes", axes}}));
  };
  r["Unsqueeze"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    auto axes = axes_operand_or_attr(c, 1, 13, "axes");
    int out_rank = x->type.rank() + int(axes.size());
    for (auto& a : axes) a = normalize_axis(c, a, out_rank);
    c.set_output(0, c.emit(Op::Unsqueeze, {x}, {{"axes", axes}}));
  };
  r["Concat"] = [](NodeCtx& c) {
    if (!c.has_attr("axis")) c.fail("attribute 'axis' is required");
    c.set_output(0, c.emit(Op::Concat, c.inputs(), {{"axis", c.attr_int("axis", 0)}}));
  };
  r["Split"] = split;
  r["Slice"] = slice;
  r["Gather"] = gather;
  r["GatherElements"] = gather_elements;
  r["Expand"] = expand;
  r["Tile"] = tile;
  r["Pad"] = pad;
  r["Shape"] = shape;
  r["Size"] = size;
  r["ConstantOfShape"] = constant_of_shape;
  r["Constant"] = constant;
  r["Range"] = range;
  r["Dropout"] = dropout;
  r["Trilu"] = trilu;
  r["DepthToSpace"] = depth_to_space;
  r["SpaceToDepth"] = space_to_depth;
  r["OneHot"] = one_hot;
}

}  // namespace kiln::onnx_import
