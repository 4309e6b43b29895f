// `kiln explain`'s analysis: per kernel its source ops, traffic, FLOPs, measured time and roofline
// bound against the calibrated ceilings, plus every fusion decision. Why: one structure that the
// text, JSON and HTML renderings share (fields documented in docs/cli.md).
#pragma once

#include <string>
#include <vector>

#include "kiln/ceilings.h"
#include "kiln/compile.h"
#include "kiln/host_tensor.h"

namespace kiln::cli {

struct KernelExplain {
  int index = 0;
  std::string name;
  bool library = false;
  std::string implementation;  // what runs a library step (oneDNN + post-ops, OpenBLAS, ...)
  std::vector<std::string> source_ops;
  int64_t bytes_read = 0, bytes_written = 0;
  double flops = 0;
  double intensity = 0;  // FLOPs per byte moved
  double time_us = 0;    // median over the repeats
  double launch_us = 0, bandwidth_us = 0, compute_us = 0;  // each ceiling's lower bound
  double bound_us = 0;   // the largest of the three
  std::string regime;    // "launch", "bandwidth" or "compute": which bound is largest
  double percent_of_ceiling = 0;  // bound_us / time_us * 100
};

struct DecisionExplain {
  std::string node, op, action, reason;
  int group = -1;
  std::vector<std::string> refusals;
};

struct ExplainReport {
  std::string model;
  int repeats = 0;
  Ceilings ceilings;
  std::vector<KernelExplain> kernels;
  std::vector<DecisionExplain> decisions;
  std::vector<std::string> decomposition_notes;
  int generated_kernels = 0, library_calls = 0;
  double run_us = 0;       // median whole Executable::run
  double kernel_us = 0;    // sum of the kernels' medians
  double bound_us = 0;     // sum of the kernels' bounds
  double launch_total_us = 0, bandwidth_total_us = 0, compute_total_us = 0;  // time by binding regime
  std::string graph_svg;   // the fused graph, for --html

  std::string to_text() const;
  std::string to_json() const;
  std::string to_html() const;
};

// Runs `exe` once to warm up and `repeats` times measured. `exe` must come from kiln::compile.
ExplainReport explain_executable(const std::string& model, Executable& exe, const std::vector<HostTensor>& inputs,
                                 const Ceilings& ceilings, int repeats);

}  // namespace kiln::cli
