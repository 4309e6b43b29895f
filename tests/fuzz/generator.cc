// The fuzz graph generator (see generator.h). Each step draws an op uniformly from the menu, then
// one of its samples; operands come from values already in the graph where the types match (or a
// dtype swap, a broadcast or a view makes them match) and the op's domain allows, else from fresh
// inputs drawn in the sample's value range. Types are inferred before anything is built, so a step
// whose operands an op rejects leaves the graph untouched.
#include "fuzz/generator.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "common/op_samples.h"
#include "kiln/error.h"

namespace kiln::fuzz {

namespace {

using testing::InputRange;
using testing::OpSample;

const DType kSwapDTypes[] = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8,
                             DType::I16, DType::I32, DType::I64, DType::U8,   DType::Bool};
const int64_t kDims[] = {1, 2, 3, 4, 5, 7, 8, 13, 17};

bool same_range(const InputRange& a, const InputRange& b) {
  return a.lo == b.lo && a.hi == b.hi && a.avoid_zero == b.avoid_zero;
}

// Whether operand `i` of `op` may be fed by an arbitrary computed value of dtype `d`: indices,
// shift amounts, float->int casts (out of range is undefined) and restricted integer ranges
// (divisors, exponents) must stay fresh; a float operand out of its domain just gives NaN, which
// both executors must agree on.
bool reusable(const OpSample& s, size_t i, DType d, const InputRange& r) {
  if (has_trait(s.op, kIndexing) && i > 0) return false;
  if (s.op == Op::BitShift && i == 1) return false;
  if (s.op == Op::Cast && is_float(d)) return false;
  if (!is_float(d) && !same_range(r, InputRange{})) return false;
  return true;
}

struct Operand {
  Value* value = nullptr;  // null: a fresh input of `type`
  TensorType type;
  InputSpec spec;
  bool specials_ok = true;
};

// Special values may go into every float operand: conv weights over padding give NaN, as ONNX's
// zero padding does (conv2d-nonfinite-weight-in-padding.kir); a det of a NaN matrix is NaN into
// whatever follows (cos-atan-nan.kir). A hook for operands that must stay finite.
bool specials_ok(Op, size_t) { return true; }

class Builder {
 public:
  Builder(uint64_t seed, const GenOptions& opt, FuzzCase& fc)
      : rng_(seed), opt_(opt), fc_(fc), g_(*fc.graph) {
    symbolic_ = coin(opt.symbolic_rate);
    specials_ = coin(opt.specials_rate);
    if (symbolic_) {
      const int64_t b_values[] = {0, 1, 1, 2, 3, 5};
      fc_.bindings["B"] = b_values[pick(6)];
      if (coin(0.4)) fc_.bindings["T"] = 1 + pick(7);
    }
    const std::vector<Op> menu = menu_ops(opt.target);
    for (const OpSample& s : testing::op_samples())
      if (std::find(menu.begin(), menu.end(), s.op) != menu.end()) menu_[s.op].push_back(&s);
    for (const auto& [op, _] : menu_) ops_.push_back(op);
  }

  void run() {
    // One or two fresh inputs of random types, so the first elementwise steps have something to
    // chain from (and symbolic dims enter the graph).
    for (int i = 0, n = 1 + pick(2); i < n; ++i) {
      DType d = kSwapDTypes[pick(4)];
      fresh(TensorType{d, random_shape(), Device::CPU}, InputSpec{});
    }
    int steps = 1 + pick(opt_.max_steps);
    for (int i = 0; i < steps; ++i) {
      Op op = ops_[size_t(pick(int(ops_.size())))];
      const auto& samples = menu_[op];
      if (step(*samples[size_t(pick(int(samples.size())))]) && coin(0.25)) view_step(produced_.back());
    }
    if (produced_.empty()) {
      Value* x = pool_.front();
      produced_.push_back(g_.add(is_float(x->type.dtype) || is_integer(x->type.dtype) ? Op::Abs : Op::Not, {x}));
    }
    // Every produced value nothing reads is an output (so no node is dead), newest first, at most 5;
    // sometimes an intermediate value too (read by a kernel and also written out).
    std::vector<Value*> outs;
    for (auto it = produced_.rbegin(); it != produced_.rend() && outs.size() < 5; ++it)
      if ((*it)->uses.empty() && std::find(outs.begin(), outs.end(), *it) == outs.end()) outs.push_back(*it);
    if (produced_.size() > 1 && coin(0.3)) {
      Value* v = any_of(produced_);
      if (std::find(outs.begin(), outs.end(), v) == outs.end()) outs.push_back(v);
    }
    g_.set_outputs(outs);
  }

 private:
  int pick(int n) { return int(std::uniform_int_distribution<int>(0, n - 1)(rng_)); }
  bool coin(double p = 0.5) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <typename T> T& any_of(std::vector<T>& v) { return v[size_t(pick(int(v.size())))]; }

