// In-place legality: may a kernel write output param `out` into the buffer of input param `in`?
// Why: the memory planner lets an elementwise-shaped kernel overwrite an input that dies in it,
// which halves the live set of a chain of unfused kernels; this decides from the Loop IR when
// that is safe, so the planner never has to know what a kernel computes.
#pragma once

#include "lower/loop_ir.h"

namespace kiln::lower {

// True when every load of `in` and every store to `out` use the same index expression (so element
// e of `out` is only computed from element e of `in`, on the same loop iteration), and no load of
// `in` comes after a store to `out` in program order (so an element is read before it is
// overwritten). The caller checks that the buffers have the same size.
bool can_write_in_place(const LoopKernel& k, int in, int out);

}  // namespace kiln::lower
