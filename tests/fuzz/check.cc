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
#include "fuzz/explanations.h"
#include "fuzz/widened.h"

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
    if (cancelling_sum(*c.graph, inputs, got[o], want[o], o)) {
      v = {Outcome::IllConditioned, str("output ", o, " (a sum cancelling to noise): ", diff)};
      continue;
    }
    if (matches_widened_reference(target, *c.graph, inputs, got[o], o)) {
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

