// Eager CPU execution of one op: infer the output types with the op's shape rule, allocate, run
// the fast per-op kernel (or the interpreter's reference kernel where no fast one exists yet), and
// record one scoreboard entry. Why: this is the one-kernel-per-op baseline Kiln is measured against.
#pragma once

#include <vector>

#include "kiln/attrs.h"
#include "kiln/host_tensor.h"
#include "kiln/ops.h"
#include "kiln/scoreboard.h"

namespace kiln::eager {

// Which kernel one run_op call used. Why: a call that fell back to the reference kernel computes
// exactly what the interpreter does, so a compiled run made only of those proves nothing about
// the compiler (onnx_conformance --compile reports such tests apart).
enum class KernelUsed {
  kFast,       // a hand-written kernel or a BLAS call
  kView,       // the output shares the input's storage
  kReference,  // no fast kernel for this op, dtype or attributes: the interpreter's reference kernel
};

// Runs op on inputs; appends one KernelRecord to `sb` when non-null; says which kernel ran in
// `used` when non-null.
std::vector<HostTensor> run_op(Op op, const Attrs& attrs, const std::vector<HostTensor>& inputs,
                               Scoreboard* sb = nullptr, KernelUsed* used = nullptr);

// True when `op` has a fast eager kernel for these input dtypes (otherwise run_op falls back to
// the reference kernel and names it "<op>(reference)" on the scoreboard).
bool has_fast_kernel(Op op, DType dtype);

// Threads used by eager kernels (OpenMP); 0 = the OpenMP default.
void set_num_threads(int n);
int num_threads();

}  // namespace kiln::eager

#include <map>
#include <string>

#include "kiln/graph.h"

namespace kiln::eager {

// Runs a whole graph eagerly: one eager::run_op per node, in order (symbolic dims and shape
// attributes bound from the inputs). Why: the one-kernel-per-op baseline for imported models.
// Shape attributes may name symbolic dims (reshape to [B, 12]); eager kernels need numbers.
Attrs bind_shape_attrs(const Attrs& attrs, const std::map<std::string, int64_t>& bindings);

std::vector<HostTensor> run_graph(const Graph& g, const std::vector<HostTensor>& inputs,
                                  Scoreboard* sb = nullptr);

}  // namespace kiln::eager
