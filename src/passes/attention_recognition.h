// Attention recognition: spells scaled dot-product attention, as PyTorch's ONNX exporters write it —
// matmul(softmax(matmul(q * a, kT * b) * c + mask), v), with torch's where(isnan(p), 0, p) after
// the softmax — as one `attention` node, for targets that run attention natively (the CUDA target's
// fused kernel). Why: decomposed, attention writes the [B, H, Tq, Tk] scores and reads them back
// three times (GPT-2 at 8 x 512 tokens: ~200 MB a layer); fused, the scores never leave the
// multiprocessor. A constant mask that is exactly causal (0 on and below the diagonal, -inf or a
// value at or below half the dtype's lowest finite one above it, no row fully masked) becomes
// causal=1, so the kernel skips the masked tiles; any other mask stays an additive operand. Not
// bit-exact: the scale is applied once to the scores (the exporter scales q and k by its square
// root each); `--disable-pass` turns it off.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

class AttentionRecognition : public Pass {
 public:
  explicit AttentionRecognition(const OptimizeOptions& options) : native_(options.target.is_native(Op::Attention)) {}
  std::string_view name() const override { return "attention-recognition"; }
  bool run(Graph& g) override;

 private:
  bool native_;  // targets that decompose attention gain nothing from the rewrite
};

}  // namespace kiln::passes
