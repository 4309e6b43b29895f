// The CPU's full sort along an axis (sort.cc), for other kernels that end up sorting whole lines.
// Why: topk with k = the line's length (how exporters write torch.sort) is a sort, and the radix
// sort is several times faster than a selection that keeps everything.
#pragma once

#include "kernels/cpu/cpu_common.h"

namespace kiln::eager::detail {

// Sorts every line of x along `axis` stably (descending: largest first; NaN largest, -0 == +0) into
// `values` (may be null) and `indices` (i64), both of x's shape. kNotHandled for dtypes it lacks.
Ran sort_along(const HostTensor& x, int axis, bool descending, HostTensor* values, HostTensor& indices);

}  // namespace kiln::eager::detail
