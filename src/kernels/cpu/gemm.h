// Row-major GEMMs (f32/f64) run on Kiln's OpenMP team: OpenBLAS is kept single-threaded and each
// OpenMP thread calls it on its own block of the output (or its own batch entries). Why: OpenBLAS's
// pthread pool and the OpenMP team of the generated kernels spin-wait against each other when both
// are busy on the same cores — on 2 cores every step of the GPT block then cost ~12 ms whatever
// its size (bench/results); one pool for every parallel loop keeps each step at its real cost.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/cpu_common.h"

namespace kiln::eager::detail {

// Makes OpenBLAS single-threaded (once per process, and again after anyone changes it).
void use_single_threaded_blas();

// C[m x n] = A[m x k] * B[k x n] + beta * C, row-major with leading dimensions, on the calling
// thread only.
void gemm_serial(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                 float beta, float* c, int64_t ldc);
void gemm_serial(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
                 double beta, double* c, int64_t ldc);

// C[m x n] = alpha * A[m x k] * B^T with B stored [n x k] (row-major, ldb >= k), beta = 0, on the
// calling thread: attention's q k^T without materialising k^T.
void gemm_serial_bt(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                    int64_t ldb, float* c, int64_t ldc);

// Below this many multiply-adds a GEMM runs on the calling thread: an OpenMP team costs a few
// microseconds, a small GEMM less.
inline constexpr int64_t kGemmParallelMacs = int64_t(1) << 17;

// The same product split over the OpenMP team: column blocks when C is wide, row blocks when tall.
template <typename T>
void gemm_parallel(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T beta,
                   T* c, int64_t ldc) {
  use_single_threaded_blas();
  const int threads = omp_get_max_threads();
  if (threads <= 1 || omp_in_parallel() || m * n * k < kGemmParallelMacs || (m < 2 && n < 2)) {
    gemm_serial(m, n, k, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Columns are split in multiples of 16 (whole SIMD panels); rows when there are too few columns.
  // Up to 4 blocks per thread, handed out dynamically: a thread the OS preempts (a shared machine)
  // delays one block, not the whole product; each block re-packs only its own panel of A or B.
  const bool by_columns = n >= 16 * int64_t(threads) || n >= m;
  const int64_t extent = by_columns ? n : m, align = by_columns ? 16 : 4;
  const int64_t units = (extent + align - 1) / align;
  const int64_t min_block_macs = kGemmParallelMacs / 2;  // blocks stay worth a GEMM call
  const int64_t max_blocks = std::max<int64_t>(1, m * n * k / min_block_macs);
  const int blocks = int(std::min({int64_t(threads) * 4, units, max_blocks}));
  if (blocks < 2) {
    gemm_serial(m, n, k, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(std::min(blocks, threads))
  for (int blk = 0; blk < blocks; ++blk) {
    int64_t begin = std::min(extent, units * blk / blocks * align);
    int64_t end = std::min(extent, units * (blk + 1) / blocks * align);
    if (begin >= end) continue;
    if (by_columns) gemm_serial(m, end - begin, k, a, lda, b + begin, ldb, beta, c + begin, ldc);
    else gemm_serial(end - begin, n, k, a + begin * lda, lda, b, ldb, beta, c + begin * ldc, ldc);
  }
}

// `count` independent products of one shape; operands(i, a, b, c) sets batch i's pointers (dense:
// lda = k, ldb = ldc = n). Batches go to threads whole when there are enough of them, else each
// product is split over the team.
template <typename T, typename Operands>
void gemm_batched(int64_t count, int64_t m, int64_t n, int64_t k, Operands&& operands) {
  use_single_threaded_blas();
  const int threads = omp_get_max_threads();
  if (count >= threads && threads > 1 && !omp_in_parallel() && count * m * n * k >= kGemmParallelMacs) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < count; ++i) {
      const T *a, *b;
      T* c;
      operands(i, a, b, c);
      gemm_serial(m, n, k, a, k, b, n, T(0), c, n);
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    const T *a, *b;
    T* c;
    operands(i, a, b, c);
    gemm_parallel(m, n, k, a, k, b, n, T(0), c, n);
  }
}

}  // namespace kiln::eager::detail
