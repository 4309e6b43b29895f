// Fused row reductions (src/codegen/cuda/rows/fused_row_reductions.cc): softmax's max and sum,
// layer norm's mean and variance as one reduction a row, or two when turned off; on a GPU, the
// unfused form and the fused one at special values against the interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "unit/cuda/row_forms_test_util.h"

namespace kiln::testing {
namespace {

// Turned off, layer norm's mean and variance are two block reductions again (rows_register_test.cc
// has the fused forms of softmax and layer norm in one block and over a cluster).
TEST(CudaFusedRowReductions, UnfusedRowsReduceOnceALoop) {
  // Unfused (FusedReductionOptions::enabled off): two float reductions, as before.
  codegen::cuda::CudaEmitOptions unfused_options;
  unfused_options.rows.fused.enabled = false;
  auto unfused = row_kernel(Op::LayerNorm, DType::F32, 5, 1000, unfused_options, "_unfused");
  EXPECT_EQ(unfused.source.find("kiln_mean_m2"), std::string::npos) << unfused.source;
  auto first_reduce = unfused.source.find("kiln_block_reduce<float>");
  EXPECT_NE(unfused.source.find("kiln_block_reduce<float>", first_reduce + 1), std::string::npos) << unfused.source;
  expect_kernels_compile({unfused}, "unfused_rows.cu");
}

// Split over a cluster without fused reductions (two generic cluster reductions a row) against
// the interpreter on the row-form graph (row_forms_test_util.h).
TEST(CudaFusedRowReductions, UnfusedClusterRowsMatchTheInterpreter) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  expect_row_variant_matches(RowFormVariant{"unfused cluster", true, 8, 8, true, false});
}

// Fused row reductions (softmax's max and sum, layer norm's mean and variance as one reduction a
// row) at the values that break naive versions: rows entirely -inf (NaN out, as unfused), rows
// with some -inf (masked attention), +inf and NaN elements, rows far below zero, and layer norm
// rows offset far from zero (Chan's variance keeps the small spread), in one block and split
// over a cluster, against the interpreter.
TEST(CudaFusedRowReductions, FusedRowReductionsKeepSpecialValuesAndLargeOffsets) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  const double inf = std::numeric_limits<double>::infinity();
  for (int cluster : {1, 8, -8}) {  // -8: a cluster of 8 exchanging partials by mail
    codegen::cuda::RowFormOptions f;
    f.mail.enabled = cluster < 0;
    cluster = std::abs(cluster);
    f.registers.max_cluster = cluster;
    if (cluster > 1) f.registers.max_per_thread = 8, f.registers.preferred_threads = 32;
    for (DType t : {DType::F32, DType::BF16}) {
      const int64_t rows = 9, cols = 3001;
      Graph g("special_rows");
      Value* x = g.add_input("x", TensorType{t, {SymInt(rows), SymInt(cols)}, Device::CPU});
      Value* big = g.add_input("big", TensorType{t, {SymInt(rows), SymInt(cols)}, Device::CPU});
      Value* w = g.add_input("w", TensorType{t, {SymInt(cols)}, Device::CPU});
      g.set_outputs({g.add(Op::Softmax, {x}), g.add(Op::LogSoftmax, {x}), g.add(Op::LayerNorm, {big, w, w})});
      std::vector<std::vector<HostTensor>> runs;
      for (uint64_t r = 0; r < 2; ++r) {
        HostTensor xs = HostTensor::random(t, {rows, cols}, 500 + r, -4, 4);
        for (int64_t j = 0; j < cols; ++j) {
          xs.set_f64(0 * cols + j, -inf);                          // every element -inf
          if (j % 3 != 1) xs.set_f64(1 * cols + j, -inf);          // masked: a third survives
          if (j < cols / 2 + 7) xs.set_f64(2 * cols + j, -inf);    // the first blocks see only -inf
          xs.set_f64(3 * cols + j, -1000 + double(j % 17) / 4);    // far below zero
        }
        xs.set_f64(4 * cols + 1234, inf);
        xs.set_f64(5 * cols + 17, std::nan(""));
        xs.set_f64(6 * cols + cols - 1, 80);  // one large element at the row's end
        HostTensor bigs = HostTensor::random(t, {rows, cols}, 600 + r, -1, 1);
        // Far from zero in f32 (a sum of squares there loses ~4 of f32's 7 digits to cancellation;
        // much further and x - mean itself is ill-conditioned); bf16 cannot hold a small spread
        // there (the reference rounds the mean to bf16), so its rows stay near zero.
        if (t == DType::F32)
          for (int64_t i = 0; i < rows * cols; ++i) bigs.set_f64(i, bigs.get_f64(i) + 100);
        runs.push_back({xs, bigs, HostTensor::random(t, {cols}, 700 + r, 0.5, 1.5)});
      }
      expect_cuda_matches(g, runs, str("fused rows, cluster ", cluster, f.mail.enabled ? " by mail " : " ", dtype_name(t)),
                          cuda_options(), f);
    }
  }
}

}  // namespace
}  // namespace kiln::testing