  SymInt random_dim() {
    if (symbolic_ && coin(0.35)) {
      if (fc_.bindings.count("T") && coin()) return SymInt::symbol("T");
      return SymInt::symbol("B");
    }
    return kDims[pick(9)];
  }
  Shape random_shape() {
    Shape s;
    for (int d = 0, rank = pick(5); d < rank; ++d) s.push_back(random_dim());
    return s;
  }
  // A shape that broadcasts against `s`: some dims set to 1, maybe leading dims dropped.
  Shape broadcastable(Shape s) {
    for (auto& d : s)
      if (coin(0.3)) d = 1;
    while (!s.empty() && coin(0.25)) s.erase(s.begin());
    return s;
  }

  Value* fresh(const TensorType& t, InputSpec spec, bool specials_ok = true) {
    std::string name = str("in", next_input_++);
    Value* v = g_.add_input(name, t);
    spec.specials = specials_ok && specials_ && is_float(t.dtype) && coin(0.4);
    fc_.specs[name] = spec;
    pool_.push_back(v);
    return v;
  }

  // The sample's range for operand i, mapped to dtype d (integer bounds for integer dtypes).
  static InputSpec spec_for(const OpSample& s, size_t i, DType d) {
    InputRange r = i < s.ranges.size() ? s.ranges[i] : InputRange{};
    InputSpec spec{r.lo, r.hi, r.avoid_zero, false};
    if (!is_float(d)) {
      if (same_range(r, InputRange{})) spec.lo = -9, spec.hi = 9;
      spec.lo = std::ceil(spec.lo), spec.hi = std::floor(spec.hi);
      if (spec.hi < spec.lo) spec.hi = spec.lo;
    }
    if (d == DType::U8) spec.lo = std::max(spec.lo, 0.0);
    return spec;
  }

  // A value of exactly type t already in the graph (newest first more likely), or null.
  Value* pool_value(const TensorType& t) {
    std::vector<Value*> match;
    for (Value* v : pool_)
      if (v->type == t) match.push_back(v);
    if (match.empty()) return nullptr;
    return coin(0.5) ? match.back() : any_of(match);
  }
  Value* pool_value_of_dtype(DType d) {
    std::vector<Value*> match;
    for (Value* v : pool_)
      if (v->type.is_tensor() && v->type.dtype == d) match.push_back(v);
    if (match.empty()) return nullptr;
    return coin(0.6) ? match.back() : any_of(match);
  }

  // Operand types for the sample. With an anchor (a value already in the graph) the operands of
  // the sample's main dtype take the anchor's dtype and the anchor is the main operand: elementwise
  // ops broadcast the other operands against its shape, others use it as is or reshaped to the
  // sample's shape. Without one the sample's types stay, perhaps with a dtype swap.
  std::vector<Operand> plan(const OpSample& s, Value* anchor) {
    std::vector<Operand> ops(s.input_types.size());
    for (size_t i = 0; i < ops.size(); ++i) ops[i].type = s.input_types[i];
    if (ops.empty()) return ops;
    const size_t main = s.op == Op::Where ? 1 : 0;
    const DType from = ops[main].type.dtype;
    DType to = from;
    if (anchor) to = anchor->type.dtype;
    else if (coin(0.35)) to = kSwapDTypes[pick(10)];
    for (auto& o : ops)
      if (o.type.dtype == from) o.type.dtype = to;
    for (size_t i = 0; i < ops.size(); ++i) {
      ops[i].spec = spec_for(s, i, ops[i].type.dtype);
      ops[i].specials_ok = specials_ok(s.op, i);
    }
    auto range = [&](size_t i) { return InputRange{ops[i].spec.lo, ops[i].spec.hi, ops[i].spec.avoid_zero}; };
    if (anchor && !reusable(s, main, to, range(main))) anchor = nullptr;
    if (has_trait(s.op, kElementwise)) {
      Shape base = anchor ? anchor->type.shape : (coin(0.5) ? random_shape() : ops[main].type.shape);
      for (size_t i = 0; i < ops.size(); ++i) ops[i].type.shape = i == main || coin(0.5) ? base : broadcastable(base);
      ops[main].value = anchor;
    } else if (anchor) {
      if (try_types(s, ops, main, anchor->type)) {
        ops[main].value = anchor;
        ops[main].type = anchor->type;
      } else if (anchor->type.is_static() && ops[main].type.is_static() &&
                 anchor->type.numel() == ops[main].type.numel() && try_types(s, ops, main, ops[main].type)) {
        ops[main].value = g_.add(Op::Reshape, {anchor}, {{"shape", ops[main].type.shape}});
      }
    }
    for (size_t i = 0; i < ops.size(); ++i)
      if (!ops[i].value && reusable(s, i, ops[i].type.dtype, range(i)) && coin(0.5)) ops[i].value = pool_value(ops[i].type);
    return ops;
  }

  bool try_types(const OpSample& s, const std::vector<Operand>& ops, size_t at, const TensorType& t) {
    std::vector<TensorType> types;
    for (size_t i = 0; i < ops.size(); ++i) types.push_back(i == at ? t : ops[i].type);
    try {
      g_.infer_types(s.op, types, Graph::complete_attrs(s.op, s.attrs, "fuzz"), "fuzz");
      return true;
    } catch (const Error&) {
      return false;
    }
  }

