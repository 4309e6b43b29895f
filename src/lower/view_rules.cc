// Index rules of view ops (see view_rules.h). Slice bounds are normalised exactly as the slice
// shape rule does, so a view reads the elements the reference kernel copies.
#include "lower/view_rules.h"

#include <algorithm>

#include "ir/decompositions.h"
#include "kiln/error.h"

namespace kiln::lower {

namespace {

constexpr int64_t kToEnd = int64_t(1) << 40;  // as in the slice shape rule: "to the end"

int normalize(int64_t axis, int rank) { return int(axis < 0 ? axis + rank : axis); }

bool slice_is_static(const Node& n) {
  const Shape& in = n.inputs[0]->type.shape;
  std::vector<int64_t> axes = n.attrs.get_ints("axes");
  if (axes.empty())
    for (size_t i = 0; i < n.attrs.get_ints("starts").size(); ++i) axes.push_back(int64_t(i));
  for (int64_t a : axes)
    if (!in[size_t(normalize(a, int(in.size())))].is_constant()) return false;
  return true;
}

}  // namespace

namespace {

// A permute that moves only size-1 dims keeps every element's linear position (at T=1 a decode
// step's [B, T, H, D] -> [B, H, T, D] is one): the same bytes, so a reshape.
bool permute_keeps_order(const Node& n) {
  const Shape& in = n.inputs[0]->type.shape;
  const auto& perm = n.attrs.get_ints("perm");
  if (perm.size() != in.size()) return false;
  int last = -1;
  for (int64_t p : perm) {
    int ax = normalize(p, int(in.size()));
    if (ax < 0 || ax >= int(in.size())) return false;
    if (in[size_t(ax)] == SymInt(1)) continue;
    if (ax < last) return false;
    last = ax;
  }
  return true;
}

}  // namespace

bool is_reshape_view(const Node& n) {
  if (n.op == Op::Permute) return permute_keeps_order(n);
  return n.op == Op::Reshape || n.info().decompose == decompose_to_reshape;
}

bool is_index_view(const Node& n) {
  if (!n.info().has(kMovement) || n.outputs.size() != 1) return false;
  if (is_reshape_view(n)) return true;
  switch (n.op) {
    case Op::Permute:
    case Op::Expand: return true;
    case Op::Slice: return slice_is_static(n);
    default: return false;
  }
}

SymInt ravel(const Coords& coords, const Shape& shape) {
  KILN_ASSERT(coords.size() == shape.size());
  SymInt linear(0);
  for (size_t d = 0; d < shape.size(); ++d) linear = linear * shape[d] + coords[d];
  return linear;
}

Coords unravel(const SymInt& linear, const Shape& shape) {
  Coords out(shape.size());
  // A tensor with a 0 dim has no elements: no coordinate is ever read (and no dim divides).
  for (const SymInt& d : shape)
    if (d == SymInt(0)) return Coords(shape.size(), SymInt(0));
  SymInt rest = linear;
  for (size_t d = shape.size(); d-- > 0;) {
    out[d] = d == 0 ? rest : mod(rest, shape[d]);
    rest = floordiv(rest, shape[d]);
  }
  return out;
}

Coords broadcast_coords(const Coords& coords, const Shape& to, const Shape& from) {
  KILN_ASSERT(from.size() <= to.size() && coords.size() == to.size());
  size_t offset = to.size() - from.size();
  Coords out(from.size());
  for (size_t d = 0; d < from.size(); ++d)
    out[d] = (from[d] == SymInt(1) && !(to[offset + d] == SymInt(1))) ? SymInt(0) : coords[offset + d];
  return out;
}

Coords view_input_coords(const Node& n, const Coords& out) {
  const Shape& in_shape = n.inputs[0]->type.shape;
  const Shape& out_shape = n.outputs[0]->type.shape;
  if (is_reshape_view(n)) return unravel(ravel(out, out_shape), in_shape);
  switch (n.op) {
    case Op::Permute: {
      Coords in(in_shape.size());
      const auto& perm = n.attrs.get_ints("perm");
      for (size_t d = 0; d < perm.size(); ++d) in[size_t(normalize(perm[d], int(perm.size())))] = out[d];
      return in;
    }
    case Op::Expand: return broadcast_coords(out, out_shape, in_shape);
    case Op::Slice: {
      Coords in = out;
      const auto& starts = n.attrs.get_ints("starts");
      std::vector<int64_t> axes = n.attrs.get_ints("axes"), steps = n.attrs.get_ints("steps");
      if (axes.empty())
        for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
      if (steps.empty()) steps.assign(starts.size(), 1);
      for (size_t i = 0; i < starts.size(); ++i) {
        size_t ax = size_t(normalize(axes[i], int(in_shape.size())));
        int64_t D = in_shape[ax].constant(), v = starts[i], step = steps[i];
        int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? D : D - 1;
        if (v < 0) v = (v < -kToEnd) ? lo : v + D;
        if (v > kToEnd) v = hi;
        v = std::clamp(v, lo, hi);
        in[ax] = SymInt(v) + SymInt(step) * out[ax];
      }
      return in;
    }
    default: break;
  }
  throw Error(str("internal error: ", n.describe(), " has no view index rule"));
}

}  // namespace kiln::lower
