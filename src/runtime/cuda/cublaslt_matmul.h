// Matrix products with fused epilogues (bias, ReLU, GELU) through cuBLASLt, loaded with dlopen.
// Why: the GPU backend hands matmul + bias + activation to the vendor library, which reaches the
// tensor cores' rate, and fuses the epilogue so the product is written once.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/dtype.h"
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/cuda_stream.h"

namespace kiln::cuda {

enum class MatmulEpilogue { None, Bias, Relu, ReluBias, Gelu, GeluBias };
const char* matmul_epilogue_name(MatmulEpilogue epilogue);
bool epilogue_has_bias(MatmulEpilogue epilogue);

// Whether libcublasLt could be loaded; the message names what was tried when it could not.
struct CublasLtStatus {
  bool loaded = false;
  std::size_t version = 0;
  std::string message;
};
const CublasLtStatus& cublaslt_status();

// Row-major out[m, n] = epilogue(a[m, k] @ b[k, n] (+ bias[n])) (+ c[m, n]), in f32, f16 or bf16,
// with f32 accumulation. The GELU epilogue is cuBLASLt's tanh approximation.
class LtMatmul {
 public:
  static constexpr std::size_t kWorkspaceBytes = std::size_t(32) << 20;

  LtMatmul(int64_t m, int64_t n, int64_t k, DType dtype, MatmulEpilogue epilogue);
  // `batch` products out[i] = a[i] @ b[i]; each operand's i-th matrix starts `stride_*` elements
  // after the previous one (0: the same matrix for every i, i.e. a broadcast operand).
  struct Batch {
    int64_t count = 1;
    int64_t stride_a = 0, stride_b = 0, stride_out = 0;
  };
  // `accumulate`: run() adds a `c` matrix of the output's layout (beta = 1): out = epilogue(a@b) + c.
  LtMatmul(int64_t m, int64_t n, int64_t k, DType dtype, MatmulEpilogue epilogue, Batch batch,
           bool accumulate = false);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  // `workspace` holds kWorkspaceBytes; `bias` is ignored (may be 0) without a bias epilogue.
  void run(DevicePtr a, DevicePtr b, DevicePtr bias, DevicePtr out, DevicePtr workspace,
           const Stream& stream, DevicePtr c = 0);
  double flops() const { return 2.0 * double(batch_.count) * double(m_) * double(n_) * double(k_); }

 private:
  struct Descriptors;
  int64_t m_, n_, k_;
  MatmulEpilogue epilogue_;
  Batch batch_;
  bool accumulate_ = false;
  bool f64_ = false;  // double scale type: alpha and beta passed as doubles
  Descriptors* descriptors_ = nullptr;
};

}  // namespace kiln::cuda
