// A conv2d prepared once on oneDNN: the primitive for one shape, dtype and list of fused post-ops
// (activations, per-channel or scalar arithmetic, a residual sum), its weights reordered to the
// layout oneDNN picks. Why: convolutions are two thirds of a CNN's time on the CPU, and oneDNN's
// JIT kernels (blocked layouts, AVX-512/AMX picked at run time) are 2-10x faster than im2col +
// OpenBLAS; fusing the elementwise tail saves a pass over the output per conv. The compiled CPU
// executable builds one per conv step (runtime/onednn_plan.h); dnnl types stay in the .cc.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/onednn_handoff.h"
#include "kernels/cpu/onednn_post_ops.h"
#include "kiln/dtype.h"

namespace kiln::eager::onednn {

struct ConvSpec {
  DType dtype = DType::F32;                 // f32 or bf16 (x, w, bias, y and operands alike)
  int64_t x[4], w[4], y[4];                 // NCHW; w is [O, C/groups, kH, kW]
  int64_t strides[2], pads[4], dilations[2];  // pads = [top, left, bottom, right]
  int64_t groups = 1;
  bool has_bias = false;
  std::vector<PostOp> post_ops;
  // Ask for a channel-blocked destination (nChw16c on AVX-512) where oneDNN would pick another
  // layout: the planner sets it for models whose convs feed channel concats (onednn_plan.cc).
  bool channel_blocked_dst = false;
};

// True when oneDNN can run `spec` at all (dtype, groups); the primitive may still fail to build.
bool supports(const ConvSpec& spec);

class PreparedConv : public BlockedIo {
 public:
  // Throws kiln::Error when oneDNN has no primitive for the spec.
  explicit PreparedConv(const ConvSpec& spec);
  ~PreparedConv();
  // Reorders constant weights into the primitive's layout once; run() then ignores its `w`.
  void set_constant_weights(const void* w);
  // y = post_ops(conv(x, w) + bias): `channel_operands` are the binary post-ops' [C] vectors in
  // order; `sum_operand` the residual for a kSum post-op (may alias y). Runs on the caller's
  // OpenMP team size (omp_get_max_threads).
  void run(const void* x, const void* w, const void* bias, const std::vector<const void*>& channel_operands,
           const void* sum_operand, void* y);
  std::string implementation() const;  // oneDNN's implementation name, e.g. "brgconv:avx512_core"

  // Whether oneDNN's kernel mishandles non-finite sources even without post-ops: every bf16 conv
  // (denormals read as zero, odd channel counts read one channel past the last against zero weight
  // padding: PreparedMatmul::mishandles_nonfinite), and an im2col (gemm) conv with padding, which
  // multiplies every weight by the padding's zeros (inf * 0 = NaN where the reference skips
  // padding). The run then checks sources_finite first, as for post-ops.
  bool mishandles_nonfinite() const;
  // The exact path for sources that are not all finite (onednn_post_ops.h). `w` is read only where
  // mishandles_nonfinite says weights matter and they are not constant (constant ones are checked
  // once).
  bool sources_finite(const void* x, const void* w, const std::vector<const void*>& channel_operands,
                      const void* sum_operand) const;
  // Writes the plain x and residual from the blocked ones when they were handed over, for the
  // eager kernels of the exact path to read.
  void materialize_plain_sources(const void* x, const void* sum_operand);
  // The generated kernel wrote the plain result `y`: into the blocked one too when it is kept.
  void adopt_plain_output(const void* y);


 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace kiln::eager::onednn
