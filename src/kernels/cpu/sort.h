// The CPU's full sort along an axis (sort.cc), for other kernels that end up sorting whole lines.
// Why: topk with k = the line's length (how exporters write torch.sort) is a sort, and a top-p cut
// that keeps most of a flat row needs the row's order: the radix sort is several times faster than
// a selection that keeps everything.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_common.h"

namespace kiln::eager::detail {

// Sorts every line of x along `axis` stably (descending: largest first; NaN largest, -0 == +0) into
// `values` (may be null) and `indices` (i64), both of x's shape. kNotHandled for dtypes it lacks.
Ran sort_along(const HostTensor& x, int axis, bool descending, HostTensor* values, HostTensor& indices);

// Sorts keys ascending with their positions, stably (equal keys keep their order): a radix sort.
// `keys` and `positions` hold the same count; both are reordered.
void radix_sort_keys(std::vector<uint64_t>& keys, std::vector<uint32_t>& positions);
void radix_sort_keys(std::vector<uint32_t>& keys, std::vector<uint32_t>& positions);

// A float's ascending order key: unsigned order is numeric order, -0 as +0, NaN above +inf.
inline uint32_t float_sort_key(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  if ((b & 0x7fffffffu) > 0x7f800000u) return 0xffffffffu;  // NaN
  if (b == 0x80000000u) b = 0;                              // -0
  return (b >> 31) ? ~b : b | 0x80000000u;
}

}  // namespace kiln::eager::detail
