// Fast eager movement kernels: permute (tiled transpose), expand, slice, concat, split, gather,
// tril/triu, and storage-sharing reshapes. They copy bits, so one loop per element width serves
// every dtype. Why: movement moves as many bytes as arithmetic does, and element-at-a-time
// index arithmetic (the reference's way) is an order of magnitude slower than row copies.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_common.h"

namespace kiln::eager::detail {

bool is_storage_view(Op op) {
  return op == Op::Reshape || op == Op::Squeeze || op == Op::Unsqueeze || op == Op::Flatten;
}

namespace {

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

// Copies out[i] = in[offset(i)] where the output is walked row-major over `shape` and the input
// advances by `in_strides` per output dim. Dims that are contiguous in both merge first; rows with
// input stride 1 become memcpy, and a strided innermost dim is tiled against the next one (a
// transpose) so that both sides stay in cache.
template <typename B>
void strided_copy(const B* in, int64_t in_offset, std::vector<int64_t> shape, std::vector<int64_t> in_strides,
                  B* out) {
  // Merge dims (drop size-1 dims; merge d into d+1 when the input is contiguous across them).
  std::vector<int64_t> dims, strides;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!dims.empty() && strides.back() == in_strides[d] * shape[d]) {
      dims.back() *= shape[d];
      strides.back() = in_strides[d];
      continue;
    }
    dims.push_back(shape[d]);
    strides.push_back(in_strides[d]);
  }
  if (dims.empty()) {
    out[0] = in[in_offset];
    return;
  }
  const int64_t q = dims.back(), sq = strides.back();
  const int64_t p = dims.size() >= 2 ? dims[dims.size() - 2] : 1;
  const int64_t sp = dims.size() >= 2 ? strides[strides.size() - 2] : 0;
  std::vector<int64_t> outer_dims(dims.begin(), dims.end() - std::min<size_t>(dims.size(), 2));
  std::vector<int64_t> outer_strides(strides.begin(), strides.end() - std::min<size_t>(strides.size(), 2));
  const int64_t outer = numel_of(outer_dims);
  const int64_t plane = p * q;

  auto copy_plane = [&](const B* src, B* dst) {
    if (sq == 1) {
      for (int64_t i = 0; i < p; ++i) std::memcpy(dst + i * q, src + i * sp, size_t(q) * sizeof(B));
      return;
    }
    constexpr int64_t kTile = 32;
    for (int64_t i0 = 0; i0 < p; i0 += kTile)
      for (int64_t j0 = 0; j0 < q; j0 += kTile) {
        int64_t i1 = std::min(p, i0 + kTile), j1 = std::min(q, j0 + kTile);
        for (int64_t i = i0; i < i1; ++i)
          for (int64_t j = j0; j < j1; ++j) dst[i * q + j] = src[i * sp + j * sq];
      }
  };
  auto plane_source = [&](int64_t index) {
    int64_t offset = in_offset;
    for (size_t d = outer_dims.size(); d-- > 0;) {
      offset += (index % outer_dims[d]) * outer_strides[d];
      index /= outer_dims[d];
    }
    return in + offset;
  };
  if (outer == 1) {  // one plane: split its rows across threads
    parallel_ranges(p, q, [&](int64_t begin, int64_t end) {
      const B* src = plane_source(0) + begin * sp;
      B* dst = out + begin * q;
      if (sq == 1) {
        for (int64_t i = 0; i < end - begin; ++i) std::memcpy(dst + i * q, src + i * sp, size_t(q) * sizeof(B));
      } else {
        for (int64_t j0 = 0; j0 < q; j0 += 32)
          for (int64_t i = 0; i < end - begin; ++i)
            for (int64_t j = j0; j < std::min(q, j0 + 32); ++j) dst[i * q + j] = src[i * sp + j * sq];
      }
    });
    return;
  }
  parallel_ranges(outer, plane, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) copy_plane(plane_source(o), out + o * plane);
  });
}

template <typename Fn> Ran with_bits(DType dtype, Fn fn) {
  dispatch_bits(dtype, [&](auto tag) { fn(tag); });
  return Ran::kNative;
}

Ran run_permute(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  const auto& perm = a.attrs.get_ints("perm");
  std::vector<int64_t> in_strides = row_major_strides(x.shape()), strides(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    int64_t axis = perm[d] < 0 ? perm[d] + x.rank() : perm[d];
    strides[d] = in_strides[size_t(axis)];
  }
  if (x.numel() == 0) return Ran::kNative;
  return with_bits(x.dtype(), [&](auto tag) {
    using B = decltype(tag);
    strided_copy(static_cast<const B*>(x.raw()), 0, a.out[0].shape(), strides, static_cast<B*>(a.out[0].raw()));
  });
}

