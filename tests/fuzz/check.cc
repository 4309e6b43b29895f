// The differential check (see check.h). The comparison contract is compare_tensors; it is never
// loosened here. A difference counts as ill-conditioned only when the reference itself moves as
// far for a nudge of two ulps of the input dtype (e.g. floor of a value one ulp below an integer).
#include "fuzz/check.h"

#include <cmath>
#include <map>

#include "kiln/error.h"
#include "kiln/interp.h"
#include "common/compare.h"
#include "common/conditioning.h"

namespace kiln::fuzz {

namespace {

double nudge_for(DType d) {
  switch (d) {
    case DType::F64: return 1e-13;
    case DType::F16: return 2e-3;
    case DType::BF16: return 1.6e-2;
    default: return 1e-6;
  }
}

// The graph with every f16/bf16 value widened to f32 (text IR substitution; null when that does not
// parse, e.g. an explicit cast to f16).
std::unique_ptr<Graph> widened(const Graph& g) {
  std::string text = print_graph(g), out;
  for (size_t i = 0; i < text.size(); ++i) {  // types, and the dtype attributes of casts and sources
    if (text.compare(i, 5, "bf16[") == 0) out += "f32[", i += 4;
    else if (text.compare(i, 4, "f16[") == 0 && (i == 0 || text[i - 1] != 'b')) out += "f32[", i += 3;
    else if (text.compare(i, 13, "dtype = bf16,") == 0 || text.compare(i, 13, "dtype = bf16}") == 0) out += "dtype = f32", i += 11;
    else if (text.compare(i, 12, "dtype = f16,") == 0 || text.compare(i, 12, "dtype = f16}") == 0) out += "dtype = f32", i += 10;
    else out += text[i];
  }
  if (out == text) return nullptr;
  try {
    return parse_graph(out);
  } catch (const Error&) {
    return nullptr;
  }
}

// Generated kernels compute f16/bf16 values in float and round at stores (as PyTorch's opmath and
// torch.compile do); the interpreter rounds after every op. A result that differs from the per-op
// rounded reference but agrees with the reference run in f32 and rounded once at the end is a
// precision semantics difference (a domain edge like acos(cosh(x)) just above 1, an exp that
// amplifies one rounding), not a wrong kernel.
bool matches_widened_reference(const Graph& g, const std::vector<HostTensor>& inputs, const HostTensor& got,
                               size_t output) {
  std::unique_ptr<Graph> wide = widened(g);
  if (!wide) return false;
  std::vector<HostTensor> wide_inputs;
  for (const HostTensor& t : inputs)
    wide_inputs.push_back(t.dtype() == DType::F16 || t.dtype() == DType::BF16
                              ? HostTensor::from_doubles(DType::F32, t.shape(), t.to_doubles()) : t);
  try {
    HostTensor w = interp::run(*wide, wide_inputs).at(output);
    if (w.dtype() != got.dtype()) w = HostTensor::from_doubles(got.dtype(), w.shape(), w.to_doubles());
    return testing::compare_tensors(got, w).empty();
  } catch (const Error&) {
    return false;
  }
}

// Ops whose results are sums of products of their operands' elements.
bool sums_terms(Op op) {
  switch (op) {
    case Op::ReduceSum: case Op::ReduceMean: case Op::GlobalAvgPool: case Op::AvgPool2d: case Op::MatMul:
    case Op::Conv2d: case Op::ConvTranspose2d: case Op::CumSum:
      return true;
    default: return false;
  }
}

// Whether every node explains a difference: the graph compiled again with every intermediate value
// as an extra output reproduces the compiled outputs, and each node's compiled value agrees with the
// reference op run on the compiled values of its own operands. Then no kernel computed a wrong
// value; the graph amplified in-contract differences through a discontinuity (argmin over near
// ties, sqrt or floor of a value rounded across 0 or an integer). Returns "" when explained, else
// why not (the first node whose compiled value is wrong for its operands).
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
    // Sums (reductions, pools, contractions) are judged against the magnitude of their terms: the
    // bound of any summation order, where terms of size 1 cancelling to 1e-8 leave only noise.
    testing::Tolerance tol = testing::compiled_tolerance(n->outputs[0]->type.dtype);
    if (sums_terms(n->op) && is_float(n->outputs[0]->type.dtype)) {
      std::vector<HostTensor> magnitudes;
      for (const HostTensor& t : operands) {
        std::vector<double> v = t.to_doubles();
        for (double& e : v) e = std::fabs(e);
        magnitudes.push_back(is_float(t.dtype()) ? HostTensor::from_doubles(t.dtype(), t.shape(), v) : t);
      }
      try {
        double largest = 0;
        for (double e : interp::run_node(*n, magnitudes, bindings).at(0).to_doubles())
          if (std::isfinite(e)) largest = std::max(largest, e);
        tol.atol = tol.rtol * largest;
      } catch (const std::exception&) {
      }
    }
    for (size_t r = 0; r < n->outputs.size(); ++r) {
      std::string diff = testing::compare_tensors(*value_of.at(n->outputs[r]), local[r], tol);
      if (!diff.empty()) return str(n->describe(), " is wrong for its compiled operands: ", diff);
    }
  }
  return "";
}

