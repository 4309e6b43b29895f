// Decompositions named in ops.def: each rewrites one high-level node into primitives at the
// graph's insertion point and returns the replacements for its outputs (src/ir/decompositions.cc).
#pragma once

#include "kiln/graph.h"

namespace kiln {

inline constexpr DecompFn no_decomposition = nullptr;

std::vector<Value*> decompose_gelu(Graph&, const Node&);
std::vector<Value*> decompose_silu(Graph&, const Node&);
std::vector<Value*> decompose_reduce_mean(Graph&, const Node&);
std::vector<Value*> decompose_to_reshape(Graph&, const Node&);
std::vector<Value*> decompose_index_select(Graph&, const Node&);
std::vector<Value*> decompose_global_avg_pool(Graph&, const Node&);
std::vector<Value*> decompose_softmax(Graph&, const Node&);
std::vector<Value*> decompose_log_softmax(Graph&, const Node&);
std::vector<Value*> decompose_layer_norm(Graph&, const Node&);
std::vector<Value*> decompose_rms_norm(Graph&, const Node&);
std::vector<Value*> decompose_batch_norm(Graph&, const Node&);
std::vector<Value*> decompose_attention(Graph&, const Node&);

}  // namespace kiln
