// Decompositions of high-level ops into primitives (filled in by the decomposition work).
#include "ir/decompositions.h"

#include "kiln/error.h"

namespace kiln {

#define KILN_TODO_DECOMP(fn) \
  std::vector<Value*> fn(Graph&, const Node& n) { throw Error(str(#fn, ": not implemented for ", n.describe())); }
KILN_TODO_DECOMP(decompose_gelu)
KILN_TODO_DECOMP(decompose_silu)
KILN_TODO_DECOMP(decompose_reduce_mean)
KILN_TODO_DECOMP(decompose_to_reshape)
KILN_TODO_DECOMP(decompose_index_select)
KILN_TODO_DECOMP(decompose_global_avg_pool)
KILN_TODO_DECOMP(decompose_softmax)
KILN_TODO_DECOMP(decompose_log_softmax)
KILN_TODO_DECOMP(decompose_layer_norm)
KILN_TODO_DECOMP(decompose_rms_norm)
KILN_TODO_DECOMP(decompose_batch_norm)
KILN_TODO_DECOMP(decompose_attention)

}  // namespace kiln
