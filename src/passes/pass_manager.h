// Runs pipelines of passes: timing, change counts, verification between passes, printing and
// dumping the IR after each pass. Why: every pass gets these for free, so a broken rewrite is
// caught at the pass that made it, not three stages later.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/passes.h"
#include "passes/pass.h"

namespace kiln::passes {

// One pass in a pipeline and why it sits where it does.
struct PipelineEntry {
  std::string pass;
  std::string reason;
};

// A named group of passes, run once or repeated until none of them changes the graph.
struct PipelineStage {
  std::string name;
  std::string reason;
  std::vector<PipelineEntry> passes;
  bool to_fixed_point = false;
  int max_iterations = 10;  // a fixed point not reached by then is reported, not an error
};

using Pipeline = std::vector<PipelineStage>;

class PassManager {
 public:
  // Reads KILN_VERIFY_PASSES=1 and KILN_DUMP=dir on top of `options`.
  explicit PassManager(OptimizeOptions options);
  const OptimizeOptions& options() const { return options_; }

  // Runs the stages in order; disabled passes are skipped. Throws kiln::Error naming the pass
  // (and stage) when a pass throws or leaves an invalid graph behind.
  PassStats run(Graph& g, const Pipeline& pipeline);

 private:
  bool run_one(Graph& g, const std::string& stage, const std::string& pass_name, PassStats& stats);
  void dump(const Graph& g, const std::string& label);

  OptimizeOptions options_;
  int dump_counter_ = 0;
};

// Reads a comma-separated pass list ("cse,dce"); throws kiln::Error naming an unknown pass.
std::vector<std::string> parse_pass_list(const std::string& text);
// Each pass once, in order, as one stage named "passes".
Pipeline pipeline_from_list(const std::vector<std::string>& names);

}  // namespace kiln::passes
