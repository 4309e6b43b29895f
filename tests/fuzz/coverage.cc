// Coverage counting and its markdown table (see coverage.h).
#include "fuzz/coverage.h"

#include <set>
#include <sstream>

#include "fuzz/generator.h"
#include "kiln/error.h"

namespace kiln::fuzz {

namespace {
DType main_dtype(const Node& n) {
  const Value* v = n.inputs.empty() ? n.outputs.at(0) : n.inputs[n.op == Op::Where ? 1 : 0];
  return v->type.dtype;
}
const Outcome kOutcomes[] = {Outcome::Match,  Outcome::Mismatch, Outcome::CompileError, Outcome::RunError,
                             Outcome::Rejected, Outcome::IllConditioned, Outcome::NarrowPrecision, Outcome::Amplified,
                             Outcome::Unsupported};
}  // namespace

void Coverage::add(const FuzzCase& c, Outcome o) {
  ++graphs;
  ++outcomes[o];
  if (!c.bindings.empty()) ++symbolic_graphs;
  for (const auto& [_, v] : c.bindings)
    if (v == 0) {
      ++zero_size_graphs;
      break;
    }
  for (const auto& [_, s] : c.specs)
    if (s.specials) {
      ++special_graphs;
      break;
    }
  for (const Node* n : c.graph->node_list()) ++nodes[{n->op, main_dtype(*n)}];
}

void Coverage::merge(const Coverage& other) {
  for (const auto& [k, v] : other.nodes) nodes[k] += v;
  for (const auto& [k, v] : other.outcomes) outcomes[k] += v;
  graphs += other.graphs;
  symbolic_graphs += other.symbolic_graphs;
  zero_size_graphs += other.zero_size_graphs;
  special_graphs += other.special_graphs;
}

std::string Coverage::serialize() const {
  std::ostringstream o;
  o << "graphs " << graphs << " " << symbolic_graphs << " " << zero_size_graphs << " " << special_graphs << "\n";
  for (const auto& [k, v] : outcomes) o << "outcome " << int(k) << " " << v << "\n";
  for (const auto& [k, v] : nodes) o << "node " << op_name(k.first) << " " << dtype_name(k.second) << " " << v << "\n";
  return o.str();
}

Coverage Coverage::parse(const std::string& text) {
  Coverage c;
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);) {
    std::istringstream f(l);
    std::string tag;
    f >> tag;
    if (tag == "graphs") {
      f >> c.graphs >> c.symbolic_graphs >> c.zero_size_graphs >> c.special_graphs;
    } else if (tag == "outcome") {
      int k = 0;
      int64_t v = 0;
      f >> k >> v;
      c.outcomes[Outcome(k)] += v;
    } else if (tag == "node") {
      std::string op, dt;
      int64_t v = 0;
      f >> op >> dt >> v;
      auto o = op_from_name(op);
      auto d = parse_dtype(dt);
      KILN_CHECK(o && d, "coverage: bad line '", l, "'");
      c.nodes[{*o, *d}] += v;
    }
  }
  return c;
}

std::string Coverage::markdown(TargetKind target) const {
  std::ostringstream o;
  o << "| outcome | graphs |\n|---|---:|\n";
  for (Outcome k : kOutcomes) {
    auto it = outcomes.find(k);
    o << "| " << outcome_name(k) << " | " << (it == outcomes.end() ? 0 : it->second) << " |\n";
  }
  o << "\n" << graphs << " graphs: " << symbolic_graphs << " with symbolic dims (" << zero_size_graphs
    << " with a dim bound to 0), " << special_graphs << " with NaN/inf/-0/denormal inputs.\n\n";
  std::set<DType> dtypes;
  for (const auto& [k, _] : nodes) dtypes.insert(k.second);
  o << "Generated nodes by op and main operand dtype (ops drawn from the menu plus the views and casts "
       "placed between them):\n\n| op |";
  for (DType d : dtypes) o << " " << dtype_name(d) << " |";
  o << "\n|---|";
  for (size_t i = 0; i < dtypes.size(); ++i) o << "---:|";
  o << "\n";
  std::set<Op> seen;
  for (int i = 0; i < kNumOps; ++i) {
    Op op = Op(i);
    bool any = false;
    for (DType d : dtypes) any |= nodes.count({op, d}) > 0;
    if (!any) continue;
    seen.insert(op);
    o << "| " << op_name(op) << " |";
    for (DType d : dtypes) {
      auto it = nodes.find({op, d});
      o << " " << (it == nodes.end() ? std::string("") : std::to_string(it->second)) << " |";
    }
    o << "\n";
  }
  o << "\nOps of the table never generated for " << target_kind_name(target) << ":\n\n";
  for (int i = 0; i < kNumOps; ++i) {
    if (seen.count(Op(i))) continue;
    std::string why = why_not_drawn(target, Op(i));
    o << "- `" << op_name(Op(i)) << "`: " << (why.empty() ? "in the menu, but no draw typed in this run" : why) << "\n";
  }
  return o.str();
}

}  // namespace kiln::fuzz
