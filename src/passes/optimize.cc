// kiln::optimize and the small public helpers around it (TargetCaps presets, stats printing).
#include <cstdio>

#include "kiln/passes.h"
#include "passes/pass_manager.h"
#include "passes/pipelines.h"

namespace kiln {

TargetCaps TargetCaps::keep_all() {
  TargetCaps caps;
  for (int i = 0; i < kNumOps; ++i)
    if (op_info(Op(i)).decompose != nullptr) caps.native_ops.insert(Op(i));
  return caps;
}

TargetCaps TargetCaps::primitives_only() { return TargetCaps{}; }

std::map<std::string, int> op_histogram(const Graph& g) {
  std::map<std::string, int> counts;
  for (const auto& n : g.nodes()) ++counts[std::string(op_name(n->op))];
  return counts;
}

std::map<std::string, PassStats::Summary> PassStats::by_pass() const {
  std::map<std::string, Summary> out;
  for (const PassRun& r : runs) {
    Summary& s = out[r.pass];
    ++s.runs;
    s.changed += r.changed ? 1 : 0;
    s.seconds += r.seconds;
  }
  return out;
}

std::string PassStats::to_string() const {
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line, "%-28s %5s %8s %10s\n", "pass", "runs", "changed", "ms");
  out += line;
  for (const auto& [name, s] : by_pass()) {
    std::snprintf(line, sizeof line, "%-28s %5d %8d %10.3f\n", name.c_str(), s.runs, s.changed,
                  s.seconds * 1e3);
    out += line;
  }
  std::snprintf(line, sizeof line, "nodes %d -> %d in %.3f ms\n", nodes_before, nodes_after,
                total_seconds * 1e3);
  return out + line;
}

PassStats optimize(Graph& g, const OptimizeOptions& options) {
  passes::PassManager manager(options);
  if (!options.pass_list.empty())
    return manager.run(g, passes::pipeline_from_list(options.pass_list));
  if (options.target_passes.empty()) return manager.run(g, passes::default_pipeline());
  passes::Pipeline pipeline = passes::default_pipeline();
  passes::PipelineStage target{"target", "last: the target's own rewrites see the optimised graph", {}, false, 1};
  for (const TargetPass& p : options.target_passes) {
    target.passes.push_back({p.name, p.reason});
    target.passes.push_back({"dce", "collects what the target pass replaced"});
  }
  pipeline.push_back(std::move(target));
  return manager.run(g, pipeline);
}

}  // namespace kiln
