// Reference kernels for movement and indexing ops: for each output element, compute the input
// coordinates it comes from and copy the element bit-exactly. Why: writing every op as "where does
// out[i] come from" makes the index arithmetic the whole kernel, easy to check against ops.def.
#include <algorithm>
#include <cstring>

#include "interp/ref_kernels.h"
#include "kiln/error.h"

namespace kiln::interp {

namespace {

// Slice bounds at or beyond this mean "to the end" (matches slice_length in shape_rules_movement.cc).
constexpr int64_t kToEnd = int64_t(1) << 40;

void copy_all(const HostTensor& src, HostTensor& dst) {
  KILN_ASSERT(src.numel() == dst.numel() && src.dtype() == dst.dtype());
  if (src.dtype() == DType::Str)
    for (int64_t i = 0; i < src.numel(); ++i) dst.set_str(i, src.str_at(i));
  if (src.nbytes()) std::memcpy(dst.raw(), src.raw(), src.nbytes());
}

// Normalised python slice of one dim: first index and count, same rules as slice_length.
struct SliceRange {
  int64_t start = 0, step = 1, length = 0;
};
SliceRange normalize_slice(int64_t dim, int64_t start, int64_t end, int64_t step) {
  KILN_CHECK(step != 0, "slice step cannot be 0");
  auto norm = [dim](int64_t v, int64_t lo, int64_t hi) {
    if (v < 0) v = (v < -kToEnd) ? lo : v + dim;
    if (v > kToEnd) v = hi;
    return std::clamp(v, lo, hi);
  };
  SliceRange r;
  r.step = step;
  if (step > 0) {
    int64_t s = norm(start, 0, dim), e = norm(end, 0, dim);
    r.start = s;
    r.length = e > s ? (e - s + step - 1) / step : 0;
  } else {
    int64_t s = norm(start, -1, dim - 1), e = norm(end, -1, dim - 1);
    r.start = s;
    r.length = s > e ? (s - e + (-step) - 1) / (-step) : 0;
  }
  return r;
}

// Reads an index tensor element, wrapping negatives once; throws naming the index when out of range.
int64_t checked_index(const HostTensor& indices, int64_t position, int64_t dim_size, int axis) {
  int64_t idx = indices.get_i64(position);
  int64_t wrapped = idx < 0 ? idx + dim_size : idx;
  KILN_CHECK(wrapped >= 0 && wrapped < dim_size, "index ", idx, " at position ",
             dims_to_string(unravel_index(position, indices.shape())), " is out of range [",
             -dim_size, ", ", dim_size, ") for axis ", axis, " of size ", dim_size);
  return wrapped;
}

void triangle(const KernelArgs& a, bool keep_lower) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  int64_t k = a.attrs.get_int("k");
  int64_t rows = x.shape()[size_t(x.rank() - 2)], cols = x.shape()[size_t(x.rank() - 1)];
  std::memset(out.raw(), 0, out.nbytes());
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t col = i % cols, row = (i / cols) % rows;
    bool keep = keep_lower ? (col - row <= k) : (col - row >= k);
    if (keep) copy_element(x, i, out, i);
  }
}

}  // namespace

void ref_Reshape(const KernelArgs& a) { copy_all(a.in[0], a.out[0]); }
void ref_Squeeze(const KernelArgs& a) { copy_all(a.in[0], a.out[0]); }
void ref_Unsqueeze(const KernelArgs& a) { copy_all(a.in[0], a.out[0]); }
void ref_Flatten(const KernelArgs& a) { copy_all(a.in[0], a.out[0]); }

void ref_Permute(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  std::vector<int> perm;
  for (int64_t p : a.attrs.get_ints("perm")) perm.push_back(normalize_axis(p, x.rank(), "perm entry"));
  std::vector<int64_t> in_coords(x.shape().size());
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> out_coords = unravel_index(i, out.shape());
    for (size_t d = 0; d < perm.size(); ++d) in_coords[size_t(perm[d])] = out_coords[d];
    copy_element(x, ravel_index(in_coords, x.shape()), out, i);
  }
}

void ref_Expand(const KernelArgs& a) {
  BroadcastIndex from(a.in[0].shape(), a.out[0].shape());
  for (int64_t i = 0; i < a.out[0].numel(); ++i) copy_element(a.in[0], from(i), a.out[0], i);
}

void ref_Slice(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  const auto& starts = a.attrs.get_ints("starts");
  const auto& ends = a.attrs.get_ints("ends");
  std::vector<int64_t> axes = a.attrs.get_ints("axes"), steps = a.attrs.get_ints("steps");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  std::vector<SliceRange> ranges(size_t(x.rank()));
  for (int d = 0; d < x.rank(); ++d) ranges[size_t(d)] = SliceRange{0, 1, x.shape()[size_t(d)]};
  for (size_t i = 0; i < starts.size(); ++i) {
    int axis = normalize_axis(axes[i], x.rank(), "slice axis");
    ranges[size_t(axis)] = normalize_slice(x.shape()[size_t(axis)], starts[i], ends[i], steps[i]);
  }
  for (int d = 0; d < x.rank(); ++d)
    KILN_CHECK(ranges[size_t(d)].length == out.shape()[size_t(d)], "slice of dim ", d, " (size ",
               x.shape()[size_t(d)], ") gives ", ranges[size_t(d)].length,
               " elements at run time, but its type promised ", out.shape()[size_t(d)],
               " (symbolic slice bounds fall outside the dim)");
  std::vector<int64_t> in_coords(x.shape().size());
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> c = unravel_index(i, out.shape());
    for (size_t d = 0; d < c.size(); ++d) in_coords[d] = ranges[d].start + c[d] * ranges[d].step;
    copy_element(x, ravel_index(in_coords, x.shape()), out, i);
  }
}

