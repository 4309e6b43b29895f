// A seeded generator of small valid graphs built from the op table (elementwise ops with
// broadcasting, reductions, views, matmul, normalisations) with matching random inputs. Why:
// fusion bugs hide in combinations no hand-written test thinks of; every compiled executor is
// compared with the interpreter on hundreds of these.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/graph.h"

namespace kiln::testing {

struct RandomGraphOptions {
  int max_nodes = 8;
  std::vector<DType> dtypes = {DType::F32, DType::F64};
  bool reductions = true;
  bool views = true;
  bool contractions = true;
  bool normalizations = true;  // softmax / layer_norm (decomposed by the compiler)
};

struct RandomGraph {
  std::unique_ptr<Graph> graph;
  std::vector<HostTensor> inputs;
  uint64_t seed = 0;
};

// Deterministic in seed: the same seed gives the same graph and inputs.
RandomGraph make_random_graph(uint64_t seed, const RandomGraphOptions& options = {});

}  // namespace kiln::testing
