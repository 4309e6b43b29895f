// The random graph generator (see random_graph.h). Ops are drawn from the op table by trait;
// operands of ops with restricted domains (log, sqrt, pow...) are first mapped into the domain
// so both executors see finite values.
#include "common/random_graph.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "kiln/error.h"

namespace kiln::testing {

namespace {

struct Gen {
  std::mt19937_64 rng;
  const RandomGraphOptions& opt;
  Graph& g;
  DType dtype;
  std::vector<Value*> pool;
  std::vector<HostTensor> inputs;
  int next_input = 0;

  int pick(int n) { return int(std::uniform_int_distribution<int>(0, n - 1)(rng)); }
  bool coin(double p = 0.5) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

  Value* new_input(std::vector<int64_t> dims) {
    Value* v = g.add_input(str("in", next_input), TensorType{dtype, to_shape(dims), Device::CPU});
    inputs.push_back(HostTensor::random(dtype, dims, rng(), -1.5, 1.5));
    ++next_input;
    pool.push_back(v);
    return v;
  }

  std::vector<int64_t> dims_of(const Value* v) { return v->type.static_shape(); }

  // A shape that broadcasts to `dims`: some dims set to 1, maybe leading dims dropped.
  std::vector<int64_t> broadcastable(std::vector<int64_t> dims) {
    for (auto& d : dims)
      if (coin(0.3)) d = 1;
    while (!dims.empty() && coin(0.25)) dims.erase(dims.begin());
    return dims;
  }

  Value* operand_like(Value* a) {
    std::vector<int64_t> want = dims_of(a);
    std::vector<Value*> same;
    for (Value* v : pool)
      if (v != a && v->type.dtype == dtype && dims_of(v) == want) same.push_back(v);
    if (!same.empty() && coin(0.6)) return same[size_t(pick(int(same.size())))];
    return new_input(coin(0.6) ? broadcastable(want) : want);
  }

  // Maps x into the domain of op (positive for log/sqrt, bounded for exp/pow).
  Value* into_domain(Op op, Value* x) {
    switch (op) {
      case Op::Log: case Op::Sqrt: case Op::Rsqrt: case Op::Reciprocal: case Op::Pow:
        return g.add(Op::Add, {g.add(Op::Abs, {x}), g.scalar(dtype, 0.5)});
      case Op::Exp:
        return g.add(Op::Tanh, {x});
      default: return x;
    }
  }

  std::vector<Op> ops_with(uint32_t trait, int operands) {
    std::vector<Op> out;
    for (int i = 0; i < kNumOps; ++i) {
      const OpInfo& info = op_info(Op(i));
      if (!info.has(Trait(trait)) || info.min_operands != operands || info.has(kComparison)) continue;
      bool required_attr = false;
      for (const auto& a : info.attrs) required_attr |= a.required;
      if (required_attr || info.op == Op::Not || info.op == Op::IsNan || info.op == Op::And ||
          info.op == Op::Or || info.op == Op::Xor || info.op == Op::Mod || info.op == Op::Where)
        continue;
      out.push_back(info.op);
    }
    return out;
  }

