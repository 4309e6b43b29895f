// `kiln run MODEL.onnx`: import, optimise + compile (or run eagerly), run on given or seeded random
// inputs, print the outputs' summaries and the scoreboard; optionally check, compare and save.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "run_compiled.h"

namespace kiln::cli {

struct ModelRunOptions {
  std::vector<std::string> inputs;   // NAME=FILE (.npy or ONNX .pb)
  std::vector<std::string> expects;  // NAME=FILE reference outputs
  std::vector<std::string> dims;     // NAME=VALUE for symbolic dims (default 1)
  std::string save_dir;              // writes DIR/<output>.npy
  bool check = false;                // compare with the reference interpreter
  uint64_t seed = 0;
  double atol = -1, rtol = -1;       // < 0: demo::default_tolerances of each output's dtype
  std::string dtype;                 // f16 | bf16: run the f32 model in 16 bits (to_float_precision)
};

void add_model_options(CLI::App& app, ModelRunOptions& options);
int run_model(const std::string& path, const ModelRunOptions& options, const ExecOptions& exec, bool json);

}  // namespace kiln::cli
