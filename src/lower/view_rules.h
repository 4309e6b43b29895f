// Index rules of the movement ops that fused kernels read through instead of copying: each maps a
// coordinate of the op's output to the coordinate of its input it reads. Why: a view (reshape,
// permute, expand, slice) costs no memory traffic when its consumer computes the address.
#pragma once

#include <vector>

#include "kiln/graph.h"

namespace kiln::lower {

using Coords = std::vector<SymInt>;

// Reshape, ops whose decomposition is a reshape (squeeze, unsqueeze, flatten), and permutes that
// move only size-1 dims: same elements in the same order, so a contiguous buffer can simply be
// re-read with the new shape.
bool is_reshape_view(const Node& n);
// Every movement op with an index rule below (reshapes, permute, expand, slice of static dims).
bool is_index_view(const Node& n);
// Input coordinates of output coordinate `out` of view node n.
Coords view_input_coords(const Node& n, const Coords& out);

// Numpy broadcasting: coordinates of an operand of shape `from` read by a point `coords` of an
// op whose output has shape `to` (leading dims dropped, size-1 dims read at 0).
Coords broadcast_coords(const Coords& coords, const Shape& to, const Shape& from);

// Row-major linear index of coords in shape, and its inverse (floordiv/mod).
SymInt ravel(const Coords& coords, const Shape& shape);
Coords unravel(const SymInt& linear, const Shape& shape);

}  // namespace kiln::lower
