// Helpers shared by the passes.
#include "passes/graph_utils.h"

#include <cmath>
#include <cstring>
#include <unordered_set>

namespace kiln::passes {

const HostTensor* constant_tensor(const Value* v) {
  if (v->producer == nullptr || v->producer->op != Op::Constant) return nullptr;
  return &v->producer->attrs.get_tensor("value");
}

std::optional<double> splat_value(const Value* v) {
  if (v->producer != nullptr && v->producer->op == Op::Full) {
    double x = v->producer->attrs.get_float("value");
    HostTensor probe = HostTensor::scalar(v->type.dtype, x);  // the value as stored in dtype
    return probe.get_f64(0);
  }
  const HostTensor* t = constant_tensor(v);
  if (t == nullptr || t->numel() == 0 || t->dtype() == DType::Str) return std::nullopt;
  const auto* bytes = static_cast<const uint8_t*>(t->raw());
  size_t size = size_t(dtype_size(t->dtype()));
  for (int64_t i = 1; i < t->numel(); ++i)
    if (std::memcmp(bytes, bytes + size_t(i) * size, size) != 0) return std::nullopt;
  return t->get_f64(0);
}

bool is_splat_of(const Value* v, double x) {
  std::optional<double> s = splat_value(v);
  if (!s.has_value()) return false;
  if (std::isnan(x)) return std::isnan(*s);
  return *s == x && std::signbit(*s) == std::signbit(x);
}

std::optional<double> scalar_of(const Value* v) {
  if (!v->type.is_static() || v->type.numel().constant() != 1) return std::nullopt;
  return splat_value(v);
}

namespace {
void flatten_product(Value* v, Product* p, int depth) {
  const Node* n = v->producer;
  if (std::optional<double> c = scalar_of(v)) {
    p->scale *= *c;
  } else if (n && depth < 4 && n->op == Op::Mul) {
    flatten_product(n->inputs[0], p, depth + 1);
    flatten_product(n->inputs[1], p, depth + 1);
  } else if (n && depth < 4 && n->op == Op::Div && scalar_of(n->inputs[1]) && *scalar_of(n->inputs[1]) != 0) {
    p->scale /= *scalar_of(n->inputs[1]);
    flatten_product(n->inputs[0], p, depth + 1);
  } else {
    p->factors.push_back(v);
  }
}
}  // namespace

Product product_of(Value* v) {
  Product p;
  flatten_product(v, &p, 0);
  return p;
}

bool replace_value(Graph& g, Value* from, Value* to) {
  if (from == to || from->type != to->type) return false;
  g.replace_all_uses(from, to);
  return true;
}

bool is_dead(const Graph& g, const Node* n) {
  if (n->info().has(kSideEffect)) return false;
  for (const Value* out : n->outputs)
    if (!out->uses.empty() || g.is_output(out)) return false;
  return true;
}

int erase_dead_from(Graph& g, const std::vector<Node*>& candidates) {
  std::unordered_set<const Node*> erased;
  std::vector<Node*> work(candidates.rbegin(), candidates.rend());
  int count = 0;
  while (!work.empty()) {
    Node* n = work.back();
    work.pop_back();
    if (erased.count(n) || !is_dead(g, n)) continue;
    std::vector<Node*> producers;
    for (Value* in : n->inputs)
      if (in->producer != nullptr) producers.push_back(in->producer);
    g.erase_node(n);
    erased.insert(n);
    ++count;
    work.insert(work.end(), producers.begin(), producers.end());
  }
  return count;
}

std::optional<std::vector<int64_t>> static_dims(const Shape& s) {
  std::vector<int64_t> dims;
  for (const SymInt& d : s) {
    if (!d.is_constant()) return std::nullopt;
    dims.push_back(d.constant());
  }
  return dims;
}

}  // namespace kiln::passes
