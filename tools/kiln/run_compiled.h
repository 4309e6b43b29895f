// Shared pieces of `kiln run`: optimise + compile + run a graph, and report it next to eager.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/compile.h"
#include "kiln/graph.h"
#include "kiln/passes.h"
#include "kiln/scoreboard.h"
#include "kiln/target.h"

namespace kiln::cli {

struct ExecOptions {
  bool compile = true;    // false: --eager (one kernel per op)
  bool optimize = true;   // the default pass pipeline before compiling
  int threads = 0;
  const Target* target = &cpu_target();  // --device (kiln/target.h)
};

// A graph compiled for its target, with what it took to get there.
struct CompiledGraph {
  std::unique_ptr<Graph> optimized;
  PassStats pass_stats;
  std::shared_ptr<Executable> executable;
};

CompiledGraph optimize_and_compile(const Graph& g, const ExecOptions& options);
// Runs once to warm up, then once recorded into `sb`.
std::vector<HostTensor> run_measured(Executable& exe, const std::vector<HostTensor>& inputs, Scoreboard& sb);
// "eager: 23 kernels, 0.77 MB moved, 20.3 ms | compiled: 9 kernels, 0.31 MB moved, 1.2 ms".
std::string versus_line(const Scoreboard& eager, const Scoreboard& compiled);

}  // namespace kiln::cli
