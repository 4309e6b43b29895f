// split -> one static slice per piece. Why: a slice is a view that fused kernels read through, so
// pieces read by generated kernels are never copied (GPT-2's q/k/v split before the head permutes;
// the GPU has no library kernel for split at all); a piece a library call needs contiguous is
// copied on its own (the view materialised), no more bytes than the split's copy.
#pragma once

#include "kiln/graph.h"

namespace kiln::lower {

// Rewrites every split of a non-string tensor into slices; returns whether the graph changed.
bool split_into_slices(Graph& g);

}  // namespace kiln::lower
