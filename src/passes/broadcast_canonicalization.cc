// Broadcast canonicalization: splats to scalars, then rank alignment, per elementwise node.
#include "passes/broadcast_canonicalization.h"

#include <cstring>

#include "kiln/error.h"
#include "passes/graph_utils.h"

namespace kiln::passes {

namespace {

// The rank-0 tensor holding a splat operand's value, bit for bit; nullopt when v is no splat.
std::optional<HostTensor> splat_as_scalar(const Value* v) {
  if (v->type.rank() == 0 || !splat_value(v).has_value()) return std::nullopt;
  HostTensor s = HostTensor::empty(v->type.dtype, {});
  if (const HostTensor* t = constant_tensor(v)) {
    std::memcpy(s.raw(), t->raw(), size_t(dtype_size(t->dtype())));
  } else {  // a full node: the value converted to the dtype as full does
    s = HostTensor::scalar(v->type.dtype, v->producer->attrs.get_float("value"));
  }
  return s;
}

// Whether n would still produce its current result types with these operand types.
bool same_result_types(const Node& n, const std::vector<TensorType>& operand_types) {
  try {
    InferCtx ctx{n.op, operand_types, n.attrs, nullptr, n.describe()};
    std::vector<TensorType> out = n.info().shape_fn(ctx);
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i] != n.outputs[i]->type) return false;
    return out.size() == n.outputs.size();
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

bool BroadcastCanonicalization::run(Graph& g) {
  bool changed = false;
  std::vector<Node*> maybe_dead;
  for (Node* n : g.node_list()) {
    if (!n->info().has(kElementwise) || n->inputs.size() < 2 || is_dead(g, n)) continue;
    int result_rank = n->output()->type.rank();
    InsertBefore at(g, n);
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      Value* operand = n->inputs[i];
      if (operand->type.device != Device::CPU) continue;
      if (std::optional<HostTensor> scalar = splat_as_scalar(operand)) {
        std::vector<TensorType> types;
        for (Value* in : n->inputs) types.push_back(in->type);
        types[i].shape.clear();
        if (same_result_types(*n, types)) {
          if (operand->producer) maybe_dead.push_back(operand->producer);
          g.set_operand(n, int(i), g.constant(std::move(*scalar)));
          changed = true;
          continue;
        }
      }
      int rank = operand->type.rank();
      if (rank == 0 || rank >= result_rank) continue;
      Shape padded(size_t(result_rank - rank), SymInt(1));
      padded.insert(padded.end(), operand->type.shape.begin(), operand->type.shape.end());
      g.set_operand(n, int(i), g.add(Op::Reshape, {operand}, {{"shape", padded}}));
      changed = true;
    }
  }
  erase_dead_from(g, maybe_dead);
  return changed;
}

}  // namespace kiln::passes
