// A matmul prepared once on oneDNN: the primitive for one shape, dtype and list of fused post-ops
// (bias as a per-column add, activations, a residual sum), constant weights reordered once to the
// layout oneDNN picks. Why: the GEMMs of transformer layers and MLPs are most of their time on the
// CPU; oneDNN's JIT kernels pick AVX-512/AMX at run time (OpenBLAS is told to run AVX2 kernels on
// this machine class), and the folded tail saves a pass over the output per GEMM. The compiled CPU
// executable builds one per matmul step it can (runtime/onednn_plan.h); dnnl types stay in the .cc.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/onednn_post_ops.h"
#include "kiln/dtype.h"

namespace kiln::eager::onednn {

// C[batch, m, n] = A[batch, m, k] @ B[batch or 1, k, n], all row-major and dense.
struct MatmulSpec {
  DType dtype = DType::F32;  // f32 or bf16 (a, b, c and the operands alike)
  int64_t batch = 1, m = 1, k = 1, n = 1;
  bool shared_b = true;  // B is one [k, n] matrix for every batch entry
  std::vector<PostOp> post_ops;  // binary post-ops read a [n] vector (one value per column)
};

bool supports(const MatmulSpec& spec);

class PreparedMatmul {
 public:
  // Throws kiln::Error when oneDNN has no primitive for the spec. `constant_b`: B will be given
  // once to set_constant_weights (then stored in oneDNN's preferred layout).
  PreparedMatmul(const MatmulSpec& spec, bool constant_b);
  ~PreparedMatmul();
  void set_constant_weights(const void* b);
  // c = post_ops(a @ b): `column_operands` the binary post-ops' [n] vectors in order,
  // `sum_operand` the residual of a kSum post-op (may alias c). Runs on omp_get_max_threads.
  void run(const void* a, const void* b, const std::vector<const void*>& column_operands, const void* sum_operand,
           void* c);
  std::string implementation() const;

  // Whether oneDNN's kernel mishandles non-finite sources even without post-ops: every bf16 one.
  // The bf16 dot-product instruction (vdpbf16ps) reads denormals as zero, so inf times a denormal
  // is NaN where the reference has inf; and with an odd K it multiplies pairs of elements, reading
  // one past each row of A against B's zero padding, so a non-finite neighbour makes a finite
  // result NaN (tests/fuzz/regressions/bf16-*-onednn-*). The run then checks sources_finite first,
  // as for post-ops.
  bool mishandles_nonfinite() const;
  // The exact path for sources that are not all finite (onednn_post_ops.h): b is checked unless
  // it is constant (checked once by set_constant_weights).
  bool sources_finite(const void* a, const void* b, const std::vector<const void*>& column_operands,
                      const void* sum_operand) const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace kiln::eager::onednn