void ref_Concat(const KernelArgs& a) {
  HostTensor& out = a.out[0];
  int axis = normalize_axis(a.attrs.get_int("axis"), out.rank());
  int64_t offset = 0;  // where the current operand starts along axis
  for (const HostTensor& x : a.in) {
    for (int64_t i = 0; i < x.numel(); ++i) {
      std::vector<int64_t> c = unravel_index(i, x.shape());
      c[size_t(axis)] += offset;
      copy_element(x, i, out, ravel_index(c, out.shape()));
    }
    offset += x.shape()[size_t(axis)];
  }
}

// Negative pads crop: the output coordinate maps to input coordinate (o - pad_begin) either way.
void ref_Pad(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  const auto& pads = a.attrs.get_ints("pads");
  const std::string& mode = a.attrs.get_string("mode");
  double value = a.attrs.get_float("value");
  int rank = x.rank();
  std::vector<int64_t> in_coords(x.shape().size());
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> c = unravel_index(i, out.shape());
    bool inside = true;
    for (int d = 0; d < rank; ++d) {
      int64_t dim = x.shape()[size_t(d)];
      int64_t src = c[size_t(d)] - pads[size_t(d)];
      if (src < 0 || src >= dim) {
        if (mode == "edge") {
          KILN_CHECK(dim > 0, "edge padding of empty dim ", d);
          src = std::clamp<int64_t>(src, 0, dim - 1);
        } else if (mode == "reflect") {
          // Mirror around the first and last element without repeating them.
          if (src < 0) src = -src;
          if (src >= dim) src = 2 * (dim - 1) - src;
          KILN_CHECK(src >= 0 && src < dim, "reflect padding of dim ", d, " (size ", dim,
                     ") must be smaller than the dim");
        } else {
          inside = false;
        }
      }
      in_coords[size_t(d)] = src;
    }
    if (inside) copy_element(x, ravel_index(in_coords, x.shape()), out, i);
    else out.set_f64(i, value);
  }
}

void ref_Split(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  int axis = normalize_axis(a.attrs.get_int("axis"), x.rank());
  int64_t offset = 0;
  for (HostTensor& piece : a.out) {
    for (int64_t i = 0; i < piece.numel(); ++i) {
      std::vector<int64_t> c = unravel_index(i, piece.shape());
      c[size_t(axis)] += offset;
      copy_element(x, ravel_index(c, x.shape()), piece, i);
    }
    offset += piece.shape()[size_t(axis)];
  }
}

// out[pre..., idx..., post...] = x[pre..., indices[idx...], post...]
void ref_Gather(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  const HostTensor& indices = a.in[1];
  HostTensor& out = a.out[0];
  int axis = normalize_axis(a.attrs.get_int("axis"), x.rank());
  int index_rank = indices.rank();
  // Every index is checked, also where the output is empty (another dim of x is 0), as the
  // library kernels do: an out-of-range index is bad input whatever else is empty.
  for (int64_t p = 0; p < indices.numel(); ++p) checked_index(indices, p, x.shape()[size_t(axis)], axis);
  std::vector<int64_t> in_coords(x.shape().size()), idx_coords(indices.shape().size());
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> c = unravel_index(i, out.shape());
    for (int d = 0; d < axis; ++d) in_coords[size_t(d)] = c[size_t(d)];
    for (int d = 0; d < index_rank; ++d) idx_coords[size_t(d)] = c[size_t(axis + d)];
    for (int d = axis + 1; d < x.rank(); ++d) in_coords[size_t(d)] = c[size_t(d - 1 + index_rank)];
    int64_t position = ravel_index(idx_coords, indices.shape());
    in_coords[size_t(axis)] = checked_index(indices, position, x.shape()[size_t(axis)], axis);
    copy_element(x, ravel_index(in_coords, x.shape()), out, i);
  }
}

void ref_GatherElements(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  const HostTensor& indices = a.in[1];
  HostTensor& out = a.out[0];
  int axis = normalize_axis(a.attrs.get_int("axis"), x.rank());
  for (int d = 0; d < x.rank(); ++d)
    KILN_CHECK(d == axis || indices.shape()[size_t(d)] <= x.shape()[size_t(d)],
               "gather_elements indices dim ", d, " (", indices.shape()[size_t(d)],
               ") exceeds the data's dim (", x.shape()[size_t(d)], ")");
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> c = unravel_index(i, out.shape());
    c[size_t(axis)] = checked_index(indices, i, x.shape()[size_t(axis)], axis);
    copy_element(x, ravel_index(c, x.shape()), out, i);
  }
}

void ref_IndexSelect(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  const HostTensor& index = a.in[1];
  HostTensor& out = a.out[0];
  int axis = normalize_axis(a.attrs.get_int("axis"), x.rank());
  for (int64_t p = 0; p < index.numel(); ++p) checked_index(index, p, x.shape()[size_t(axis)], axis);  // as ref_Gather
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> c = unravel_index(i, out.shape());
    c[size_t(axis)] = checked_index(index, c[size_t(axis)], x.shape()[size_t(axis)], axis);
    copy_element(x, ravel_index(c, x.shape()), out, i);
  }
}

void ref_Tril(const KernelArgs& a) { triangle(a, true); }
void ref_Triu(const KernelArgs& a) { triangle(a, false); }

}  // namespace kiln::interp