Ran run_expand(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  if (out.numel() == 0) return Ran::kNative;
  // Broadcast dims read with stride 0.
  std::vector<int64_t> strides(size_t(out.rank()), 0), in_strides = row_major_strides(x.shape());
  int offset = out.rank() - x.rank();
  for (int d = 0; d < x.rank(); ++d)
    strides[size_t(offset + d)] = x.shape()[size_t(d)] == 1 ? 0 : in_strides[size_t(d)];
  return with_bits(x.dtype(), [&](auto tag) {
    using B = decltype(tag);
    strided_copy(static_cast<const B*>(x.raw()), 0, out.shape(), strides, static_cast<B*>(out.raw()));
  });
}

// Slice bounds at or beyond this mean "to the end" (the rule in shape_rules_movement.cc).
constexpr int64_t kToEnd = int64_t(1) << 40;

// First index of a python slice of a dim of size `dim` (its length is the output's dim).
int64_t slice_start(int64_t dim, int64_t start, int64_t step) {
  int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? dim : dim - 1;
  if (start < 0) start = start < -kToEnd ? lo : start + dim;
  if (start > kToEnd) start = hi;
  return std::clamp(start, lo, hi);
}

Ran run_slice(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  if (out.numel() == 0) return Ran::kNative;
  const auto& starts = a.attrs.get_ints("starts");
  const auto& axes_attr = a.attrs.get_ints("axes");
  const auto& steps_attr = a.attrs.get_ints("steps");
  std::vector<int64_t> in_strides = row_major_strides(x.shape()), strides = in_strides;
  int64_t offset = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axes_attr.empty() ? int64_t(i) : axes_attr[i];
    if (axis < 0) axis += x.rank();
    int64_t step = steps_attr.empty() ? 1 : steps_attr[i];
    int64_t dim = x.shape()[size_t(axis)];
    offset += slice_start(dim, starts[i], step) * in_strides[size_t(axis)];
    strides[size_t(axis)] = step * in_strides[size_t(axis)];
  }
  return with_bits(x.dtype(), [&](auto tag) {
    using B = decltype(tag);
    strided_copy(static_cast<const B*>(x.raw()), offset, out.shape(), strides, static_cast<B*>(out.raw()));
  });
}

// Concat and split both move [outer, len_i * inner] blocks between one big tensor and pieces.
struct AxisBlocks {
  int64_t outer = 1, inner = 1;
};
AxisBlocks blocks_around(const std::vector<int64_t>& shape, int axis) {
  AxisBlocks b;
  for (int d = 0; d < axis; ++d) b.outer *= shape[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < shape.size(); ++d) b.inner *= shape[d];
  return b;
}

// Copies piece k's row o between the whole tensor and the piece, in either direction.
void move_pieces(uint8_t* whole, std::vector<uint8_t*> pieces, const std::vector<int64_t>& piece_len,
                 int64_t total_len, AxisBlocks b, size_t elem, bool into_whole) {
  std::vector<int64_t> start(piece_len.size(), 0);
  for (size_t k = 1; k < piece_len.size(); ++k) start[k] = start[k - 1] + piece_len[k - 1];
  parallel_ranges(b.outer, total_len * b.inner, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o)
      for (size_t k = 0; k < pieces.size(); ++k) {
        size_t bytes = size_t(piece_len[k] * b.inner) * elem;
        uint8_t* w = whole + size_t((o * total_len + start[k]) * b.inner) * elem;
        uint8_t* p = pieces[k] + size_t(o) * bytes;
        if (bytes == 0) continue;
        if (into_whole) std::memcpy(w, p, bytes);
        else std::memcpy(p, w, bytes);
      }
  });
}

Ran run_concat(const KernelArgs& a) {
  HostTensor& out = a.out[0];
  int64_t axis = a.attrs.get_int("axis");
  if (axis < 0) axis += out.rank();
  std::vector<uint8_t*> pieces;
  std::vector<int64_t> lens;
  for (const HostTensor& t : a.in) {
    pieces.push_back(const_cast<uint8_t*>(static_cast<const uint8_t*>(t.raw())));  // read only
    lens.push_back(t.shape()[size_t(axis)]);
  }
  if (out.numel() == 0) return Ran::kNative;
  move_pieces(static_cast<uint8_t*>(out.raw()), pieces, lens, out.shape()[size_t(axis)],
              blocks_around(out.shape(), int(axis)), size_t(dtype_size(out.dtype())), true);
  return Ran::kNative;
}

