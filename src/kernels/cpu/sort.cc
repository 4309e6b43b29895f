// Sort and argsort along an axis on the CPU: a stable least-significant-digit radix sort of each
// line's order keys with their positions, lines spread over the OpenMP team. Why: a comparison sort
// of a 256000-token row costs n log n branchy compares; radix passes over 8-bit digits cost a few
// streaming passes, and passes whose digit is the same for the whole line are skipped (issue 23).
// Semantics are the reference kernel's (src/interp/ref_selection.cc): ascending or descending, ties
// keep the lower position first, NaN sorts as the largest value, -0 equals +0.
//
// A key is the element's bits mapped so that unsigned order is numeric order (descending: the
// complement), so a stable ascending sort of keys is the wanted order and ties stay in position
// order.
#include <algorithm>
#include <cstring>
#include <vector>

#include "interp/ref_kernels.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/sort.h"

namespace kiln::eager::detail {
namespace {

// Lines this short take an insertion sort: the radix passes' histograms cost more.
constexpr int64_t kInsertionSortLine = 48;

template <typename K>
struct Keyed {
  std::vector<K> keys, keys2;
  std::vector<uint32_t> pos, pos2;
};

// Ascending order keys (unsigned compare = numeric compare, -0 as +0, NaN above +inf).
inline uint32_t key_of(float v) { return float_sort_key(v); }
inline uint64_t key_of(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  if ((b & ~(uint64_t(1) << 63)) > 0x7ff0000000000000ull) return ~uint64_t(0);
  if (b == (uint64_t(1) << 63)) b = 0;
  return (b >> 63) ? ~b : b | (uint64_t(1) << 63);
}
template <typename H>  // Half, BFloat16: 16-bit, exponent all ones with a mantissa is NaN
inline uint16_t half_key(H h, uint16_t exp_mask) {
  uint16_t b = h.bits;
  if ((b & 0x7fffu) > exp_mask) return 0xffffu;
  if (b == 0x8000u) b = 0;
  return (b >> 15) ? uint16_t(~b) : uint16_t(b | 0x8000u);
}
inline uint16_t key_of(Half v) { return half_key(v, 0x7c00u); }
inline uint16_t key_of(BFloat16 v) { return half_key(v, 0x7f80u); }
inline uint32_t key_of(int32_t v) { return uint32_t(v) ^ 0x80000000u; }
inline uint64_t key_of(int64_t v) { return uint64_t(v) ^ (uint64_t(1) << 63); }

template <typename T>
using KeyOf = decltype(key_of(T{}));

// Sorts keys[0, n) with positions pos[0, n) stably ascending; the result ends in ks.keys / ks.pos.
template <typename K>
void radix_sort(Keyed<K>& ks, int64_t n) {
  constexpr int kDigits = int(sizeof(K));
  if (n <= kInsertionSortLine) {
    for (int64_t i = 1; i < n; ++i) {
      const K k = ks.keys[size_t(i)];
      const uint32_t p = ks.pos[size_t(i)];
      int64_t j = i;
      for (; j > 0 && ks.keys[size_t(j - 1)] > k; --j) {
        ks.keys[size_t(j)] = ks.keys[size_t(j - 1)];
        ks.pos[size_t(j)] = ks.pos[size_t(j - 1)];
      }
      ks.keys[size_t(j)] = k, ks.pos[size_t(j)] = p;
    }
    return;
  }
  // Every digit's histogram in one pass.
  uint32_t count[kDigits][256] = {};
  for (int64_t i = 0; i < n; ++i) {
    const K k = ks.keys[size_t(i)];
    for (int d = 0; d < kDigits; ++d) ++count[d][(k >> (8 * d)) & 0xff];
  }
  ks.keys2.resize(size_t(n)), ks.pos2.resize(size_t(n));
  for (int d = 0; d < kDigits; ++d) {
    const K first = ks.keys[0];
    if (count[d][(first >> (8 * d)) & 0xff] == uint32_t(n)) continue;  // one digit value: nothing moves
    uint32_t offset[256];
    uint32_t sum = 0;
    for (int v = 0; v < 256; ++v) offset[v] = sum, sum += count[d][v];
    const K* keys = ks.keys.data();
    const uint32_t* pos = ks.pos.data();
    K* keys2 = ks.keys2.data();
    uint32_t* pos2 = ks.pos2.data();
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t at = offset[(keys[i] >> (8 * d)) & 0xff]++;
      keys2[at] = keys[i], pos2[at] = pos[i];
    }
    ks.keys.swap(ks.keys2), ks.pos.swap(ks.pos2);
  }
}

// values (may be null) and indices of every line along the axis.
template <typename T>
void sort_lines(const T* x, T* values, int64_t* indices, int64_t outer, int64_t dim, int64_t inner, bool descending) {
  using K = KeyOf<T>;
  const K flip = descending ? K(~K(0)) : K(0);
  parallel_ranges(outer * inner, dim * int64_t(sizeof(K)), [&](int64_t begin, int64_t end) {
    Keyed<K> ks;
    ks.keys.resize(size_t(dim)), ks.pos.resize(size_t(dim));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t o = r / inner, i = r % inner, base = o * dim * inner + i;
      for (int64_t s = 0; s < dim; ++s) {
        ks.keys[size_t(s)] = K(key_of(x[base + s * inner]) ^ flip);
        ks.pos[size_t(s)] = uint32_t(s);
      }
      radix_sort(ks, dim);
      for (int64_t s = 0; s < dim; ++s) {
        const uint32_t p = ks.pos[size_t(s)];
        if (values) values[base + s * inner] = x[base + int64_t(p) * inner];
        indices[base + s * inner] = p;
      }
    }
  });
}

