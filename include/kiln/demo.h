// Built-in demo models written with the tensor API (an MLP and a GPT-style transformer block),
// and the check that eager and traced+interpreted runs agree. Why: `kiln run` with no model shows
// the whole capture path end to end, and tests use the same models.
#pragma once

#include <memory>

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/scoreboard.h"
#include "kiln/tensor.h"

namespace kiln::demo {

// A stack of linear layers with relu between them (none after the last).
struct MlpParams {
  std::vector<Tensor> weights;  // [in, out]
  std::vector<Tensor> biases;   // [out]
};
// layer_sizes = {in, hidden..., out}; deterministic uniform init in +-1/sqrt(fan_in).
MlpParams make_mlp_params(const std::vector<int64_t>& layer_sizes, uint64_t seed,
                          DType dtype = DType::F32);
Tensor mlp(const Tensor& x, const MlpParams& params);  // x: [..., in]

struct BlockConfig {
  int64_t d_model = 64;
  int64_t num_heads = 4;
  int64_t d_ff = 256;
};
// Pre-norm GPT block parameters.
struct BlockParams {
  BlockConfig config;
  Tensor ln1_weight, ln1_bias;  // [C]
  Tensor w_qkv, b_qkv;          // [C, 3C], [3C]
  Tensor w_out, b_out;          // [C, C], [C]
  Tensor ln2_weight, ln2_bias;  // [C]
  Tensor w_fc1, b_fc1;          // [C, F], [F]
  Tensor w_fc2, b_fc2;          // [F, C], [C]
};
BlockParams make_block_params(const BlockConfig& config, uint64_t seed, DType dtype = DType::F32);
// x: [B, T, C] -> [B, T, C]: x + attn(ln1(x)), then + mlp(ln2(.)) with causal multi-head
// attention and tanh-free (exact) gelu. B and T may be symbolic when traced.
Tensor transformer_block(const Tensor& x, const BlockParams& params);

// How far `actual` is from `expected`. max_rel_error divides each difference by
// max(|expected|, atol), so values near zero do not blow it up.
struct Agreement {
  double max_abs_error = 0;
  double max_rel_error = 0;
  bool within_tolerance = true;  // every element: |a - e| <= atol + rtol * |e| (NaN == NaN)
  std::string to_string() const;
};
// Throws kiln::Error when dtypes or shapes differ.
Agreement compare(const HostTensor& expected, const HostTensor& actual, double atol, double rtol);
// The default (atol, rtol) for comparing results of dtype `d` (a few units in its last place,
// since compiled kernels round intermediates differently from the interpreter): 1e-4 and 1e-3
// for f32 and f64, 1e-2 for f16 (ulp 2^-10), 3e-2 for bf16 (ulp 2^-7); 0 for exact types.
std::pair<double, double> default_tolerances(DType d);
// The tolerances a comparison of dtype `d` uses: `atol` and `rtol` where given (>= 0), each default
// from default_tolerances otherwise (the CLI's --atol / --rtol).
std::pair<double, double> tolerances_for(DType d, double atol, double rtol);

struct DemoOptions {
  uint64_t seed = 0;
  double atol = 1e-4;
  double rtol = 1e-3;
};

// One model of the demo: eager vs traced+interpreted on two batch sizes of one trace.
struct DemoResult {
  std::string model;
  std::vector<std::string> input_shapes;  // one per run, e.g. "f32[4, 64]"
  Agreement agreement;                    // worst over the runs
  int num_traces = 0;                     // 1 when the dynamic batch dim avoided re-tracing
  std::string graph_summary;              // "23 nodes, inputs f32[B, 64]"
  Scoreboard eager_scoreboard;            // the eager run at the first input shape
  std::shared_ptr<const Graph> graph;     // the traced graph (a copy), for compiling
  HostTensor first_input;                 // the first input...
  HostTensor reference_output;            // ...and the interpreter's output on it
  bool ok() const { return agreement.within_tolerance && num_traces == 1; }
};

// Runs the MLP and the transformer block eagerly and through trace + interpreter.
std::vector<DemoResult> run_demo(const DemoOptions& options = {});

}  // namespace kiln::demo
