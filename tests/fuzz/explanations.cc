// The node-by-node explanations of a difference (see explanations.h).
#include "fuzz/explanations.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "kiln/error.h"
#include "kiln/interp.h"
#include "kiln/passes.h"
#include "common/compare.h"
#include "fuzz/widened.h"

namespace kiln::fuzz {

namespace {

// Ops whose results are sums of products of their operands' elements.
bool sums_terms(Op op) {
  switch (op) {
    case Op::ReduceSum: case Op::ReduceMean: case Op::GlobalAvgPool: case Op::AvgPool2d: case Op::MatMul:
    case Op::Conv2d: case Op::ConvTranspose2d: case Op::CumSum:
      return true;
    default: return false;
  }
}

// The tolerance of one node's compiled value against the reference op on the same operands. Sums
// (reductions, pools, contractions) are judged against the magnitude of their terms: the bound of
// any summation order, where terms of size 1 cancelling to 1e-8 leave only noise.
testing::Tolerance node_tolerance(const Node& n, const std::vector<HostTensor>& operands,
                                  const std::map<std::string, int64_t>& bindings) {
  testing::Tolerance tol = testing::compiled_tolerance(n.outputs[0]->type.dtype);
  if (!sums_terms(n.op) || !is_float(n.outputs[0]->type.dtype)) return tol;
  std::vector<HostTensor> magnitudes;
  for (const HostTensor& t : operands) {
    std::vector<double> v = t.to_doubles();
    for (double& e : v) e = std::fabs(e);
    magnitudes.push_back(is_float(t.dtype()) ? HostTensor::from_doubles(t.dtype(), t.shape(), v) : t);
  }
  try {
    double largest = 0;
    for (double e : interp::run_node(n, magnitudes, bindings).at(0).to_doubles())
      if (std::isfinite(e)) largest = std::max(largest, e);
    tol.atol = tol.rtol * largest;
  } catch (const std::exception&) {
  }
  return tol;
}

// `f` applied to every element of a float tensor, as f64.
template <class F>
HostTensor map_doubles(const HostTensor& t, F f) {
  std::vector<double> v = t.to_doubles();
  for (double& e : v) e = f(e);
  return HostTensor::from_doubles(DType::F64, t.shape(), v);
}

// A product whose factors can leave the dtype's normal range in some order of multiplication has
// no order-independent result: a vector loop or a block tree that overflows a partial product to
// inf before a factor that underflows (or rounds partial products on the subnormal grid) is as
// right as the reference's left-to-right order. Such elements of `want` are replaced by `got` when
// got is one of the results some order gives: +-0, +-inf, NaN, or the exact product (from the sum
// of the factors' log2 magnitudes) to 1e-3 in log2. Elements whose every partial product stays
// normal in every order keep the reference's value.
void excuse_order_sensitive_products(const Node& prod, const HostTensor& factors, const HostTensor& got,
                                     HostTensor& want, const std::map<std::string, int64_t>& bindings) {
  DType dt = prod.outputs[0]->type.dtype;
  if (!is_float(dt) || got.shape() != want.shape()) return;
  double max_exp = dt == DType::F64 ? 1024 : dt == DType::F32 ? 128 : dt == DType::F16 ? 16 : 128;
  double min_exp = dt == DType::F64 ? -1022 : dt == DType::F32 ? -126 : dt == DType::F16 ? -14 : -126;
  Graph sum_graph;
  TensorType wide = prod.inputs[0]->type;
  wide.dtype = DType::F64;
  Value* x = sum_graph.add_input("x", wide);
  sum_graph.add(Op::ReduceSum, {x}, prod.attrs);
  const Node& sum = *sum_graph.node_list().at(0);
  auto log2_of = [](double e) { return std::isfinite(e) && e != 0 ? std::log2(std::fabs(e)) : 0.0; };
  std::vector<double> up, down, total;
  try {
    up = interp::run_node(sum, {map_doubles(factors, [&](double e) { return std::max(log2_of(e), 0.0); })}, bindings)
             .at(0).to_doubles();
    down = interp::run_node(sum, {map_doubles(factors, [&](double e) { return std::min(log2_of(e), 0.0); })}, bindings)
               .at(0).to_doubles();
    total = interp::run_node(sum, {map_doubles(factors, log2_of)}, bindings).at(0).to_doubles();
  } catch (const std::exception&) {
    return;
  }
  std::vector<double> g = got.to_doubles(), w = want.to_doubles();
  if (up.size() != w.size()) return;
  bool excused = false;
  for (size_t i = 0; i < w.size(); ++i) {
    if (up[i] < max_exp - 1 && down[i] > min_exp + 1) continue;  // every order stays normal
    bool same_sign = std::isnan(g[i]) || std::isnan(w[i]) || std::signbit(g[i]) == std::signbit(w[i]);
    bool some_order = std::isnan(g[i]) || (same_sign && (std::isinf(g[i]) || g[i] == 0 ||
                                                         std::fabs(std::log2(std::fabs(g[i])) - total[i]) <= 1e-3));
    if (some_order && g[i] != w[i]) w[i] = g[i], excused = true;
  }
  if (excused) want = HostTensor::from_doubles(want.dtype(), want.shape(), w);
}

// A sum (or mean, or average pool) within 2^10 of the dtype's largest finite value: partial sums
// of up to 1024 terms of that size overflow in the dtype itself (a pool or reduction accumulating
// in f32), where the reference accumulates in double. Elements where `got` is the infinity of the
// reference's sign are replaced by it in `want`.
void excuse_overflowing_partial_sums(const HostTensor& got, HostTensor& want) {
  DType dt = want.dtype();
  if (!is_float(dt) || got.shape() != want.shape()) return;
  const double largest = dt == DType::F64 ? 1.7976931348623157e308 : dt == DType::F16 ? 65504.0 : 3.4028234663852886e38;
  std::vector<double> g = got.to_doubles(), w = want.to_doubles();
  bool excused = false;
  for (size_t i = 0; i < w.size(); ++i)
    if (std::isinf(g[i]) && std::isfinite(w[i]) && std::signbit(g[i]) == std::signbit(w[i]) &&
        std::fabs(w[i]) * 1024 >= largest)
      w[i] = g[i], excused = true;
  if (excused) want = HostTensor::from_doubles(dt, want.shape(), w);
}

// A fused kernel reads an f16/bf16 intermediate as the float it computed, not as the value it
// stored: anything within half an ulp of the stored value. An elementwise node is right for what
// it read when its compiled value lies in the range the op spans (in f32) over operands moved by
// -1/2, 0 and +1/2 ulp of their dtype (NaN where one of those is NaN): log of a row sum stored as
// 1 but read as 1 + 6e-8, acos of a cosh stored as 1 but read just above it. Such elements of
// `want` are replaced by `got`. Operands that are graph inputs were read exactly.
void excuse_rounded_operands(const Node& n, const std::vector<HostTensor>& operands, const HostTensor& got,
                             HostTensor& want, const testing::Tolerance& tol,
                             const std::map<std::string, int64_t>& bindings) {
  if (!n.info().has(kElementwise) || reads_rounded_operand(n) || n.outputs.size() != 1 || operands.size() > 2 ||
      !is_float(got.dtype()) || got.shape() != want.shape())
    return;
  std::vector<size_t> narrow;
  for (size_t i = 0; i < operands.size(); ++i)
    if (is_16bit_float(operands[i].dtype()) && n.inputs[i]->producer) narrow.push_back(i);
  if (narrow.empty()) return;
  Graph wide;
  std::vector<Value*> ins;
  for (size_t i = 0; i < operands.size(); ++i) {
    TensorType t = n.inputs[i]->type;
    t.shape = Shape(operands[i].shape().begin(), operands[i].shape().end());
    if (is_16bit_float(t.dtype)) t.dtype = DType::F32;
    ins.push_back(wide.add_input(str("x", i), t));
  }
  auto moved = [&](size_t i, int half_ulps) {
    const HostTensor& t = operands[i];
    std::vector<double> v = t.to_doubles();
    for (double& e : v)
      if (std::isfinite(e)) e += half_ulps * testing::ulp_of(t.dtype(), e) / 2;
    return HostTensor::from_doubles(is_16bit_float(t.dtype()) ? DType::F32 : t.dtype(), t.shape(), v);
  };
  std::vector<std::vector<double>> candidates;
  try {
    wide.add(n.op, ins, n.attrs);
    const Node& op = *wide.node_list().at(0);
    for (int c = 0; c < (narrow.size() == 1 ? 3 : 9); ++c) {
      std::vector<HostTensor> args;
      for (size_t i = 0; i < operands.size(); ++i) {
        int shift = 0;
        for (size_t k = 0; k < narrow.size(); ++k)
          if (narrow[k] == i) shift = (k == 0 ? c % 3 : c / 3) - 1;
        args.push_back(moved(i, shift));
      }
      candidates.push_back(interp::run_node(op, args, bindings).at(0).to_doubles());
    }
  } catch (const std::exception&) {
    return;
  }
  std::vector<double> g = got.to_doubles(), w = want.to_doubles();
  bool excused = false;
  for (size_t i = 0; i < w.size(); ++i) {
    bool some_nan = false, ok = false;
    double lo = INFINITY, hi = -INFINITY;
    for (const std::vector<double>& c : candidates) {
      if (i >= c.size()) return;
      some_nan = some_nan || std::isnan(c[i]);
      ok = ok || c[i] == g[i];
      if (!std::isnan(c[i])) lo = std::min(lo, c[i]), hi = std::max(hi, c[i]);
    }
    const double slack = std::isfinite(g[i]) ? tol.rtol * std::fabs(g[i]) + testing::ulp_of(got.dtype(), g[i]) : 0;
    ok = ok || (std::isnan(g[i]) && some_nan) || (std::isfinite(g[i]) && lo - slack <= g[i] && g[i] <= hi + slack);
    if (ok && !(g[i] == w[i]) && !(std::isnan(g[i]) && std::isnan(w[i]))) w[i] = g[i], excused = true;
  }
  if (excused) want = HostTensor::from_doubles(want.dtype(), want.shape(), w);
}

}  // namespace

// When every node is right for its operands, no kernel computed a wrong value: the graph amplified
// in-contract differences through a discontinuity (argmin over near ties, sqrt or floor of a value
// rounded across 0 or an integer).
std::string unexplained_by_nodes(const Target& target, const CompileOptions& options, const Graph& g,
                                 const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& got) {
  std::unique_ptr<Graph> all = g.clone();
  std::vector<Value*> outs = all->outputs();
  size_t n_final = outs.size();
  for (Node* n : all->node_list())
    for (Value* v : n->outputs) outs.push_back(v);
  all->set_outputs(outs);
  std::vector<HostTensor> values;
  try {
    std::unique_ptr<Graph> opt = all->clone();
    optimize(*opt, target.optimize_options());
    if (target.kind() != TargetKind::Cpu && !target.refusal(*opt).empty()) return "refused with every value as an output";
    values = target.compile(*opt, options)->run(inputs);
  } catch (const std::exception& e) {
    return str("with every value as an output: ", e.what());
  }
  for (size_t o = 0; o < n_final; ++o)
    if (!testing::compare_tensors(values[o], got[o]).empty())
      return "with every value as an output the compiled result changes";
  std::map<const Value*, const HostTensor*> value_of;
  for (size_t i = 0; i < inputs.size(); ++i) value_of[all->inputs()[i]] = &inputs[i];
  for (size_t k = n_final; k < outs.size(); ++k) value_of[outs[k]] = &values[k];
  std::map<std::string, int64_t> bindings = interp::bind_symbols(*all, inputs);
  for (Node* n : all->node_list()) {
    std::vector<HostTensor> operands;
    for (const Value* v : n->inputs) operands.push_back(*value_of.at(v));
    std::vector<HostTensor> local;
    try {
      local = interp::run_node(*n, operands, bindings);
    } catch (const std::exception& e) {
      return str(n->describe(), " on its compiled operands: ", e.what());
    }
    testing::Tolerance tol = node_tolerance(*n, operands, bindings);
    if (n->op == Op::ReduceProd) excuse_order_sensitive_products(*n, operands[0], *value_of.at(n->outputs[0]), local[0], bindings);
    if (sums_terms(n->op)) excuse_overflowing_partial_sums(*value_of.at(n->outputs[0]), local[0]);
    for (size_t r = 0; r < n->outputs.size(); ++r) {
      std::string diff = testing::compare_tensors(*value_of.at(n->outputs[r]), local[r], tol);
      if (!diff.empty() && r == 0) {
        excuse_rounded_operands(*n, operands, *value_of.at(n->outputs[0]), local[0], tol, bindings);
        diff = testing::compare_tensors(*value_of.at(n->outputs[0]), local[0], tol);
      }
      if (!diff.empty()) return str(n->describe(), " is wrong for its compiled operands: ", diff);
    }
  }
  return "";
}

// Whether output `o` is a sum (reduction, pool, contraction) whose compiled value is within the
// contract's relative tolerance of the magnitude of its terms (their reference values): terms of
// size 1 cancelling to 1e-8 leave only rounding noise, which any summation order may change. The
// node-by-node check cannot judge these when making every value an output changes the noise.
bool cancelling_sum(const Graph& g, const std::vector<HostTensor>& inputs, const HostTensor& got,
                    const HostTensor& want, size_t o) {
  const Node* sum = g.outputs()[o]->producer;
  if (!sum || !sums_terms(sum->op) || !is_float(got.dtype())) return false;
  std::unique_ptr<Graph> terms = g.clone();
  const Node* copy = terms->outputs()[o]->producer;
  terms->set_outputs(copy->inputs);
  try {
    std::vector<HostTensor> operands = interp::run(*terms, inputs);
    return testing::compare_tensors(got, want, node_tolerance(*sum, operands, interp::bind_symbols(g, inputs))).empty();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace kiln::fuzz