Verdict compare(const FuzzCase& c, const Target& target, const CompileOptions& options, Executable& exe,
                const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& want) {
  std::vector<HostTensor> got;
  try {
    got = exe.run(inputs);
  } catch (const std::exception& e) {
    return {Outcome::RunError, str("compiled run threw: ", e.what())};
  }
  if (got.size() != want.size()) return {Outcome::Mismatch, str(got.size(), " outputs, want ", want.size())};
  Verdict v;
  for (size_t o = 0; o < want.size(); ++o) {
    std::string diff = testing::compare_tensors(got[o], want[o]);
    if (diff.empty()) continue;
    if (testing::ill_conditioned(*c.graph, inputs, want, o, nudge_for)) {
      v = {Outcome::IllConditioned, str("output ", o, ": ", diff)};
      continue;
    }
    if (matches_widened_reference(*c.graph, inputs, got[o], o)) {
      v = {Outcome::NarrowPrecision, str("output ", o, ": ", diff)};
      continue;
    }
    std::string local = unexplained_by_nodes(target, options, *c.graph, inputs, got);
    if (local.empty()) {
      v = {Outcome::Amplified, str("output ", o, ": ", diff)};
      continue;
    }
    return {Outcome::Mismatch, str("output ", o, " (", c.graph->outputs()[o]->type.to_string(), "): ", diff,
                                   "\n  node by node: ", local)};
  }
  return v;
}

}  // namespace

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::Match: return "match";
    case Outcome::Mismatch: return "mismatch";
    case Outcome::CompileError: return "compile-error";
    case Outcome::RunError: return "run-error";
    case Outcome::Rejected: return "rejected";
    case Outcome::IllConditioned: return "ill-conditioned";
    case Outcome::NarrowPrecision: return "narrow-precision";
    case Outcome::Amplified: return "amplified";
    case Outcome::Unsupported: return "unsupported";
  }
  return "?";
}

std::vector<Verdict> Checker::check(const std::vector<const FuzzCase*>& cases) const {
  std::vector<Verdict> out(cases.size());
  std::vector<std::vector<HostTensor>> inputs(cases.size()), want(cases.size());
  std::vector<std::unique_ptr<Graph>> optimized(cases.size());
  std::vector<size_t> live;  // cases the reference ran and the optimizer accepted
  for (size_t i = 0; i < cases.size(); ++i) {
    try {
      inputs[i] = make_inputs(*cases[i]);
      want[i] = interp::run(*cases[i]->graph, inputs[i]);
    } catch (const std::exception& e) {
      out[i] = {Outcome::Rejected, str("reference: ", e.what())};
      continue;
    }
    try {
      optimized[i] = cases[i]->graph->clone();
      optimize(*optimized[i], target_.optimize_options());
      verify(*optimized[i]);
    } catch (const std::exception& e) {
      out[i] = {Outcome::CompileError, str("optimize: ", e.what())};
      continue;
    }
    live.push_back(i);
  }
  std::vector<std::shared_ptr<Executable>> exes(cases.size());
  bool batched = false;
  if (target_.kind() == TargetKind::Cpu && live.size() > 1) {
    std::vector<const Graph*> graphs;
    for (size_t i : live) graphs.push_back(optimized[i].get());
    try {
      auto batch = compile_batch(graphs, options_);
      for (size_t k = 0; k < live.size(); ++k) exes[live[k]] = batch[k];
      batched = true;
    } catch (const std::exception&) {
      // One graph broke the batch: compile them one by one to find which.
    }
  }
  for (size_t i : live) {
    if (!batched) {
      // What the target refuses as a whole (an op or dtype it cannot run yet: `kiln ops`) is a
      // coverage gap, counted and reported, not a wrong answer.
      if (target_.kind() != TargetKind::Cpu) {
        std::string why = target_.refusal(*optimized[i]);
        if (!why.empty()) {
          out[i] = {Outcome::Unsupported, why};
          continue;
        }
      }
      try {
        exes[i] = target_.compile(*optimized[i], options_);
      } catch (const std::exception& e) {
        out[i] = {Outcome::CompileError, str("compile: ", e.what())};
        continue;
      }
    }
    out[i] = compare(*cases[i], target_, options_, *exes[i], inputs[i], want[i]);
  }
  return out;
}

}  // namespace kiln::fuzz
