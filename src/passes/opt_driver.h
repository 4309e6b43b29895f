// kiln-opt's flag handling and report formatting, as a library. Why: the text-IR pass tests run
// exactly what `kiln-opt <flags>` runs, in process, from the RUN line of each .kir file.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/passes.h"

namespace kiln::passes {

struct OptInvocation {
  OptimizeOptions options;
  std::vector<std::string> inputs;  // positional arguments
  std::string output_path;          // -o; empty: stdout
  bool list_passes = false;
  bool help = false;
  bool stats = false;               // --stats: markdown node counts by op per pass, and timing
  std::string stats_title;          // --stats-title=name (the model's name in the report)
  // --input-shape=name:d0,d1,...: specialise an ONNX model's input to a concrete shape (repeatable),
  // so shape sub-graphs that need concrete sizes (MiniLM's Slice ends) import.
  std::map<std::string, std::vector<int64_t>> input_shapes;
};

// Parses kiln-opt's command line (without argv[0]). Throws kiln::Error naming a bad flag.
OptInvocation parse_opt_args(const std::vector<std::string>& args);
std::string opt_usage();

// Splits a RUN line's command ("kiln-opt --passes=cse %s") into arguments, dropping the tool
// name and "%s".
std::vector<std::string> split_run_line(const std::string& command);

// A markdown report: nodes by op before and after every pass run that changed the graph, and
// time per pass.
std::string stats_markdown(const PassStats& stats, const std::string& title);

}  // namespace kiln::passes
