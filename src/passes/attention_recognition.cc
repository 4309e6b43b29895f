// Attention recognition (see attention_recognition.h). The root is the matmul of the weights and v;
// the pattern is read upwards from it, and every node between the root and q, k, v must have no
// reader outside the pattern (else the scores would be computed anyway and nothing is gained).
#include "passes/attention_recognition.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <vector>

#include "kiln/interp.h"
#include "passes/graph_utils.h"

namespace kiln::passes {

namespace {

// v is read by these nodes alone (not returned by the graph either).
bool only_read_by(const Graph& g, const Value* v, std::initializer_list<const Node*> readers) {
  if (v->uses.empty() || g.is_output(v)) return false;
  for (const Use& u : v->uses)
    if (std::find(readers.begin(), readers.end(), u.user) == readers.end()) return false;
  return true;
}

// x * a, with a a scalar constant (any association, divisions by constants included): x and a.
// Only where x has the type of the scaled value, so a broadcast by the scalar cannot change shape.
std::optional<std::pair<Value*, double>> scaled(Value* v) {
  Product p = product_of(v);
  if (p.factors.size() != 1 || !(p.factors[0]->type == v->type)) return std::nullopt;
  return std::make_pair(p.factors[0], p.scale);
}

// The value of v when it is computed from constants alone (shape arithmetic, arange, comparisons,
// where, expand: a causal mask an exporter builds), by the reference kernels; nullopt when a leaf
// is not a constant or a tensor on the way holds more than `max_elements`.
class ConstantEvaluator {
 public:
  std::optional<HostTensor> value(const Value* v, int depth = 0) {
    if (auto it = memo_.find(v); it != memo_.end()) return it->second;
    std::optional<HostTensor> out = compute(v, depth);
    memo_[v] = out;
    return out;
  }

