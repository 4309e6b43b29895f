// A conv2d prepared once on oneDNN: the primitive for one shape, dtype and list of fused post-ops
// (activations, per-channel or scalar arithmetic, a residual sum), its weights reordered to the
// layout oneDNN picks. Why: convolutions are two thirds of a CNN's time on the CPU, and oneDNN's
// JIT kernels (blocked layouts, AVX-512/AMX picked at run time) are 2-10x faster than im2col +
// OpenBLAS; fusing the elementwise tail saves a pass over the output per conv. The compiled CPU
// executable builds one per conv step (runtime/cpu_conv_plan.h); dnnl types stay in the .cc.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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
};

// True when oneDNN can run `spec` at all (dtype, groups); the primitive may still fail to build.
bool supports(const ConvSpec& spec);

class PreparedConv {
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

  // Blocked hand-off between convs of one program (runtime/onednn_plan.h): when this conv's result
  // is read only by other convs, as their source or as their residual, and their layouts agree, it
  // stays in oneDNN's blocked layout: no reorder out here, none in there. Wired once at compile
  // time; the consumers run after this conv in every run.
  bool can_feed_source(const PreparedConv& consumer) const;    // our dst layout is its src layout (blocked)
  bool can_feed_residual(const PreparedConv& consumer) const;  // our dst layout is its dst layout (blocked)
  void feed_source(PreparedConv& consumer) const;    // consumer reads its src from our blocked result
  void feed_residual(PreparedConv& consumer) const;  // consumer's sum post-op copies our blocked result
  void keep_output_blocked();                        // run() no longer writes the plain `y`

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace kiln::eager::onednn
