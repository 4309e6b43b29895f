// The elementwise tail a oneDNN primitive (conv, matmul) applies to its result before writing it:
// activations, scalar or per-channel arithmetic, a residual sum. Why: one description shared by the
// conv and matmul wrappers and by the planner that matches a compiled program's kernels to it
// (runtime/onednn_plan.h); dnnl types stay in the .cc files.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/dtype.h"

namespace kiln::eager::onednn {

// One fused post-op, applied in order to the primitive's result (bias included).
struct PostOp {
  enum Kind {
    kRelu, kClip, kLinear,  // clip: [alpha, beta]; linear: alpha * x + beta
    kLogistic, kTanh, kExp, kAbs, kSqrt, kGeluErf, kGeluTanh, kSwish, kHardSwish,
    // with a broadcast operand: one value per output channel (conv) or per output column (matmul)
    kBinaryAdd, kBinarySub, kBinaryMul, kBinaryDiv, kBinaryMax, kBinaryMin,
    kSum,  // += a tensor of the output's shape (scale alpha)
  } kind;
  float alpha = 0, beta = 0;
  bool is_binary() const { return kind >= kBinaryAdd && kind <= kBinaryMin; }
};

std::string post_op_name(const PostOp& p);

// Special values: oneDNN's post-ops do not treat NaN and infinities as Kiln's ops do (relu(-inf)
// is 0 * -inf = NaN there, clip and max drop a NaN). A primitive with post-ops therefore checks
// that its sources are finite before each run (one vectorised read); when one is not, the caller
// takes the exact path: the eager kernel of the op (oneDNN's bf16 convs turn a NaN into NaNs beyond
// its window, from zero-padded taps), then the generated kernel the post-ops replaced, then
// adopt_plain_output. Finite sources cannot make a conv or GEMM produce a NaN short of overflow,
// where no two summation orders agree anyway. A step whose sources are finite whenever the graph's
// inputs are (runtime/onednn_plan.h) checks the graph's inputs instead, once per run.

// Whether `count` values of a float dtype are all finite (no NaN, no infinity); other dtypes are.
// Parallel and vectorised: one read at memory speed.
bool all_finite(const void* data, int64_t count, DType dt);

}  // namespace kiln::eager::onednn
