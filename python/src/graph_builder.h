// The Graph IR as Python sees it: a graph to build node by node through the op table (the
// torch.compile backend lowers ATen graphs with it) and its values. Why: building through
// Graph::add_node types every node at birth, so a bad lowering fails on the node that is wrong,
// with the op table's own message, instead of later in a parser.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>

#include "kiln/graph.h"

namespace kiln::py {

namespace nb = nanobind;

// Owns a Graph; values hold a reference so the graph outlives them.
struct PyGraph {
  std::shared_ptr<Graph> graph;
};

struct PyValue {
  std::shared_ptr<Graph> graph;
  Value* value = nullptr;
};

void bind_graph(nb::module_& m);

}  // namespace kiln::py
