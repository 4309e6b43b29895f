// Activation recognition (see activation_recognition.h). Products are matched as multisets of
// factors (scalar constants multiplied into one scale), so every association and operand order an
// exporter writes — (x * 0.5) * A, 0.5 * (x * A), x * A * 0.5, a divide by sqrt 2 — is one pattern.
#include "passes/activation_recognition.h"

#include <cmath>
#include <optional>
#include <vector>

#include "passes/graph_utils.h"

namespace kiln::passes {

namespace {

// Equal up to the rounding of a constant stored in `dt`.
bool near(double a, double b, DType dt) {
  const double tol = dt == DType::BF16 ? 1.0 / 256 : dt == DType::F16 ? 1.0 / 2048 : 1e-6;
  return std::fabs(a - b) <= tol * std::fabs(b);
}

// For a = 1 + f(z) (either order) with f the unary op `op`: z; null otherwise.
Value* one_plus(Value* a, Op op) {
  const Node* add = a->producer;
  if (!add || add->op != Op::Add) return nullptr;
  for (int i = 0; i < 2; ++i) {
    std::optional<double> one = scalar_of(add->inputs[size_t(i)]);
    const Node* f = add->inputs[size_t(1 - i)]->producer;
    if (one && *one == 1.0 && f && f->op == op) return f->inputs[0];
  }
  return nullptr;
}

// x^3 as pow(x, 3) or x * x * x.
bool is_cube_of(const Product& w, const Value* x) {
  if (w.factors.size() == 3) return w.factors[0] == x && w.factors[1] == x && w.factors[2] == x;
  if (w.factors.size() != 1) return false;
  const Node* pw = w.factors[0]->producer;
  if (!pw || pw->op != Op::Pow || pw->inputs[0] != x) return false;
  std::optional<double> e = scalar_of(pw->inputs[1]);
  return e && *e == 3.0;
}

// sqrt(2/pi) * (x + 0.044715 * x^3), in any association: is it u for this x?
bool is_tanh_argument(Value* u, const Value* x, DType dt) {
  Product pu = product_of(u);
  if (pu.factors.size() != 1 || !near(pu.scale, std::sqrt(2.0 / M_PI), dt)) return false;
  const Node* add = pu.factors[0]->producer;
  if (!add || add->op != Op::Add) return false;
  for (int i = 0; i < 2; ++i) {
    if (add->inputs[size_t(i)] != x) continue;
    Product w = product_of(add->inputs[size_t(1 - i)]);
    if (near(w.scale, 0.044715, dt) && is_cube_of(w, x)) return true;
  }
  return false;
}

// The gelu that root (a mul) computes, as (x, approximate), or nullopt.
std::optional<std::pair<Value*, const char*>> match_gelu(Node& root) {
  const TensorType& t = root.outputs[0]->type;
  if (!is_float(t.dtype)) return std::nullopt;
  Product p = product_of(root.outputs[0]);
  if (p.factors.size() != 2 || !near(p.scale, 0.5, t.dtype)) return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    Value* x = p.factors[size_t(i)];
    Value* a = p.factors[size_t(1 - i)];
    if (!(x->type == t)) continue;
    if (Value* z = one_plus(a, Op::Erf)) {
      Product pz = product_of(z);
      if (pz.factors.size() == 1 && pz.factors[0] == x && near(pz.scale, M_SQRT1_2, t.dtype)) return {{x, "none"}};
    }
    if (Value* u = one_plus(a, Op::Tanh); u && is_tanh_argument(u, x, t.dtype)) return {{x, "tanh"}};
  }
  return std::nullopt;
}

}  // namespace

bool ActivationRecognition::run(Graph& g) {
  std::vector<Node*> replaced;
  for (Node* n : g.node_list()) {
    if (n->op != Op::Mul || n->outputs.size() != 1 || is_dead(g, n)) continue;
    std::optional<std::pair<Value*, const char*>> m = match_gelu(*n);
    if (!m) continue;
    InsertBefore at(g, n);
    Value* gelu = g.add(Op::Gelu, {m->first}, {{"approximate", std::string(m->second)}});
    if (replace_value(g, n->outputs[0], gelu)) replaced.push_back(n);
  }
  erase_dead_from(g, replaced);
  return !replaced.empty();
}

}  // namespace kiln::passes