 private:
  static constexpr int64_t kMaxElements = int64_t(1) << 24;
  std::optional<HostTensor> compute(const Value* v, int depth) {
    const Node* n = v->producer;
    if (!n || depth > 64 || !v->type.is_tensor() || !v->type.is_static() || v->type.numel().constant() > kMaxElements)
      return std::nullopt;
    if (const HostTensor* t = constant_tensor(v)) return *t;
    const OpInfo& info = n->info();
    if (info.has(kSideEffect) || info.has(kSubgraph) || info.has(kContainer) || n->outputs.size() != 1) return std::nullopt;
    std::vector<HostTensor> operands;
    for (const Value* in : n->inputs) {
      if (!in) return std::nullopt;
      std::optional<HostTensor> t = value(in, depth + 1);
      if (!t) return std::nullopt;
      operands.push_back(std::move(*t));
    }
    return interp::run_op(n->op, n->attrs, operands).at(0);
  }
  std::map<const Value*, std::optional<HostTensor>> memo_;
};

double largest_finite(DType t) {
  switch (t) {
    case DType::F64: return std::numeric_limits<double>::max();
    case DType::F32: return std::numeric_limits<float>::max();
    case DType::F16: return 65504.0;
    case DType::BF16: return 3.3895313892515355e38;  // 0x7f7f
    default: return narrow_float_max(t);
  }
}

enum class MaskKind { kOther, kNone, kCausal };

// What a constant additive mask of scores [..., Tq, Tk] does: nothing (all zeros), exactly a causal
// mask (0 where key j <= i + Tk - Tq, -inf or at most half the dtype's lowest finite value
// elsewhere, the same in every batch), or something else.
MaskKind classify_mask(const HostTensor& m, int64_t tq, int64_t tk) {
  const std::vector<int64_t>& s = m.shape();
  const int r = m.rank();
  bool all_zero = true;
  for (int64_t i = 0; i < m.numel() && all_zero; ++i) all_zero = m.get_f64(i) == 0;
  if (all_zero) return MaskKind::kNone;
  if (r < 2 || s[size_t(r - 2)] != tq || s[size_t(r - 1)] != tk) return MaskKind::kOther;
  const double lowest = -largest_finite(m.dtype());
  bool all_masked_inf = true;
  for (int64_t e = 0; e < m.numel(); ++e) {
    const int64_t j = e % tk, i = e / tk % tq;
    const double x = m.get_f64(e);
    if (j <= i + tk - tq) {
      if (x != 0) return MaskKind::kOther;
    } else if (std::isinf(x) && x < 0) {
    } else if (x <= lowest / 2) {
      all_masked_inf = false;
    } else {
      return MaskKind::kOther;
    }
  }
  // A finite mask value is -inf only where some key of the row is kept (it then weighs exactly 0):
  // with Tq > Tk the first rows keep none, and a finite mask would give them uniform weights.
  if (!all_masked_inf && tq > tk) return MaskKind::kOther;
  return MaskKind::kCausal;
}

struct AttentionMatch {
  Value *q = nullptr, *k_transposed = nullptr, *v = nullptr, *mask = nullptr;
  double scale = 1;
  bool zero_nan_rows = false;
};

// The scores' product: matmul(q * a, kT * b) * c, each node read only on the way to `reader`.
bool match_product(const Graph& g, Value* scores, const Node* reader, AttentionMatch* m) {
  std::optional<std::pair<Value*, double>> s = scaled(scores);
  if (!s || !s->first->producer || s->first->producer->op != Op::MatMul) return false;
  const Node* mm = s->first->producer;
  if (!only_read_by(g, scores, {reader}) || mm->outputs[0]->uses.size() != 1 || g.is_output(mm->outputs[0])) return false;
  std::optional<std::pair<Value*, double>> a = scaled(mm->inputs[0]), b = scaled(mm->inputs[1]);
  if (!a || !b) return false;
  m->q = a->first;
  m->k_transposed = b->first;
  m->scale = s->second * a->second * b->second;
  return true;
}

// The attention that `root` (a matmul) computes, or nullopt.
std::optional<AttentionMatch> match_attention(const Graph& g, Node& root) {
  AttentionMatch m;
  Value* weights = root.inputs[0];
  m.v = root.inputs[1];
  Node* softmax = weights->producer;
  if (!softmax || !only_read_by(g, weights, {&root})) return std::nullopt;
  // torch's where(isnan(p), 0, p): a fully masked (NaN) row of weights becomes zeros.
  if (softmax->op == Op::Where) {
    Value* p = softmax->inputs[2];
    const Node* isnan = softmax->inputs[0]->producer;
    if (!isnan || isnan->op != Op::IsNan || isnan->inputs[0] != p || !is_splat_of(softmax->inputs[1], 0.0) ||
        !only_read_by(g, softmax->inputs[0], {softmax}) || !only_read_by(g, p, {softmax, isnan}) ||
        !(p->type == weights->type))
      return std::nullopt;
    m.zero_nan_rows = true;
    softmax = p->producer;
    if (!softmax) return std::nullopt;
  }
  if (softmax->op != Op::Softmax) return std::nullopt;
  const int rank = weights->type.rank();
  int64_t axis = softmax->attrs.get_int("axis");
  if (axis < 0) axis += rank;
  if (rank < 2 || axis != rank - 1) return std::nullopt;
  Value* scores = softmax->inputs[0];
  if (!match_product(g, scores, softmax, &m)) {
    // scores = product + mask, in either order
    Node* add = scores->producer;
    if (!add || add->op != Op::Add || !only_read_by(g, scores, {softmax})) return std::nullopt;
    bool found = false;
    for (int i = 0; i < 2 && !found; ++i)
      if (match_product(g, add->inputs[size_t(i)], add, &m)) m.mask = add->inputs[size_t(1 - i)], found = true;
    if (!found) return std::nullopt;
  }
  // [..., Tq, D] x [..., D, Tk], then [..., Tq, Tk] x [..., Tk, Dv]: equal batch dims, one float dtype.
  const TensorType &q = m.q->type, &kt = m.k_transposed->type, &v = m.v->type;
  if (!is_float(q.dtype) || kt.dtype != q.dtype || v.dtype != q.dtype || weights->type.dtype != q.dtype) return std::nullopt;
  if (q.rank() != rank || kt.rank() != rank || v.rank() != rank) return std::nullopt;
  for (int i = 0; i < rank - 2; ++i)
    if (!(q.shape[size_t(i)] == kt.shape[size_t(i)]) || !(q.shape[size_t(i)] == v.shape[size_t(i)])) return std::nullopt;
  if (!(q.shape[size_t(rank - 1)] == kt.shape[size_t(rank - 2)]) || !(kt.shape[size_t(rank - 1)] == v.shape[size_t(rank - 2)]))
    return std::nullopt;
  if (m.mask) {
    const TensorType& mt = m.mask->type;
    if (mt.dtype != q.dtype || mt.rank() > rank) return std::nullopt;
    const Shape& ws = weights->type.shape;
    for (int i = 0; i < mt.rank(); ++i) {
      const SymInt& d = mt.shape[size_t(i)];
      if (!(d == SymInt(1)) && !(d == ws[size_t(rank - mt.rank() + i)])) return std::nullopt;
    }
  }
  if (!std::isfinite(m.scale) || m.scale == 0) return std::nullopt;  // scale 0 means 1/sqrt(D) to the op
  return m;
}

}  // namespace

bool AttentionRecognition::run(Graph& g) {
  if (!native_) return false;
  ConstantEvaluator constants;
  std::vector<Node*> replaced;
  for (Node* root : g.node_list()) {
    if (root->op != Op::MatMul || root->outputs.size() != 1 || is_dead(g, root)) continue;
    std::optional<AttentionMatch> m = match_attention(g, *root);
    if (!m) continue;
    const int rank = m->q->type.rank();
    bool causal = false;
    if (m->mask && m->q->type.is_static() && m->k_transposed->type.is_static()) {
      if (std::optional<HostTensor> mask = constants.value(m->mask)) {
        const int64_t tq = m->q->type.shape[size_t(rank - 2)].constant();
        const int64_t tk = m->k_transposed->type.shape[size_t(rank - 1)].constant();
        const MaskKind kind = classify_mask(*mask, tq, tk);
        if (kind != MaskKind::kOther) m->mask = nullptr;
        causal = kind == MaskKind::kCausal;
      }
    }
    InsertBefore at(g, root);
    std::vector<int64_t> swap_last_two(static_cast<size_t>(rank), 0);
    std::iota(swap_last_two.begin(), swap_last_two.end(), int64_t(0));
    std::swap(swap_last_two[size_t(rank - 2)], swap_last_two[size_t(rank - 1)]);
    Value* k = g.add(Op::Permute, {m->k_transposed}, {{"perm", swap_last_two}});
    std::vector<Value*> operands = {m->q, k, m->v};
    if (m->mask) operands.push_back(m->mask);
    Value* attention = g.add(Op::Attention, operands,
                             {{"causal", int64_t(causal)},
                              {"scale", m->scale},
                              {"zero_nan_rows", int64_t(m->zero_nan_rows)}});
    if (replace_value(g, root->outputs[0], attention)) replaced.push_back(root);
  }
  erase_dead_from(g, replaced);
  return !replaced.empty();
}

}  // namespace kiln::passes
