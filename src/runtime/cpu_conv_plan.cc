// Planning oneDNN convs and their folded epilogues (see cpu_conv_plan.h).
#include "runtime/cpu_conv_plan.h"

#include <algorithm>
#include <cmath>
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

// [C], [C,1,1] or [1,C,1,1] (any leading 1s): one value per output channel.
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

bool near(float a, double b) { return std::fabs(double(a) - b) <= 1e-6 * std::max(1.0, std::fabs(b)); }

// x * g(x), where `tail` are the post-ops that computed g from x: silu (g = sigmoid) or hardswish
// (g = clip(x/6 + 1/2, 0, 1), as the ONNX importer writes it).
std::optional<PostOp> self_product(const std::vector<PostOp>& tail) {
  if (tail.size() == 1 && tail[0].kind == PostOp::kLogistic) return PostOp{PostOp::kSwish, 1.0f, 0.0f};
  if (tail.empty() || tail.back().kind != PostOp::kClip || tail.back().alpha != 0 || tail.back().beta != 1)
    return std::nullopt;
  double a = 1, b = 0;  // compose the linears before the clip
  for (size_t i = 0; i + 1 < tail.size(); ++i) {
    if (tail[i].kind != PostOp::kLinear) return std::nullopt;
    a = a * tail[i].alpha;
    b = b * tail[i].alpha + tail[i].beta;
  }
  if (near(float(a), 1.0 / 6.0) && near(float(b), 0.5)) return PostOp{PostOp::kHardSwish};
  return std::nullopt;
}

// The kernel step right after the conv, when it is exactly an elementwise tail oneDNN can apply.
bool match_epilogue(const lower::Program& p, size_t conv_step, ConvStepPlan* plan, std::string* why) {
  const Node& conv = *p.steps[conv_step].node;
  const Value* y = conv.outputs[0];
  const size_t k = conv_step + 1;
  if (k >= p.steps.size() || p.steps[k].library) return *why = "no kernel follows", false;
  if (p.graph->is_output(y)) return *why = "the conv's output is a graph output", false;
  const lower::FusionGroup& grp = p.schedule.groups[k];
  if (grp.outputs.size() != 1) return *why = "the next kernel has several outputs", false;
  std::set<const Node*> members(grp.nodes.begin(), grp.nodes.end());
  for (const Use& u : y->uses)
    if (!members.count(u.user)) return *why = "the conv's output has other readers", false;
  const int64_t channels = y->type.shape[1].constant();
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
        std::optional<PostOp> fused = self_product(tail);
        if (!fused) return *why = str(n->describe(), ": a product of two tail values oneDNN has no form for"), false;
        // g's chain values must be read by nothing but the chain.
        ops.resize(post_ops_at[size_t(e)]);
        ops.push_back(*fused);
      } else if ((ia == int(chain.size()) - 1) != (ib == int(chain.size()) - 1) && chain_index(other) < 0) {
        if (std::optional<double> c = scalar_constant(other); c && scalar_post_op(n->op, cur_first, *c, &op)) {
          ops.push_back(op);
        } else if (is_per_channel(other, channels) && (cur_first || commutes(n->op)) && channel_post_op(n->op, &op) &&
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
  // Every value of the tail but the last is read inside the kernel only.
  for (size_t i = 1; i + 1 < chain.size(); ++i)
    for (const Use& u : chain[i]->uses)
      if (!members.count(u.user) || p.graph->is_output(chain[i])) return *why = "a tail value is read elsewhere", false;
  plan->folded_step = int(k);
  plan->out = chain.back();
  plan->post_ops = ops;
  plan->channel_operands = operands;
  plan->sum_operand = sum;
  return true;
}

std::optional<eager::onednn::ConvSpec> spec_of(const Node& conv) {
  const Value* x = conv.inputs[0];
  const Value* w = conv.inputs[1];
  const Value* y = conv.outputs[0];
  if (!x->type.is_static() || !w->type.is_static() || !y->type.is_static()) return std::nullopt;
  if (x->type.shape.size() != 4 || w->type.shape.size() != 4) return std::nullopt;
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

}  // namespace

std::map<size_t, ConvStepPlan> plan_onednn_convs(lower::Program& p) {
  std::map<size_t, ConvStepPlan> plans;
  for (size_t k = 0; k < p.steps.size(); ++k) {
    const lower::ProgramStep& step = p.steps[k];
    if (!step.library || step.host || step.node->op != Op::Conv2d) continue;
    std::optional<eager::onednn::ConvSpec> spec = spec_of(*step.node);
    if (!spec) continue;
    ConvStepPlan plan;
    std::string why;
    if (match_epilogue(p, k, &plan, &why)) {
      spec->post_ops = plan.post_ops;
      try {
        plan.conv = std::make_shared<eager::onednn::PreparedConv>(*spec);
      } catch (const Error& e) {
        why = str("oneDNN refused the post-ops (", e.what(), ")");
        plan = ConvStepPlan{};
      }
    }
    if (!plan.conv) {
      spec->post_ops.clear();
      try {
        plan.conv = std::make_shared<eager::onednn::PreparedConv>(*spec);
      } catch (const Error&) {
        continue;  // the eager kernel runs it
      }
      plan.out = step.node->outputs[0];
    }
    if (const Value* w = step.node->inputs[1]; w->producer && w->producer->op == Op::Constant)
      plan.conv->set_constant_weights(w->producer->attrs.get_tensor("value").raw());
    std::string ops;
    for (const PostOp& op : plan.post_ops) ops += (ops.empty() ? "" : ", ") + eager::onednn::post_op_name(op);
    plan.note = str("oneDNN ", plan.conv->implementation(),
                    plan.folded_step >= 0 ? str(" + post-ops [", ops, "] (step ", plan.folded_step, " folded)")
                                          : str(" (no tail folded: ", why, ")"));
    // The folded kernel's arena output is now written at the conv's step.
    if (plan.folded_step >= 0)
      for (size_t i = 0; i < p.arena_values.size(); ++i)
        if (p.arena_values[i] == plan.out) p.arena_lifetimes[i].first = int(k);
    plans.emplace(k, std::move(plan));
  }
  return plans;
}

}  // namespace kiln::runtime
