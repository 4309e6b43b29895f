// Activation recognition: spells gelu's expansions, as PyTorch's ONNX exporters write them, as one
// `gelu` node — x * 0.5 * (1 + erf(x / sqrt 2)) as gelu, and GPT-2's
// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) as gelu(approximate="tanh"). Why: the
// expansion is 6-9 elementwise ops (scalar pow, tanh and erf calls in a generated kernel: 57% of a
// GPT-2 block's CPU time); one gelu is one vectorised prelude call, and a oneDNN post-op or a
// cuBLASLt epilogue right after the matmul that feeds it. Not bit-exact: the result is gelu
// evaluated once (within a few ulp of the expansion in f32); `--disable-pass` turns it off.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

class ActivationRecognition : public Pass {
 public:
  explicit ActivationRecognition(const OptimizeOptions&) {}
  std::string_view name() const override { return "activation-recognition"; }
  bool run(Graph& g) override;
};

}  // namespace kiln::passes