  Value* step(Value* x) {
    int kind = pick(10);
    std::vector<int64_t> dims = dims_of(x);
    int rank = int(dims.size());
    if (kind < 3) {
      auto ops = ops_with(kElementwise, 1);
      Op op = ops[size_t(pick(int(ops.size())))];
      return g.add(op, {into_domain(op, x)});
    }
    if (kind < 6) {
      auto ops = ops_with(kElementwise, 2);
      Op op = ops[size_t(pick(int(ops.size())))];
      Value* b = operand_like(x);
      Value* a = into_domain(op, x);
      if (op == Op::Div) b = g.add(Op::Add, {g.add(Op::Abs, {b}), g.scalar(dtype, 0.5)});
      if (op == Op::Pow) b = g.add(Op::Tanh, {b});
      return coin() ? g.add(op, {a, b}) : g.add(op, {b, a});
    }
    if (kind < 8 && opt.reductions && rank > 0) {
      Op ops[] = {Op::ReduceSum, Op::ReduceMax, Op::ReduceMean, Op::ReduceMin};
      std::vector<int64_t> axes;
      for (int d = 0; d < rank; ++d)
        if (coin(0.4)) axes.push_back(coin() ? d : d - rank);
      return g.add(ops[pick(4)], {x}, {{"axes", axes}, {"keepdim", int64_t(coin())}});
    }
    if (kind == 8 && opt.views && rank > 0) {
      switch (pick(4)) {
        case 0: {
          std::vector<int64_t> perm(static_cast<size_t>(rank));
          std::iota(perm.begin(), perm.end(), 0);
          std::shuffle(perm.begin(), perm.end(), rng);
          return g.add(Op::Permute, {x}, {{"perm", perm}});
        }
        case 1: {
          int64_t n = std::accumulate(dims.begin(), dims.end(), int64_t(1), std::multiplies<int64_t>());
          return g.add(Op::Reshape, {x}, {{"shape", n % 2 == 0 && n > 2 ? Shape{2, -1} : Shape{n}}});
        }
        case 2: {
          int axis = pick(rank);
          int64_t len = dims[size_t(axis)];
          int64_t start = len > 1 ? pick(int(len / 2) + 1) : 0;
          return g.add(Op::Slice, {x}, {{"starts", std::vector<int64_t>{start}},
                                        {"ends", std::vector<int64_t>{len}},
                                        {"axes", std::vector<int64_t>{axis}},
                                        {"steps", std::vector<int64_t>{1 + pick(2)}}});
        }
        default: {
          std::vector<int64_t> to = dims;
          for (auto& d : to)
            if (d == 1) d = 3;
          to.insert(to.begin(), 2);
          return g.add(Op::Expand, {x}, {{"shape", to_shape(to)}});
        }
      }
    }
    if (kind == 9 && opt.normalizations && rank > 0) {
      if (coin()) return g.add(Op::Softmax, {x}, {{"axis", int64_t(pick(rank))}});
      return g.add(Op::LayerNorm, {x});
    }
    if (opt.contractions && rank == 2) {
      Value* w = new_input({dims[1], int64_t(1 + pick(9))});
      return g.add(Op::MatMul, {x, w});
    }
    return g.add(Op::Neg, {x});
  }
};

const int64_t kDims[] = {1, 2, 3, 5, 7, 8, 13, 17};

}  // namespace

RandomGraph make_random_graph(uint64_t seed, const RandomGraphOptions& options) {
  RandomGraph out;
  out.seed = seed;
  out.graph = std::make_unique<Graph>(str("random_", seed));
  Gen gen{std::mt19937_64(seed), options, *out.graph, options.dtypes[0], {}, {}, 0};
  gen.dtype = options.dtypes[size_t(gen.pick(int(options.dtypes.size())))];
  std::vector<int64_t> dims;
  int rank = 1 + gen.pick(3);
  for (int d = 0; d < rank; ++d) dims.push_back(kDims[gen.pick(8)]);
  Value* x = gen.new_input(dims);
  std::vector<Value*> produced;
  int nodes = 1 + gen.pick(options.max_nodes);
  for (int i = 0; i < nodes; ++i) {
    // Usually extend the newest value; sometimes branch from an older one.
    Value* from = produced.empty() || gen.coin(0.2) ? gen.pool[size_t(gen.pick(int(gen.pool.size())))] : produced.back();
    try {
      x = gen.step(from);
      produced.push_back(x);
    } catch (const Error&) {
      // An op rejected these operands (shape or dtype rule): draw again.
    }
  }
  std::vector<Value*> outs = {produced.empty() ? gen.g.add(Op::Neg, {x}) : produced.back()};
  if (produced.size() > 2 && gen.coin(0.5)) {
    Value* extra = produced[size_t(gen.pick(int(produced.size()) - 1))];
    if (extra != outs[0]) outs.push_back(extra);
  }
  out.graph->set_outputs(outs);
  out.inputs = std::move(gen.inputs);
  return out;
}

}  // namespace kiln::testing
