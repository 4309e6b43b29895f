// Single-threaded OpenBLAS calls behind the OpenMP-split GEMMs of gemm.h. Why: the one place that
// talks to cblas, so the threading rule (OpenBLAS never starts its own threads) holds everywhere.
#include "kernels/cpu/gemm.h"

#include <cblas.h>

namespace kiln::eager::detail {

namespace {

// k == 0: C = beta * C (BLAS rejects a zero leading dimension, so it is done here).
template <typename T> void scale_only(int64_t m, int64_t n, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
}

}  // namespace

void use_single_threaded_blas() {
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

void gemm_serial(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                 float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return scale_only(m, n, beta, c, ldc);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0f, a, int(lda), b, int(ldb),
              beta, c, int(ldc));
}

void gemm_serial(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
                 double beta, double* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return scale_only(m, n, beta, c, ldc);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0, a, int(lda), b, int(ldb),
              beta, c, int(ldc));
}

void gemm_serial_bt(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                    int64_t ldb, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return scale_only(m, n, 0.0f, c, ldc);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb),
              0.0f, c, int(ldc));
}

}  // namespace kiln::eager::detail
