// CUDA source for a fused chain of elementwise ops with scalar operands, over f32/f16/bf16. Why:
// the GPU "gap meter" needs a fused kernel and its one-launch-per-op counterpart before the shared
// C-like emitter has a CUDA target; this hand-templated generator is that seed and will be replaced
// by the emitter. The text is pure (no GPU needed), so its pieces are unit-tested on the CPU.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/dtype.h"

namespace kiln::cuda {

// X-macro: enum name, text name, takes the scalar, CUDA expression of float x and float s.
#define KILN_CHAIN_OPS(X)                                            \
  X(Add, "add", true, "x + s")                                       \
  X(Sub, "sub", true, "x - s")                                       \
  X(Mul, "mul", true, "x * s")                                       \
  X(Max, "max", true, "fmaxf(x, s)")                                 \
  X(Min, "min", true, "fminf(x, s)")                                 \
  X(Relu, "relu", false, "fmaxf(x, 0.0f)")                           \
  X(Neg, "neg", false, "-x")                                         \
  X(Abs, "abs", false, "fabsf(x)")                                   \
  X(Exp, "exp", false, "expf(x)")                                    \
  X(Tanh, "tanh", false, "tanhf(x)")                                 \
  X(Sigmoid, "sigmoid", false, "1.0f / (1.0f + expf(-x))")           \
  X(Gelu, "gelu", false, "0.5f * x * (1.0f + erff(x * 0.70710678118654752f))")

enum class ChainOp {
#define KILN_X(e, name, scalar, expr) e,
  KILN_CHAIN_OPS(KILN_X)
#undef KILN_X
};

struct ChainStep {
  ChainOp op = ChainOp::Add;
  double scalar = 0;  // ignored by ops that take none
};

std::string_view chain_op_name(ChainOp op);
std::optional<ChainOp> parse_chain_op(std::string_view name);
bool chain_op_takes_scalar(ChainOp op);
// "mul(0.5),add(1),relu" <-> steps; throws kiln::Error naming an unknown op.
std::vector<ChainStep> parse_chain(std::string_view text);
std::string chain_to_string(const std::vector<ChainStep>& steps);

// The float64 reference of one step and of a whole chain.
double apply_step_reference(const ChainStep& step, double x);
double apply_chain_reference(const std::vector<ChainStep>& steps, double x);

// Elementwise chains run only on these dtypes (computed in f32, stored in the dtype).
bool chain_supports_dtype(DType dtype);
// Elements per 16-byte vector: 4 for f32, 8 for f16/bf16.
int chain_vector_width(DType dtype);

struct ChainKernelOptions {
  int block_threads = 256;
  int vectors_per_thread = 1;  // 16-byte loads a thread issues before its first store
  // true: as many blocks as fit on the device at once, looping over the data (grid-stride);
  // false: enough blocks to cover the data once (each thread does one loop step). On the H200
  // (2026-11-29, bench/results/gpu-h200-gap.md) covering with 1 vector per thread ran a bf16
  // 8-op chain at 88-93% of cuMemcpyDtoD bandwidth, the persistent grid at 80-84%.
  bool persistent_grid = false;
};

// The kernel's extern "C" name: "kiln_chain_bf16_mul_add_relu" (no steps: "kiln_chain_bf16_copy").
std::string chain_kernel_name(const std::vector<ChainStep>& steps, DType dtype);

// A complete NVRTC translation unit defining
//   extern "C" __global__ void <chain_kernel_name>(const void* in, void* out, long long n)
// that applies the steps to n elements; in and out must be 16-byte aligned (the caching allocator
// aligns to 512). Scalars appear as exact hex float literals, so equal chains give equal text.
std::string chain_kernel_source(const std::vector<ChainStep>& steps, DType dtype,
                                const ChainKernelOptions& options = {});

}  // namespace kiln::cuda