  // One op sample as a node, chained to a recent value when the op accepts it; false when the op
  // rejected every plan (nothing built).
  bool step(const OpSample& s) {
    Value* anchor = nullptr;
    if (!s.input_types.empty() && !produced_.empty() && coin(0.9))
      anchor = coin(0.6) ? produced_.back() : any_of(produced_);
    for (Value* a : {anchor, static_cast<Value*>(nullptr)}) {
      if (a == nullptr && anchor != nullptr && coin(0.3)) return false;
      std::vector<Operand> ops = plan(s, a);
      std::vector<TensorType> types;
      for (const auto& o : ops) types.push_back(o.value ? o.value->type : o.type);
      try {
        g_.infer_types(s.op, types, Graph::complete_attrs(s.op, s.attrs, "fuzz"), "fuzz");  // defaults filled
      } catch (const Error&) {
        if (a == nullptr) return false;
        continue;
      }
      std::vector<Value*> in;
      for (auto& o : ops) in.push_back(o.value ? o.value : fresh(o.type, o.spec, o.specials_ok));
      std::vector<Value*> outs = g_.add_node(s.op, in, s.attrs);
      for (Value* v : outs)
        if (v->type.is_tensor()) pool_.push_back(v), produced_.push_back(v);
      return !outs.empty() && outs.back()->type.is_tensor();
    }
    return false;
  }

  // A random view of x (permute, reshape, slice, expand, unsqueeze, squeeze), when it types.
  void view_step(Value* x) {
    const int rank = x->type.rank();
    Op op = Op::Permute;
    Attrs attrs;
    switch (pick(6)) {
      case 0: {
        if (rank < 2) return;
        std::vector<int64_t> perm(size_t(rank), 0);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng_);
        attrs = {{"perm", perm}};
        break;
      }
      case 1: {
        op = Op::Reshape;
        if (!x->type.is_static()) {
          attrs = {{"shape", Shape{-1}}};
          break;
        }
        int64_t n = x->type.numel().constant();
        attrs = {{"shape", n % 2 == 0 && n > 2 ? Shape{2, -1} : Shape{n}}};
        break;
      }
      case 2: {
        if (rank == 0) return;
        op = Op::Slice;
        int axis = pick(rank);
        auto len = x->type.shape[size_t(axis)].maybe_constant();
        int64_t start = len && *len > 1 ? pick(int(*len / 2) + 1) : 0;
        int64_t step = 1 + pick(2);
        if (coin(0.2)) start = -1, step = -1;
        attrs = {{"starts", std::vector<int64_t>{start}},
                 {"ends", std::vector<int64_t>{step > 0 ? int64_t(1) << 62 : -(int64_t(1) << 62)}},
                 {"axes", std::vector<int64_t>{axis}}, {"steps", std::vector<int64_t>{step}}};
        break;
      }
      case 3: {
        op = Op::Expand;
        Shape to = x->type.shape;
        for (auto& d : to)
          if (d == SymInt(1)) d = 3;
        to.insert(to.begin(), 2);
        attrs = {{"shape", to}};
        break;
      }
      case 4:
        op = Op::Unsqueeze;
        attrs = {{"axes", std::vector<int64_t>{int64_t(pick(rank + 1))}}};
        break;
      default:
        op = Op::Squeeze;
        break;
    }
    try {
      g_.infer_types(op, {x->type}, attrs, "fuzz view");
    } catch (const Error&) {
      return;
    }
    Value* v = g_.add(op, {x}, attrs);
    pool_.push_back(v);
    produced_.push_back(v);
  }

  std::mt19937_64 rng_;
  const GenOptions& opt_;
  FuzzCase& fc_;
  Graph& g_;
  bool symbolic_ = false, specials_ = false;
  std::map<Op, std::vector<const OpSample*>> menu_;
  std::vector<Op> ops_;
  std::vector<Value*> pool_, produced_;
  int next_input_ = 0;
};

}  // namespace

std::string why_not_drawn(TargetKind target, Op op) {
  if (testing::op_samples_for(op).empty()) return "no sample in tests/common/op_samples.cc";
  const OpSupport& s = op_support(target, op);
  if (s.decision == OpDecision::Unsupported) return str("unsupported on ", target_kind_name(target), ": ", s.note);
  return "";
}

std::vector<Op> menu_ops(TargetKind target) {
  std::vector<Op> out;
  for (int i = 0; i < kNumOps; ++i)
    if (why_not_drawn(target, Op(i)).empty()) out.push_back(Op(i));
  return out;
}

FuzzCase generate_case(uint64_t seed, const GenOptions& options) {
  FuzzCase fc;
  fc.graph = std::make_unique<Graph>(str("fuzz_", seed));
  fc.input_seed = seed;
  Builder(seed, options, fc).run();
  return fc;
}

}  // namespace kiln::fuzz
