// Index helpers shared by the reference kernels: kept tiny and explicit so that every kernel's
// addressing can be checked by reading it.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "interp/ref_kernels.h"
#include "kiln/error.h"

namespace kiln::interp {

BroadcastIndex::BroadcastIndex(const std::vector<int64_t>& in_shape,
                               const std::vector<int64_t>& out_shape)
    : out_shape_(out_shape), in_strides_(out_shape.size(), 0) {
  KILN_ASSERT(in_shape.size() <= out_shape.size());
  size_t offset = out_shape.size() - in_shape.size();
  int64_t stride = 1;
  for (size_t i = in_shape.size(); i-- > 0;) {
    KILN_ASSERT(in_shape[i] == 1 || in_shape[i] == out_shape[offset + i]);
    in_strides_[offset + i] = in_shape[i] == 1 ? 0 : stride;
    stride *= in_shape[i];
  }
}

int64_t BroadcastIndex::operator()(int64_t out_index) const {
  int64_t in_index = 0;
  for (size_t d = out_shape_.size(); d-- > 0;) {
    int64_t coord = out_index % out_shape_[d];
    out_index /= out_shape_[d];
    in_index += coord * in_strides_[d];
  }
  return in_index;
}

std::vector<int64_t> unravel_index(int64_t index, const std::vector<int64_t>& shape) {
  std::vector<int64_t> coords(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    coords[d] = index % shape[d];
    index /= shape[d];
  }
  return coords;
}

int64_t ravel_index(const std::vector<int64_t>& coords, const std::vector<int64_t>& shape) {
  int64_t index = 0;
  for (size_t d = 0; d < shape.size(); ++d) index = index * shape[d] + coords[d];
  return index;
}

int normalize_axis(int64_t axis, int rank, const char* what) {
  KILN_CHECK(axis >= -rank && axis < rank, what, " ", axis, " is out of range for rank ", rank);
  return int(axis < 0 ? axis + rank : axis);
}

void split_at_axis(const std::vector<int64_t>& shape, int axis, int64_t& outer, int64_t& dim, int64_t& inner) {
  outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= shape[size_t(i)];
  dim = shape[size_t(axis)];
  for (size_t i = size_t(axis) + 1; i < shape.size(); ++i) inner *= shape[i];
}

std::vector<int64_t> sorted_positions(const HostTensor& x, int64_t base, int64_t stride, int64_t dim, bool largest) {
  std::vector<int64_t> order(static_cast<size_t>(dim));
  std::iota(order.begin(), order.end(), 0);
  // "before" for the largest-first order; the smallest-first order swaps the operands.
  auto sort_by = [&](auto key) {
    std::vector<decltype(key(0))> v(static_cast<size_t>(dim));
    for (int64_t s = 0; s < dim; ++s) v[size_t(s)] = key(base + s * stride);
    std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) {
      auto vl = v[size_t(l)], vr = v[size_t(r)];
      if constexpr (std::is_floating_point_v<decltype(vl)>) {
        if (std::isnan(vl) || std::isnan(vr)) return largest ? (std::isnan(vl) && !std::isnan(vr)) : (!std::isnan(vl) && std::isnan(vr));
      }
      return largest ? vl > vr : vl < vr;
    });
  };
  const DType t = x.dtype();
  if (is_float(t)) sort_by([&](int64_t i) { return x.get_f64(i); });
  else if (t == DType::U64) sort_by([&](int64_t i) { return uint64_t(x.get_i64(i)); });
  else sort_by([&](int64_t i) { return x.get_i64(i); });
  return order;
}

void copy_element(const HostTensor& src, int64_t src_index, HostTensor& dst, int64_t dst_index) {
  KILN_ASSERT(src.dtype() == dst.dtype());
  if (src.dtype() == DType::Str) return dst.set_str(dst_index, src.str_at(src_index));
  size_t n = size_t(dtype_size(src.dtype()));
  std::memcpy(static_cast<uint8_t*>(dst.raw()) + size_t(dst_index) * n,
              static_cast<const uint8_t*>(src.raw()) + size_t(src_index) * n, n);
}

}  // namespace kiln::interp
