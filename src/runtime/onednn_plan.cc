// Planning oneDNN convs and matmuls and their folded epilogues (see onednn_plan.h).
#include "runtime/onednn_plan.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <set>

#include "kiln/error.h"

namespace kiln::runtime {

namespace {

using eager::onednn::PostOp;

std::optional<double> scalar_constant(const Value* v) {
  const Node* n = v->producer;
  if (!n || n->op != Op::Constant || !v->type.is_static() || v->type.numel().constant() != 1) return std::nullopt;
  return n->attrs.get_tensor("value").get_f64(0);
}

// A value's own contiguous bytes: a buffer, or a reshape of one with the same element count.
const Value* contiguous_storage(const lower::Program& p, const Value* v) {
  const Value* root = p.schedule.storage_of(v);
  if (!root || !p.slots.count(root) || !root->type.is_static() || !v->type.is_static()) return nullptr;
  if (root->type.numel().constant() != v->type.numel().constant() || root->type.dtype != v->type.dtype) return nullptr;
  const lower::Residence r = p.schedule.residence_of(v);
  if (r != lower::Residence::kBuffer && r != lower::Residence::kAlias) return nullptr;
  return root;
}

// Whether an operand is one value per output channel (conv) or per output column (matmul).
using BroadcastTest = std::function<bool(const Value*)>;

// [C], [C,1,1] or [1,C,1,1] (any leading 1s): one value per output channel of an NCHW conv.
bool is_per_channel(const Value* x, int64_t channels) {
  const Shape& s = x->type.shape;
  if (s.size() < 1 || s.size() > 4 || !x->type.is_static()) return false;
  // Aligned to the NCHW output from the right: the channel is dim 1 of 4.
  const size_t offset = 4 - s.size();
  if (offset > 1) return false;  // [C] or [1, 1] broadcast along W, not channels
  for (size_t i = 0; i < s.size(); ++i) {
    int64_t want = (offset + i == 1) ? channels : 1;
    if (s[i].constant() != want) return false;
  }
  return true;
}

// [N] or [1, ..., 1, N] (no more dims than the output): one value per column of a matmul's output.
bool is_per_column(const Value* x, const Value* y) {
  const Shape& s = x->type.shape;
  if (s.empty() || s.size() > y->type.shape.size() || !x->type.is_static()) return false;
  for (size_t i = 0; i + 1 < s.size(); ++i)
    if (s[i].constant() != 1) return false;
  return s.back().constant() == y->type.shape.back().constant();
}

bool unary_post_op(const Node& n, PostOp* op) {
  switch (n.op) {
    case Op::Relu: *op = {PostOp::kRelu}; return true;
    case Op::Sigmoid: *op = {PostOp::kLogistic}; return true;
    case Op::Tanh: *op = {PostOp::kTanh}; return true;
    case Op::Exp: *op = {PostOp::kExp}; return true;
    case Op::Abs: *op = {PostOp::kAbs}; return true;
    case Op::Sqrt: *op = {PostOp::kSqrt}; return true;
    case Op::Neg: *op = {PostOp::kLinear, -1.0f, 0.0f}; return true;
    case Op::Clamp:
      *op = {PostOp::kClip, float(n.attrs.get_float("min")), float(n.attrs.get_float("max"))};
      return true;
    case Op::Gelu:
      *op = {n.attrs.get_string("approximate") == "tanh" ? PostOp::kGeluTanh : PostOp::kGeluErf};
      return true;
    default: return false;
  }
}

// cur OP c for a scalar c, as oneDNN's linear / clip (x/c is not x*(1/c): not folded).
bool scalar_post_op(Op op, bool cur_first, double c, PostOp* out) {
  const float f = float(c);
  switch (op) {
    case Op::Add: *out = {PostOp::kLinear, 1.0f, f}; return true;
    case Op::Sub: *out = cur_first ? PostOp{PostOp::kLinear, 1.0f, -f} : PostOp{PostOp::kLinear, -1.0f, f}; return true;
    case Op::Mul: *out = {PostOp::kLinear, f, 0.0f}; return true;
    case Op::Maximum: *out = {PostOp::kClip, f, INFINITY}; return true;
    case Op::Minimum: *out = {PostOp::kClip, -INFINITY, f}; return true;
    default: return false;
  }
}

bool channel_post_op(Op op, PostOp* out) {
  switch (op) {
    case Op::Add: *out = {PostOp::kBinaryAdd}; return true;
    case Op::Sub: *out = {PostOp::kBinarySub}; return true;
    case Op::Mul: *out = {PostOp::kBinaryMul}; return true;
    case Op::Div: *out = {PostOp::kBinaryDiv}; return true;
    case Op::Maximum: *out = {PostOp::kBinaryMax}; return true;
    case Op::Minimum: *out = {PostOp::kBinaryMin}; return true;
    default: return false;
  }
}

bool commutes(Op op) { return op == Op::Add || op == Op::Mul || op == Op::Maximum || op == Op::Minimum; }

// Equal up to the rounding of a constant stored in `dt` (bf16 keeps 8 significant bits: 1/6 is
// 0.16699 there, and means 1/6).
bool near(float a, double b, DType dt) {
  const double tol = dt == DType::BF16 ? 1.0 / 256 : dt == DType::F16 ? 1.0 / 2048 : 1e-6;
  return std::fabs(double(a) - b) <= tol * std::max(1.0, std::fabs(b));
}

// x * g(x), where `tail` are the post-ops that computed g from x: silu (g = sigmoid) or hardswish
// (g = clip(x/6 + 1/2, 0, 1), as the ONNX importer writes it).
std::optional<PostOp> self_product(const std::vector<PostOp>& tail, DType dt) {
  if (tail.size() == 1 && tail[0].kind == PostOp::kLogistic) return PostOp{PostOp::kSwish, 1.0f, 0.0f};
  if (tail.empty() || tail.back().kind != PostOp::kClip || tail.back().alpha != 0 || tail.back().beta != 1)
    return std::nullopt;
  double a = 1, b = 0;  // compose the linears before the clip
  for (size_t i = 0; i + 1 < tail.size(); ++i) {
    if (tail[i].kind != PostOp::kLinear) return std::nullopt;
    a = a * tail[i].alpha;
    b = b * tail[i].alpha + tail[i].beta;
  }
  if (near(float(a), 1.0 / 6.0, dt) && near(float(b), 0.5, dt)) return PostOp{PostOp::kHardSwish};
  return std::nullopt;
}

// Merges consecutive linear post-ops into one, then checks that no eltwise algorithm appears twice
// with different parameters. Why: oneDNN 2.6's brgemm kernels apply the first instance's alpha
// and beta to every later post-op of the same algorithm (linear(1/6) then linear(+0.5) computed
// x/36: hardsigmoid after MobileNetV3's squeeze-excite conv was wrong), so such chains are not
// folded. Binary and sum post-ops are not affected.
bool canonical_post_ops(std::vector<PostOp>* ops) {
  std::vector<PostOp> merged;
  for (const PostOp& op : *ops) {
    if (op.kind == PostOp::kLinear && !merged.empty() && merged.back().kind == PostOp::kLinear) {
      PostOp& prev = merged.back();  // a2 * (a1 x + b1) + b2
      prev = {PostOp::kLinear, op.alpha * prev.alpha, op.alpha * prev.beta + op.beta};
    } else {
      merged.push_back(op);
    }
  }
  for (size_t i = 0; i < merged.size(); ++i)
    for (size_t j = i + 1; j < merged.size(); ++j)
      if (!merged[i].is_binary() && merged[i].kind != PostOp::kSum && merged[i].kind == merged[j].kind &&
          (merged[i].alpha != merged[j].alpha || merged[i].beta != merged[j].beta))
        return false;
  *ops = merged;
  return true;
}

// The kernel step right after the conv or matmul, when it is exactly an elementwise tail oneDNN
// can apply; `broadcast` tells the operands a binary post-op can read.
bool match_epilogue(const lower::Program& p, size_t prim_step, const BroadcastTest& broadcast, OnednnStepPlan* plan,
                    std::string* why) {
  const Node& prim = *p.steps[prim_step].node;
  const Value* y = prim.outputs[0];
  const size_t k = prim_step + 1;
  if (k >= p.steps.size() || p.steps[k].library) return *why = "no kernel follows", false;
  if (p.graph->is_output(y)) return *why = "its output is a graph output", false;
  const lower::FusionGroup& grp = p.schedule.groups[k];
  if (grp.outputs.size() != 1) return *why = "the next kernel has several outputs", false;
  std::set<const Node*> members(grp.nodes.begin(), grp.nodes.end());
  for (const Use& u : y->uses)
    if (!members.count(u.user)) return *why = "its output has other readers", false;
  std::vector<const Value*> chain{y};
  std::vector<size_t> post_ops_at{0};  // post_ops.size() when chain[i] was produced
  std::vector<PostOp> ops;
  std::vector<const Value*> operands;
  const Value* sum = nullptr;
  auto chain_index = [&](const Value* v) -> int {
    auto it = std::find(chain.begin(), chain.end(), v);
    return it == chain.end() ? -1 : int(it - chain.begin());
  };
  for (const Node* n : grp.nodes) {
    if (n->op == Op::Constant) continue;
    if (n->outputs.size() != 1 || !n->info().has(kElementwise)) return *why = str(n->describe(), " is not elementwise"), false;
    const Value* out = n->outputs[0];
    if (out->type.dtype != y->type.dtype || !(out->type.shape == y->type.shape))
      return *why = str(n->describe(), " changes the shape or dtype"), false;
    const Value* cur = chain.back();
    PostOp op{};
    if (n->inputs.size() == 1 && n->inputs[0] == cur && unary_post_op(*n, &op)) {
      ops.push_back(op);
    } else if (n->inputs.size() == 2) {
      const int ia = chain_index(n->inputs[0]), ib = chain_index(n->inputs[1]);
      const bool cur_first = n->inputs[0] == cur;
      const Value* other = cur_first ? n->inputs[1] : n->inputs[0];
      if ((ia >= 0) + (ib >= 0) == 2 && n->op == Op::Mul && (n->inputs[0] == cur || n->inputs[1] == cur) &&
          !(n->inputs[0] == n->inputs[1])) {
        const int e = n->inputs[0] == cur ? ib : ia;  // x in x * g(x)
        std::vector<PostOp> tail(ops.begin() + long(post_ops_at[size_t(e)]), ops.end());
        std::optional<PostOp> fused = self_product(tail, y->type.dtype);
        if (!fused) return *why = str(n->describe(), ": a product of two tail values oneDNN has no form for"), false;
        // g's chain values must be read by nothing but the chain.
        ops.resize(post_ops_at[size_t(e)]);
        ops.push_back(*fused);
      } else if ((ia == int(chain.size()) - 1) != (ib == int(chain.size()) - 1) && chain_index(other) < 0) {
        if (std::optional<double> c = scalar_constant(other); c && scalar_post_op(n->op, cur_first, *c, &op)) {
          ops.push_back(op);
        } else if (broadcast(other) && (cur_first || commutes(n->op)) && channel_post_op(n->op, &op) &&
                   contiguous_storage(p, other)) {
          ops.push_back(op);
          operands.push_back(other);
        } else if ((n->op == Op::Add || (n->op == Op::Sub && cur_first)) && !sum && other->type.dtype == y->type.dtype &&
                   other->type.shape == y->type.shape && contiguous_storage(p, other)) {
          ops.push_back({PostOp::kSum, n->op == Op::Add ? 1.0f : -1.0f});
          sum = other;
        } else {
          return *why = str(n->describe(), ": no post-op for this operand"), false;
        }
      } else {
        return *why = str(n->describe(), " does not read the tail's last value once"), false;
      }
    } else {
      return *why = str(n->describe(), " has no oneDNN post-op"), false;
    }
    chain.push_back(out);
    post_ops_at.push_back(ops.size());
  }
  if (chain.back() != grp.outputs[0]) return *why = "the kernel's output is not the tail's end", false;
  if (!canonical_post_ops(&ops)) return *why = "an activation repeats with other parameters (oneDNN 2.6 mixes them up)", false;
  // Every value of the tail but the last is read inside the kernel only.
  for (size_t i = 1; i + 1 < chain.size(); ++i)
    for (const Use& u : chain[i]->uses)
      if (!members.count(u.user) || p.graph->is_output(chain[i])) return *why = "a tail value is read elsewhere", false;
  plan->folded_step = int(k);
  plan->out = chain.back();
  plan->post_ops = ops;
  plan->broadcast_operands = operands;
  plan->sum_operand = sum;
  return true;
}

std::optional<eager::onednn::ConvSpec> conv_spec_of(const Node& conv) {
  const Value* x = conv.inputs[0];
  const Value* w = conv.inputs[1];
  const Value* y = conv.outputs[0];
  if (!x->type.is_static() || !w->type.is_static() || !y->type.is_static()) return std::nullopt;
  if (x->type.shape.size() != 4 || w->type.shape.size() != 4) return std::nullopt;
  if (conv.attrs.get_string("layout") != "NCHW") return std::nullopt;  // channels-last: the CUDA target's form
  eager::onednn::ConvSpec s;
  s.dtype = y->type.dtype;
  if (x->type.dtype != s.dtype || w->type.dtype != s.dtype) return std::nullopt;
  for (int i = 0; i < 4; ++i) {
    s.x[i] = x->type.shape[size_t(i)].constant();
    s.w[i] = w->type.shape[size_t(i)].constant();
    s.y[i] = y->type.shape[size_t(i)].constant();
  }
  const auto& st = conv.attrs.get_ints("strides");
  const auto& pd = conv.attrs.get_ints("pads");
  const auto& dl = conv.attrs.get_ints("dilations");
  for (int i = 0; i < 2; ++i) s.strides[i] = st[size_t(i)], s.dilations[i] = dl[size_t(i)];
  for (int i = 0; i < 4; ++i) s.pads[i] = pd[size_t(i)];
  s.groups = conv.attrs.get_int("groups");
  s.has_bias = conv.inputs.size() > 2 && conv.inputs[2] != nullptr;
  if (s.has_bias && (conv.inputs[2]->type.dtype != s.dtype || !conv.inputs[2]->type.is_static() ||
                     conv.inputs[2]->type.numel().constant() != s.y[1]))
    return std::nullopt;
  if (!eager::onednn::supports(s)) return std::nullopt;
  return s;
}

// A [.., m, k] @ [.., k, n] product oneDNN runs: B shared by every batch entry (its batch dims all
// 1, A's folded into m), or A and B with the same batch dims. Other broadcasts stay on OpenBLAS.
std::optional<eager::onednn::MatmulSpec> matmul_spec_of(const Node& mm) {
  const Value* a = mm.inputs[0];
  const Value* b = mm.inputs[1];
  const Value* y = mm.outputs[0];
  if (!a->type.is_static() || !b->type.is_static() || !y->type.is_static()) return std::nullopt;
  const Shape &as = a->type.shape, &bs = b->type.shape;
  if (as.size() < 2 || bs.size() < 2) return std::nullopt;
  eager::onednn::MatmulSpec s;
  s.dtype = y->type.dtype;
  if (a->type.dtype != s.dtype || b->type.dtype != s.dtype) return std::nullopt;
  s.m = as[as.size() - 2].constant();
  s.k = as.back().constant();
  s.n = bs.back().constant();
  int64_t a_batch = 1, b_batch = 1;
  for (size_t i = 0; i + 2 < as.size(); ++i) a_batch *= as[i].constant();
  for (size_t i = 0; i + 2 < bs.size(); ++i) b_batch *= bs[i].constant();
  if (b_batch == 1) {
    s.shared_b = true;
    s.batch = a_batch;
  } else if (as.size() == bs.size() && std::equal(as.begin(), as.end() - 2, bs.begin())) {
    s.shared_b = false;
    s.batch = a_batch;
  } else {
    return std::nullopt;
  }
  if (!eager::onednn::supports(s)) return std::nullopt;
  return s;
}

const Value* constant_operand(const Value* v) {
  return v->producer && v->producer->op == Op::Constant ? v : nullptr;
}

// Builds the primitive for `node` with `post_ops` (throws kiln::Error when oneDNN has none).
void prepare(const Node& node, const eager::onednn::ConvSpec* conv, const eager::onednn::MatmulSpec* mm,
             const std::vector<PostOp>& post_ops, OnednnStepPlan* plan) {
  const Value* w = node.inputs[1];
  if (conv) {
    eager::onednn::ConvSpec spec = *conv;
    spec.post_ops = post_ops;
    plan->conv = std::make_shared<eager::onednn::PreparedConv>(spec);
    if (constant_operand(w)) plan->conv->set_constant_weights(w->producer->attrs.get_tensor("value").raw());
  } else {
    eager::onednn::MatmulSpec spec = *mm;
    spec.post_ops = post_ops;
    plan->matmul = std::make_shared<eager::onednn::PreparedMatmul>(spec, constant_operand(w) != nullptr);
    if (constant_operand(w)) plan->matmul->set_constant_weights(w->producer->attrs.get_tensor("value").raw());
  }
}

// Wires blocked hand-offs (eager::onednn::BlockedIo): a conv or pool whose result only other
// planned convs and pools read — as their source, or as the residual a conv's folded sum adds —
// keeps it in oneDNN's layout when every reader's layout agrees. A chain of convs then reorders
// once at its start and once at its end instead of twice per conv.
void keep_blocked_chains(const lower::Program& p, std::map<size_t, OnednnStepPlan>& plans) {
  std::map<const Node*, size_t> primitive_at, folded_into;  // a conv/pool node / a folded kernel's node -> plan step
  for (auto& [k, plan] : plans) {
    if (!plan.blocked()) continue;
    primitive_at[p.steps[k].node] = k;
    if (plan.folded_step >= 0)
      for (const Node* n : p.schedule.groups[size_t(plan.folded_step)].nodes) folded_into[n] = k;
  }
  for (auto& [k, plan] : plans) {
    const Value* v = plan.out;
    if (!plan.blocked() || p.graph->is_output(v) || v->uses.empty()) continue;
    std::vector<std::pair<size_t, bool>> readers;  // (plan step, as residual)
    bool ok = true;
    for (const Use& u : v->uses) {
      auto c = primitive_at.find(u.user);
      if (c != primitive_at.end() && c->second > k && plans.at(c->second).concat) {
        ok = plans.at(c->second).concat->can_take_source(size_t(u.operand_index), *plan.blocked());
        readers.push_back({c->second, false});
      } else if (c != primitive_at.end() && u.operand_index == 0 && c->second > k) {
        ok = plan.blocked()->can_feed_source(*plans.at(c->second).blocked());
        readers.push_back({c->second, false});
      } else if (auto f = folded_into.find(u.user); f != folded_into.end() && f->second > k &&
                                                    plans.at(f->second).sum_operand == v) {
        ok = plan.blocked()->can_feed_residual(*plans.at(f->second).blocked());
        readers.push_back({f->second, true});
      } else {
        ok = false;
      }
      if (!ok) break;
    }
    if (!ok) continue;
    std::string to;
    bool written_in_place = false;
    for (const Use& u : v->uses) {  // a concat's sources, by operand (a value may be several)
      auto c = primitive_at.find(u.user);
      if (c == primitive_at.end() || !plans.at(c->second).concat) continue;
      eager::onednn::PreparedConcat& concat = *plans.at(c->second).concat;
      concat.take_source(size_t(u.operand_index), *plan.blocked());
      written_in_place = written_in_place || concat.writes_in_place(size_t(u.operand_index));
    }
    for (auto [q, residual] : readers) {
      OnednnStepPlan& reader = plans.at(q);
      if (reader.concat) {
        if (reader.note.find(str("from step ", k, ")")) == std::string::npos)
          reader.note += str(" (source read blocked from step ", k, ")");
        if (to.find(str(q)) == std::string::npos) to += str(to.empty() ? "" : ", ", q);
        continue;
      }
      if (residual) plan.blocked()->feed_residual(*reader.blocked());
      else plan.blocked()->feed_source(*reader.blocked());
      reader.note += str(residual ? " (residual read blocked from step " : " (source read blocked from step ", k, ")");
      to += str(to.empty() ? "" : ", ", q);
    }
    plan.blocked()->keep_output_blocked();
    plan.note += str(" (output kept blocked for step", readers.size() > 1 ? "s " : " ", to,
                     written_in_place ? ", written in place into the concat" : "", ")");
  }
}

// Ops whose result is finite when their operands are (short of overflow, outside the contract of a
// sum in any order anyway): arithmetic that cannot divide by zero, take a log or a root, or
// exponentiate without bound.
bool preserves_finite(const Node& n) {
  switch (n.op) {
    case Op::Conv2d: case Op::MatMul: case Op::Add: case Op::Sub: case Op::Mul: case Op::Neg: case Op::Abs:
    case Op::Relu: case Op::Clamp: case Op::Sigmoid: case Op::Tanh: case Op::Gelu: case Op::Erf:
    case Op::Maximum: case Op::Minimum: case Op::MaxPool2d: case Op::AvgPool2d: case Op::GlobalAvgPool:
    case Op::Softmax: case Op::LayerNorm: case Op::RmsNorm: case Op::Silu: case Op::ReduceSum: case Op::ReduceMean:
    case Op::ReduceMax: case Op::ReduceMin: case Op::Reshape: case Op::Permute: case Op::Slice: case Op::Concat:
    case Op::Where: case Op::Expand: case Op::Squeeze: case Op::Unsqueeze: case Op::Flatten: case Op::Split:
    case Op::Gather: case Op::IndexSelect: case Op::Floor: case Op::Ceil: case Op::Round:
      return true;
    case Op::Cast:  // to a float whose range holds every f32, f16 and integer value
      return n.outputs[0]->type.dtype == DType::F32 || n.outputs[0]->type.dtype == DType::F64;
    case Op::Div: {  // by a finite nonzero constant
      const Node* d = n.inputs[1]->producer;
      if (!d || d->op != Op::Constant) return false;
      const HostTensor& t = d->attrs.get_tensor("value");
      for (int64_t i = 0; i < t.numel(); ++i)
        if (t.get_f64(i) == 0 || !std::isfinite(t.get_f64(i))) return false;
      return true;
    }
    default:
      return false;
  }
}

// The values of p's graph that are finite whenever its inputs are.
std::set<const Value*> finite_with_inputs(const lower::Program& p) {
  std::set<const Value*> closed(p.graph->inputs().begin(), p.graph->inputs().end());
  for (const auto& node : p.graph->nodes()) {
    const Node& n = *node;
    bool ok;
    if (n.op == Op::Constant) {
      const HostTensor& t = n.attrs.get_tensor("value");
      ok = !t.is_tensor() || !is_float(t.dtype()) || eager::onednn::all_finite(t.raw(), t.numel(), t.dtype());
    } else {
      ok = preserves_finite(n);
      for (const Value* in : n.inputs)
        if (in && is_float(in->type.dtype) && !closed.count(in)) ok = false;
    }
    if (ok)
      for (const Value* out : n.outputs) closed.insert(out);
  }
  return closed;
}

// A max_pool2d / avg_pool2d node as oneDNN's pooling, when it computes exactly that.
std::optional<eager::onednn::PoolSpec> pool_spec_of(const Node& n) {
  const Value* x = n.inputs[0];
  const Value* y = n.outputs[0];
  if (!x->type.is_static() || !y->type.is_static() || x->type.shape.size() != 4 || x->type.dtype != y->type.dtype)
    return std::nullopt;
  eager::onednn::PoolSpec s;
  s.dtype = y->type.dtype;
  s.max = n.op == Op::MaxPool2d;
  for (int i = 0; i < 4; ++i) s.x[i] = x->type.shape[size_t(i)].constant(), s.y[i] = y->type.shape[size_t(i)].constant();
  const auto& k = n.attrs.get_ints("kernel");
  const auto& st = n.attrs.get_ints("strides");
  const auto& pd = n.attrs.get_ints("pads");
  if (k.size() != 2 || st.size() != 2 || pd.size() != 4) return std::nullopt;
  for (int d = 0; d < 2; ++d) s.kernel[d] = k[size_t(d)], s.strides[d] = st[size_t(d)], s.dilations[d] = 1;
  for (int i = 0; i < 4; ++i) s.pads[i] = pd[size_t(i)];
  if (s.max) {
    const auto& dl = n.attrs.get_ints("dilations");
    if (dl.size() != 2) return std::nullopt;
    s.dilations[0] = dl[0], s.dilations[1] = dl[1];
  } else {
    s.count_include_pad = n.attrs.get_int("count_include_pad") != 0;
  }
  if (!eager::onednn::supports(s)) return std::nullopt;
  return s;
}

// A concat of 4-D tensors along channels (axis 1) as oneDNN's concat, when every source is a
// contiguous buffer.
std::optional<eager::onednn::ConcatSpec> concat_spec_of(const lower::Program& p, const Node& n) {
  const Value* y = n.outputs[0];
  if (!y->type.is_static() || y->type.shape.size() != 4) return std::nullopt;
  int64_t axis = n.attrs.get_int("axis");
  if (axis < 0) axis += 4;
  if (axis != 1) return std::nullopt;
  eager::onednn::ConcatSpec s;
  s.dtype = y->type.dtype;
  for (int i = 0; i < 4; ++i) s.y[i] = y->type.shape[size_t(i)].constant();
  for (const Value* x : n.inputs) {
    if (!x || !x->type.is_static() || x->type.dtype != s.dtype || x->type.shape.size() != 4 || !contiguous_storage(p, x))
      return std::nullopt;
    s.x.push_back(x->type.static_shape());
  }
  if (!eager::onednn::supports(s)) return std::nullopt;
  return s;
}

// The planned conv, pool or concat whose result is `v`, if any.
const eager::onednn::BlockedIo* blocked_producer(const std::map<size_t, OnednnStepPlan>& plans, const Value* v) {
  for (const auto& [q, other] : plans)
    if (other.out == v && other.blocked()) return other.blocked();
  return nullptr;
}

// Plans step k (a pool or concat, no tail) with the primitive `make` builds into the plan; `make`
// returns oneDNN's implementation name. When oneDNN refuses, the eager kernel runs the step.
template <typename Make>
void add_layout_plan(std::map<size_t, OnednnStepPlan>& plans, size_t k, const Value* y, Make make) {
  OnednnStepPlan plan;
  try {
    plan.note = str("oneDNN ", make(plan));
  } catch (const Error&) {
    return;
  }
  plan.out = y;
  plans.emplace(k, std::move(plan));
}

}  // namespace

// Whether the convs of this program should write channel-blocked results (ConvSpec::
// channel_blocked_dst): when some channel concat joins conv results (SqueezeNet's Fire modules,
// Inception blocks), which is then no copy at all, and no conv is grouped (depthwise convs, and
// the channel shuffles around them, run slower blocked).
bool convs_want_channel_blocks(const lower::Program& p) {
  bool conv_concat = false;
  for (const auto& node : p.graph->nodes()) {
    const Node& n = *node;
    if (n.op == Op::Conv2d && n.attrs.get_int("groups") != 1) return false;
    if (n.op != Op::Concat || n.outputs[0]->type.shape.size() != 4) continue;
    const int64_t axis = n.attrs.get_int("axis");
    if (axis != 1 && axis != -3) continue;
    bool from_convs = true;
    for (const Value* x : n.inputs) {
      const Value* v = x;
      while (v->producer != nullptr && has_trait(v->producer->op, kElementwise) && v->producer->inputs.size() == 1)
        v = v->producer->inputs[0];  // through the conv's activation
      from_convs = from_convs && v->producer != nullptr && v->producer->op == Op::Conv2d;
    }
    conv_concat = conv_concat || from_convs;
  }
  return conv_concat;
}

std::map<size_t, OnednnStepPlan> plan_onednn_steps(lower::Program& p) {
  std::map<size_t, OnednnStepPlan> plans;
  const bool channel_blocks = convs_want_channel_blocks(p);
  for (size_t k = 0; k < p.steps.size(); ++k) {
    const lower::ProgramStep& step = p.steps[k];
    if (!step.library || step.host) continue;
    const Node& node = *step.node;
    std::optional<eager::onednn::ConvSpec> conv;
    std::optional<eager::onednn::MatmulSpec> mm;
    BroadcastTest broadcast;
    const Value* y = node.outputs[0];
    if (node.op == Op::Conv2d && (conv = conv_spec_of(node))) {
      conv->channel_blocked_dst = channel_blocks;
      const int64_t channels = conv->y[1];
      broadcast = [channels](const Value* x) { return is_per_channel(x, channels); };
    } else if (node.op == Op::MatMul && (mm = matmul_spec_of(node))) {
      broadcast = [y](const Value* x) { return is_per_column(x, y); };
    } else if (node.op == Op::Concat) {
      std::optional<eager::onednn::ConcatSpec> cs = concat_spec_of(p, node);
      if (!cs) continue;
      std::vector<const eager::onednn::BlockedIo*> like;
      for (const Value* x : node.inputs) like.push_back(blocked_producer(plans, x));
      add_layout_plan(plans, k, y, [&](OnednnStepPlan& plan) {
        plan.concat = std::make_shared<eager::onednn::PreparedConcat>(*cs, like);
        return plan.concat->implementation();
      });
      continue;
    } else if (node.op == Op::MaxPool2d || node.op == Op::AvgPool2d) {
      std::optional<eager::onednn::PoolSpec> ps = pool_spec_of(node);
      if (!ps) continue;
      // Laid out like the conv or pool that produces its source, so that one can hand it over.
      const eager::onednn::BlockedIo* like = blocked_producer(plans, node.inputs[0]);
      add_layout_plan(plans, k, y, [&](OnednnStepPlan& plan) {
        plan.pool = std::make_shared<eager::onednn::PreparedPool>(*ps, like);
        return plan.pool->implementation();
      });
      continue;
    } else {
      continue;
    }
    const eager::onednn::ConvSpec* cs = conv ? &*conv : nullptr;
    const eager::onednn::MatmulSpec* ms = mm ? &*mm : nullptr;
    OnednnStepPlan plan;
    std::string why;
    if (match_epilogue(p, k, broadcast, &plan, &why)) {
      try {
        prepare(node, cs, ms, plan.post_ops, &plan);
      } catch (const Error& e) {
        why = str("oneDNN refused the post-ops (", e.what(), ")");
        plan = OnednnStepPlan{};
      }
    }
    if (!plan.conv && !plan.matmul) {
      try {
        prepare(node, cs, ms, {}, &plan);
      } catch (const Error&) {
        continue;  // the eager kernel runs it
      }
      plan.out = y;
    }
    std::string ops;
    for (const PostOp& op : plan.post_ops) ops += (ops.empty() ? "" : ", ") + eager::onednn::post_op_name(op);
    plan.note = str("oneDNN ", plan.conv ? plan.conv->implementation() : plan.matmul->implementation(),
                    plan.folded_step >= 0 ? str(" + post-ops [", ops, "] (step ", plan.folded_step, " folded)")
                                          : str(" (no tail folded: ", why, ")"));
    // The folded kernel's arena output is now written at the primitive's step.
    if (plan.folded_step >= 0)
      for (size_t i = 0; i < p.arena_values.size(); ++i)
        if (p.arena_values[i] == plan.out) p.arena_lifetimes[i].first = int(k);
    plans.emplace(k, std::move(plan));
  }
  keep_blocked_chains(p, plans);
  const std::set<const Value*> closed = finite_with_inputs(p);
  for (auto& [k, plan] : plans) {
    if (!plan.checks_sources()) continue;  // pools and concats never do
    const Node& node = *p.steps[k].node;
    bool ok = closed.count(node.inputs[0]) && (!plan.sum_operand || closed.count(plan.sum_operand));
    ok = ok && closed.count(node.inputs[1]);  // the matmul's B, the conv's weights
    for (const Value* v : plan.broadcast_operands) ok = ok && closed.count(v);
    plan.sources_finite_with_inputs = ok;
  }
  return plans;
}

}  // namespace kiln::runtime
