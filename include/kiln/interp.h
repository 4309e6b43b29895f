// The reference interpreter: runs any graph on the CPU with one obviously-correct kernel per op
// (float64 math, float64 accumulation). Why: it is the oracle every other executor is tested
// against, so it favours clarity over speed.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/graph.h"
#include "kiln/host_tensor.h"

namespace kiln::interp {

// Binds symbolic dims from the concrete input shapes, checks the graph's guards, runs every node
// and returns the graph outputs. Throws kiln::Error naming the input/dim/guard that does not fit.
std::vector<HostTensor> run(const Graph& g, const std::vector<HostTensor>& inputs);

// Binds every symbol appearing in the graph inputs' shapes; throws on a mismatch.
std::map<std::string, int64_t> bind_symbols(const Graph& g, const std::vector<HostTensor>& inputs);

// Runs one op on concrete tensors (types inferred with the op's shape rule). Used by eager-mode
// fallbacks and constant folding.
std::vector<HostTensor> run_op(Op op, const Attrs& attrs, const std::vector<HostTensor>& inputs);

// Runs one node of a graph on concrete operands, its output types evaluated with `bindings` (the
// compiled executable's host steps: control flow and containers).
std::vector<HostTensor> run_node(const Node& node, const std::vector<HostTensor>& inputs,
                                 const std::map<std::string, int64_t>& bindings);
// Tensors of the node's output types evaluated with `bindings` (containers: empty placeholders).
std::vector<HostTensor> allocate_outputs(const Node& node, const std::map<std::string, int64_t>& bindings);
void check_results(const Node& node, const std::vector<HostTensor>& out);

// The reference kernel of one op: `out` is pre-allocated with the node's evaluated output types.
struct KernelArgs {
  Op op;
  const Attrs& attrs;
  const std::vector<HostTensor>& in;
  std::vector<HostTensor>& out;
};
void run_reference_kernel(const KernelArgs& args);

}  // namespace kiln::interp