template <typename T>
void run_typed(const HostTensor& x, HostTensor* values, HostTensor& indices, int64_t outer, int64_t dim, int64_t inner,
               bool descending) {
  sort_lines(x.data<T>(), values ? values->data<T>() : nullptr, indices.data<int64_t>(), outer, dim, inner, descending);
}

Ran run_sort(const KernelArgs& a) {
  const bool with_values = a.op == Op::Sort;
  return sort_along(a.in[0], interp::normalize_axis(a.attrs.get_int("axis"), a.in[0].rank()),
                    a.attrs.get_int("descending") != 0, with_values ? &a.out[0] : nullptr, a.out[with_values ? 1 : 0]);
}

bool sort_supports(Op op, DType dtype) {
  return (op == Op::Sort || op == Op::ArgSort) &&
         (dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 || dtype == DType::BF16 ||
          dtype == DType::I32 || dtype == DType::I64);
}

}  // namespace

namespace {
template <typename K>
void sort_keys(std::vector<K>& keys, std::vector<uint32_t>& positions) {
  KILN_CHECK(keys.size() == positions.size(), "radix_sort_keys: ", keys.size(), " keys, ", positions.size(), " positions");
  Keyed<K> ks;
  ks.keys.swap(keys), ks.pos.swap(positions);
  radix_sort(ks, int64_t(ks.keys.size()));
  keys.swap(ks.keys), positions.swap(ks.pos);
}
}  // namespace

void radix_sort_keys(std::vector<uint64_t>& keys, std::vector<uint32_t>& positions) { sort_keys(keys, positions); }
void radix_sort_keys(std::vector<uint32_t>& keys, std::vector<uint32_t>& positions) { sort_keys(keys, positions); }

Ran sort_along(const HostTensor& x, int axis, bool descending, HostTensor* values, HostTensor& indices) {
  int64_t outer, dim, inner;
  interp::split_at_axis(x.shape(), axis, outer, dim, inner);
  if (dim == 0 || outer * inner == 0) return Ran::kNative;
  if (dim > int64_t(UINT32_MAX)) return Ran::kNotHandled;  // positions are 32-bit here
  switch (x.dtype()) {
    case DType::F32: run_typed<float>(x, values, indices, outer, dim, inner, descending); break;
    case DType::F64: run_typed<double>(x, values, indices, outer, dim, inner, descending); break;
    case DType::F16: run_typed<Half>(x, values, indices, outer, dim, inner, descending); break;
    case DType::BF16: run_typed<BFloat16>(x, values, indices, outer, dim, inner, descending); break;
    case DType::I32: run_typed<int32_t>(x, values, indices, outer, dim, inner, descending); break;
    case DType::I64: run_typed<int64_t>(x, values, indices, outer, dim, inner, descending); break;
    default: return Ran::kNotHandled;
  }
  return Ran::kNative;
}

const KernelFamily kSortFamily{sort_supports, run_sort};

}  // namespace kiln::eager::detail
