// A graph cut at the nodes a device cannot run into device segments and host nodes, in order.
// Why: control flow (if, loop, scan), sequences, optionals and strings run in the interpreter on
// the host; everything between them is still a graph a device target compiles whole (its fusion,
// library calls and CUDA graphs intact), with the values crossing a cut copied between the two.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "kiln/compile.h"
#include "kiln/graph.h"

namespace kiln::runtime {

// Whether a node runs on the host when a graph is cut: a sub-graph or container op, a string
// operand or result, any value that is not a tensor, one of the 8- and 4-bit storage types, or an
// op src/runtime/op_support_cuda.def runs on the host that reads data (sort, argsort, sample).
bool runs_on_host(const Node& n);
// Whether any top-level node of `g` does (then split_at_host_nodes applies).
bool has_host_nodes(const Graph& g);

struct GraphPiece {
  // A device segment: a graph of its own whose inputs are `inputs` and outputs `outputs`, values
  // of the original graph. Constants it reads are copied into it.
  std::unique_ptr<Graph> segment;
  std::vector<const Value*> inputs, outputs;
  const Node* host = nullptr;  // or a host node of the original graph, run by the interpreter
};

// The pieces in execution order. A segment's input keeps its value's type where every dim is a
// constant or a plain symbol; a derived dim ((N + 1), a loop's trip count) becomes a fresh
// symbol, bound from the tensor the piece receives.
std::vector<GraphPiece> split_at_host_nodes(const Graph& g);

// An Executable of `g` that runs its pieces in order: each segment compiled by `compile_segment`
// (the device target), each host node by the interpreter on the values downloaded so far. Its run
// stats count host nodes as reference fallbacks (the interpreter ran them), as the CPU's do.
std::shared_ptr<Executable> compile_in_pieces(
    const Graph& g, const std::function<std::shared_ptr<Executable>(const Graph&)>& compile_segment);

}  // namespace kiln::runtime
