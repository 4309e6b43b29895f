// Strided views (see strided_view.h): the view chain's index rules evaluated at constant
// coordinates give the offset and strides; the same rules at the corners check they are affine.
#include "lower/strided_view.h"

#include <algorithm>

#include "lower/view_rules.h"

namespace kiln::lower {

namespace {

std::optional<std::vector<int64_t>> static_dims(const Shape& s) {
  std::vector<int64_t> out;
  for (const SymInt& d : s) {
    auto c = d.maybe_constant();
    if (!c) return std::nullopt;
    out.push_back(*c);
  }
  return out;
}

}  // namespace

std::optional<StridedView> strided_view(const Value* v, const std::function<bool(const Value*)>& is_view) {
  std::vector<const Node*> chain;  // from v's producer up to the source's consumer
  const Value* source = v;
  while (is_view(source)) {
    const Node* n = source->producer;
    if (n == nullptr || !is_index_view(*n) || n->inputs.empty()) return std::nullopt;
    if (!static_dims(source->type.shape)) return std::nullopt;
    chain.push_back(n);
    source = n->inputs[0];
  }
  const auto dims = static_dims(v->type.shape);
  if (!dims || !static_dims(source->type.shape)) return std::nullopt;
  const size_t rank = dims->size();
  auto element_of = [&](const std::vector<int64_t>& at) -> std::optional<int64_t> {
    Coords c;
    for (int64_t x : at) c.push_back(SymInt(x));
    for (const Node* n : chain) c = view_input_coords(*n, c);
    return ravel(c, source->type.shape).maybe_constant();
  };
  StridedView out;
  out.source = source;
  const std::vector<int64_t> origin(rank, 0);
  auto at0 = element_of(origin);
  if (!at0) return std::nullopt;
  out.offset = *at0;
  for (size_t i = 0; i < rank; ++i) {
    std::vector<int64_t> unit = origin;
    if ((*dims)[i] > 1) unit[i] = 1;
    auto e = element_of(unit);
    if (!e) return std::nullopt;
    out.strides.push_back(*e - out.offset);
  }
  // Affine: every corner (each dim at 0 or its last index), and each dim's last index alone.
  for (uint64_t mask = 0; mask < (uint64_t(1) << rank); ++mask) {
    std::vector<int64_t> corner = origin;
    int64_t expected = out.offset;
    for (size_t i = 0; i < rank; ++i)
      if (mask >> i & 1) corner[i] = std::max<int64_t>(0, (*dims)[i] - 1), expected += corner[i] * out.strides[i];
    auto e = element_of(corner);
    if (!e || *e != expected) return std::nullopt;
  }
  return out;
}

StridedView row_major_view(const Value* v, const std::vector<int64_t>& dims) {
  StridedView out;
  out.source = v;
  out.strides.assign(dims.size(), 1);
  for (size_t j = dims.size(); j-- > 1;) out.strides[j - 1] = out.strides[j] * dims[j];
  return out;
}

std::optional<BatchedRows> batched_rows(const std::vector<int64_t>& shape, const StridedView& view, int element_bytes) {
  const int64_t align_elements = std::max(1, 16 / element_bytes);
  const size_t rank = shape.size();
  if (rank < 2 || view.strides.size() != rank || (shape.back() > 1 && view.strides.back() != 1)) return std::nullopt;
  BatchedRows r;
  r.row_stride = view.strides[rank - 2];
  if (rank >= 3) r.heads = shape[rank - 3], r.head_stride = view.strides[rank - 3];
  // The batch dims before H, innermost first: merged index b steps outer_stride; dim i must step
  // outer_stride times the sizes inside it (size-1 dims never step).
  std::optional<int64_t> outer;
  int64_t inside = 1;
  for (size_t i = rank >= 4 ? rank - 4 + 1 : 0; i-- > 0;) {
    if (shape[i] <= 1) continue;
    if (!outer) {
      if (view.strides[i] % inside != 0) return std::nullopt;
      outer = view.strides[i] / inside;
    }
    if (view.strides[i] != *outer * inside) return std::nullopt;
    inside *= shape[i];
  }
  r.outer_stride = outer.value_or(0);
  for (int64_t x : {view.offset, r.row_stride, r.head_stride, r.outer_stride})
    if (x % align_elements != 0) return std::nullopt;
  return r;
}

}  // namespace kiln::lower