Ran run_split(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  int64_t axis = a.attrs.get_int("axis");
  if (axis < 0) axis += x.rank();
  std::vector<uint8_t*> pieces;
  std::vector<int64_t> lens;
  for (HostTensor& t : a.out) {
    pieces.push_back(static_cast<uint8_t*>(t.raw()));
    lens.push_back(t.shape()[size_t(axis)]);
  }
  if (x.numel() == 0) return Ran::kNative;
  move_pieces(const_cast<uint8_t*>(static_cast<const uint8_t*>(x.raw())), pieces, lens,
              x.shape()[size_t(axis)], blocks_around(x.shape(), int(axis)), size_t(dtype_size(x.dtype())),
              false);
  return Ran::kNative;
}

// gather: out[outer, idx..., inner] = x[outer, indices[idx...], inner], negative indices wrap once.
Ran run_gather(const KernelArgs& a) {
  const HostTensor &x = a.in[0], &indices = a.in[1];
  if (!is_integer(indices.dtype())) return Ran::kNotHandled;
  int64_t axis = a.attrs.get_int("axis");
  if (axis < 0) axis += x.rank();
  const int64_t dim = x.shape()[size_t(axis)];
  std::vector<int64_t> index(size_t(indices.numel()));
  for (int64_t i = 0; i < indices.numel(); ++i) {
    int64_t idx = indices.get_i64(i);
    int64_t wrapped = idx < 0 ? idx + dim : idx;
    KILN_CHECK(wrapped >= 0 && wrapped < dim, "index ", idx, " at position ", i, " of the indices is out of range [",
               -dim, ", ", dim, ") for axis ", axis, " of size ", dim);
    index[size_t(i)] = wrapped;
  }
  if (a.out[0].numel() == 0) return Ran::kNative;
  AxisBlocks b = blocks_around(x.shape(), int(axis));
  const size_t row_bytes = size_t(b.inner) * size_t(dtype_size(x.dtype()));
  const auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(a.out[0].raw());
  const int64_t n = int64_t(index.size());
  parallel_ranges(b.outer * n, b.inner, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t o = t / n, k = t % n;
      std::memcpy(dst + size_t(t) * row_bytes, src + size_t(o * dim + index[size_t(k)]) * row_bytes, row_bytes);
    }
  });
  return Ran::kNative;
}

// tril/triu over the last two dims: each matrix row keeps one contiguous column range.
Ran run_triangle(const KernelArgs& a, bool keep_lower) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  const int64_t k = a.attrs.get_int("k");
  const int64_t rows = x.shape()[size_t(x.rank() - 2)], cols = x.shape()[size_t(x.rank() - 1)];
  if (x.numel() == 0) return Ran::kNative;
  const size_t elem = size_t(dtype_size(x.dtype()));
  const auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  parallel_ranges(x.numel() / cols, cols, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t row = r % rows;
      // Lower keeps col <= row + k; upper keeps col >= row + k.
      int64_t keep_begin = keep_lower ? 0 : std::clamp(row + k, int64_t(0), cols);
      int64_t keep_end = keep_lower ? std::clamp(row + k + 1, int64_t(0), cols) : cols;
      uint8_t* d = dst + size_t(r * cols) * elem;
      const uint8_t* s = src + size_t(r * cols) * elem;
      std::memset(d, 0, size_t(cols) * elem);
      if (keep_end > keep_begin)
        std::memcpy(d + size_t(keep_begin) * elem, s + size_t(keep_begin) * elem, size_t(keep_end - keep_begin) * elem);
    }
  });
  return Ran::kNative;
}

Ran run_movement(const KernelArgs& a) {
  switch (a.op) {
    case Op::Permute: return run_permute(a);
    case Op::Expand: return run_expand(a);
    case Op::Slice: return run_slice(a);
    case Op::Concat: return run_concat(a);
    case Op::Split: return run_split(a);
    case Op::Gather: return run_gather(a);
    case Op::Tril: return run_triangle(a, true);
    case Op::Triu: return run_triangle(a, false);
    default:
      if (is_storage_view(a.op)) {  // run_op shares storage instead; a copy is still correct
        if (a.in[0].nbytes()) std::memcpy(a.out[0].raw(), a.in[0].raw(), a.in[0].nbytes());
        return Ran::kNative;
      }
      return Ran::kNotHandled;
  }
}

bool movement_supports(Op op, DType) {
  switch (op) {
    case Op::Permute: case Op::Expand: case Op::Slice: case Op::Concat: case Op::Split:
    case Op::Gather: case Op::Tril: case Op::Triu:
      return true;
    default: return is_storage_view(op);
  }
}

}  // namespace

const KernelFamily kMovementFamily{movement_supports, run_movement};

}  // namespace kiln::eager::detail
