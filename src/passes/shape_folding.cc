// Shape-arithmetic folding: a forward walk computing known dims of small integer vectors, then
// replacing fully constant ones and re-pointing shape_of at the earliest value with that shape.
#include "passes/shape_folding.h"

#include <map>
#include <unordered_map>

#include "kiln/error.h"
#include "kiln/interp.h"
#include "passes/graph_utils.h"

namespace kiln::passes {

namespace {

using Dims = std::vector<SymInt>;

// Small integer vectors (rank 0 or 1) only: longer ones are data, not shapes.
bool is_dims_type(const TensorType& t) {
  if (!is_integer(t.dtype) || t.rank() > 1 || !t.is_static()) return false;
  return t.rank() == 0 || t.shape[0].constant() <= 64;
}

class DimsAnalysis {
 public:
  std::optional<Dims> get(const Value* v) const {
    auto it = known_.find(v);
    if (it != known_.end()) return it->second;
    const HostTensor* t = constant_tensor(v);
    if (t == nullptr || !is_dims_type(v->type)) return std::nullopt;
    Dims d;
    for (int64_t i = 0; i < t->numel(); ++i) d.push_back(SymInt(t->get_i64(i)));
    return d;
  }

  // Computes the dims n's first result holds, when they can be known.
  void visit(const Node& n) {
    const Value* out = n.outputs[0];
    if (n.outputs.size() != 1 || !is_dims_type(out->type)) return;
    std::optional<Dims> d = compute(n);
    if (d.has_value()) known_[out] = std::move(*d);
  }

 private:
  std::optional<Dims> operand(const Node& n, size_t i) const {
    if (!is_dims_type(n.inputs[i]->type)) return std::nullopt;
    return get(n.inputs[i]);
  }

  std::optional<Dims> compute(const Node& n) const {
    switch (n.op) {
      case Op::ShapeOf:
        return n.inputs[0]->type.shape;
      case Op::Cast: case Op::Reshape: case Op::Squeeze: case Op::Unsqueeze: case Op::Flatten:
        return operand(n, 0);
      case Op::Concat: {
        Dims all;
        for (size_t i = 0; i < n.inputs.size(); ++i) {
          auto d = operand(n, i);
          if (!d) return std::nullopt;
          all.insert(all.end(), d->begin(), d->end());
        }
        return all;
      }
      case Op::Gather: {
        auto d = operand(n, 0);
        const HostTensor* idx = constant_tensor(n.inputs[1]);
        if (!d || idx == nullptr || n.inputs[0]->type.rank() != 1) return std::nullopt;
        Dims picked;
        for (int64_t i = 0; i < idx->numel(); ++i) {
          int64_t j = idx->get_i64(i);
          if (j < 0) j += int64_t(d->size());
          if (j < 0 || j >= int64_t(d->size())) return std::nullopt;
          picked.push_back((*d)[size_t(j)]);
        }
        return picked;
      }
      case Op::Slice: {
        // Slice an iota with the node's own attributes: the positions it keeps.
        auto d = operand(n, 0);
        if (!d || n.inputs[0]->type.rank() != 1) return std::nullopt;
        HostTensor iota = HostTensor::zeros(DType::I64, {int64_t(d->size())});
        for (int64_t i = 0; i < iota.numel(); ++i) iota.set_i64(i, i);
        try {
          HostTensor kept = interp::run_op(Op::Slice, n.attrs, {iota})[0];
          Dims picked;
          for (int64_t i = 0; i < kept.numel(); ++i) picked.push_back((*d)[size_t(kept.get_i64(i))]);
          return picked;
        } catch (const Error&) {
          return std::nullopt;
        }
      }
      case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Maximum:
        return elementwise(n);
      case Op::ReduceProd: {
        auto d = operand(n, 0);
        if (!d || n.outputs[0]->type.rank() != 0) return std::nullopt;
        SymInt p = 1;
        for (const SymInt& x : *d) p = p * x;
        return Dims{p};
      }
      default:
        return std::nullopt;
    }
  }

  std::optional<Dims> elementwise(const Node& n) const {
    auto a = operand(n, 0), b = operand(n, 1);
    if (!a || !b) return std::nullopt;
    size_t len = std::max(a->size(), b->size());
    if ((a->size() != len && a->size() != 1) || (b->size() != len && b->size() != 1))
      return std::nullopt;
    Dims out;
    for (size_t i = 0; i < len; ++i) {
      const SymInt& x = (*a)[a->size() == 1 ? 0 : i];
      const SymInt& y = (*b)[b->size() == 1 ? 0 : i];
      switch (n.op) {
        case Op::Add: out.push_back(x + y); break;
        case Op::Sub: out.push_back(x - y); break;
        case Op::Mul: out.push_back(x * y); break;
        case Op::Maximum: out.push_back(max(x, y)); break;
        case Op::Div: {
          // Integer division truncates; it equals floordiv only for non-negative constants.
          if (!x.is_constant() || !y.is_constant() || y.constant() == 0) return std::nullopt;
          out.push_back(SymInt(x.constant() / y.constant()));
          break;
        }
        default: return std::nullopt;
      }
    }
    return out;
  }

  std::unordered_map<const Value*, Dims> known_;
};

std::optional<std::vector<int64_t>> all_constant(const Dims& d) {
  std::vector<int64_t> out;
  for (const SymInt& x : d) {
    if (!x.is_constant()) return std::nullopt;
    out.push_back(x.constant());
  }
  return out;
}

}  // namespace

bool ShapeFolding::run(Graph& g) {
  DimsAnalysis dims;
  std::map<std::string, Value*> first_with_shape;  // shape text -> earliest value with it
  auto note_shape = [&](Value* v) { first_with_shape.emplace(shape_to_string(v->type.shape), v); };
  for (Value* in : g.inputs()) note_shape(in);

  std::vector<Node*> replaced;
  bool changed = false;
  for (Node* n : g.node_list()) {
    if (n->op == Op::ShapeOf && !n->inputs[0]->type.is_static()) {
      Value* earliest = first_with_shape.at(shape_to_string(n->inputs[0]->type.shape));
      if (earliest != n->inputs[0]) {
        g.set_operand(n, 0, earliest);
        changed = true;
      }
    }
    for (Value* out : n->outputs) note_shape(out);
    dims.visit(*n);
    if (n->op == Op::Constant || n->outputs.size() != 1 || is_dead(g, n)) continue;
    Value* out = n->output();
    std::optional<Dims> known = dims.get(out);
    if (!known) continue;
    std::optional<std::vector<int64_t>> values = all_constant(*known);
    if (!values) continue;
    std::vector<int64_t> shape = out->type.static_shape();
    if (numel_of(shape) != int64_t(values->size())) continue;
    HostTensor t = HostTensor::zeros(out->type.dtype, shape);
    for (size_t i = 0; i < values->size(); ++i) t.set_i64(int64_t(i), (*values)[i]);
    InsertBefore at(g, n);
    Value* folded = g.constant(std::move(t));
    if (!replace_value(g, out, folded)) {
      g.erase_node(folded->producer);
      continue;
    }
    replaced.push_back(n);
  }
  erase_dead_from(g, replaced);
  return changed || !replaced.empty();
}

}  // namespace kiln::passes
