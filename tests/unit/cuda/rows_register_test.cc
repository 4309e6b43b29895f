// Register rows (src/codegen/cuda/rows/register_rows.cc, register_rows_emit.cc): the source of
// register-row kernels, in one block and split over a cluster, compiled by NVRTC wherever it loads;
// and on a GPU every variant of the form against the interpreter.
#include <gtest/gtest.h>

#include "unit/cuda/row_forms_test_util.h"

namespace kiln::testing {
namespace {

// Register rows: a row kernel whose loops share one constant extent holds the row in per-thread
// arrays (one vector load per chunk), keeps softmax's exp from the sum loop for the write loop,
// multiplies by the sum's reciprocal (16-bit outputs only), and splits rows too long for one
// block over a thread-block cluster. Each form compiles with NVRTC for sm_90.
TEST(CudaRegisterRows, RowsAreHeldInRegistersAndLongRowsSplitOverAClusters) {
  auto kernel_of = [](Op op, DType t, int64_t rows, int64_t cols, int max_cluster) {
    return row_kernel(op, t, rows, cols, cluster_emit_options(max_cluster), str("_cluster", max_cluster));
  };
  auto softmax = kernel_of(Op::Softmax, DType::BF16, 64, 4096, 1);
  EXPECT_EQ(softmax.block_threads, 256) << softmax.source;
  EXPECT_EQ(softmax.shared_bytes, 0) << softmax.source;
  EXPECT_NE(softmax.source.find("rows in registers: 256 threads x 16 elements"), std::string::npos) << softmax.source;
  // The first row is loaded before the row loop, each next row while the current one computes.
  EXPECT_NE(softmax.source.find("kiln_load_regs<kiln_block, 8>(p1000, p0 + (4096*i0_next), kiln_valid);"), std::string::npos)
      << softmax.source;
  EXPECT_NE(softmax.source.find("kiln_load_regs<kiln_block, 8>(kiln_next0, p0 + (4096*i0_next), kiln_valid);"),
            std::string::npos)
      << softmax.source;
  EXPECT_NE(softmax.source.find("p1000[kiln_e] = kiln_next0[kiln_e];"), std::string::npos) << softmax.source;
  EXPECT_NE(softmax.source.find("kiln_exp16("), std::string::npos) << "bf16 output: " << softmax.source;
  EXPECT_NE(softmax.source.find("kiln_store_regs<kiln_block, 8>(p1 + (4096*i0), p1001, kiln_valid);"), std::string::npos)
      << softmax.source;
  EXPECT_EQ(softmax.source.find("p0[4096*i0 + i1]"), std::string::npos) << "every row read is in registers: " << softmax.source;
  EXPECT_NE(softmax.source.find("kiln_keep0[kiln_e] = "), std::string::npos) << "exp is kept: " << softmax.source;
  // Max and sum are one reduction (kiln_max_sum); the write loop's exp(x - max) is the kept
  // exp(x - thread max) times the thread's rescale.
  EXPECT_NE(softmax.source.find("= (kiln_keep0[kiln_e] * kiln_rescale_acc0);"), std::string::npos) << softmax.source;
  EXPECT_NE(softmax.source.find("kiln_reduce_fused<1, 0>(kiln_max_sum{acc0, acc1}, kiln_parity)"), std::string::npos) << softmax.source;
  EXPECT_EQ(softmax.source.find("kiln_block_reduce<float>"), std::string::npos) << "one reduction a row: " << softmax.source;
  EXPECT_NE(softmax.source.find("const float kiln_rcp_"), std::string::npos) << softmax.source;
  EXPECT_EQ(softmax.source.find("if (i1 < kiln_end)"), std::string::npos) << "4096 = 256 x 16: no guard" << softmax.source;
  // f32 output: the division stays a division; 1000 is not a whole number of chunks: guarded.
  auto f32_softmax = kernel_of(Op::Softmax, DType::F32, 64, 4096, 1);
  EXPECT_EQ(f32_softmax.source.find("kiln_exp16("), std::string::npos) << "f32 output: exact exp " << f32_softmax.source;
  EXPECT_EQ(f32_softmax.source.find("kiln_rcp_"), std::string::npos) << f32_softmax.source;
  auto norm = kernel_of(Op::LayerNorm, DType::F32, 5, 1000, 1);
  EXPECT_NE(norm.source.find("rows in registers: 64 threads x 16 elements"), std::string::npos) << norm.source;
  EXPECT_NE(norm.source.find("if (i1 < kiln_end)"), std::string::npos) << norm.source;
  EXPECT_EQ(norm.source.find("kiln_rcp_"), std::string::npos) << norm.source;
  EXPECT_NE(norm.source.find("(out)'s part of the row"), std::string::npos) << norm.source;
  // Mean and variance are one reduction (Chan's parallel variance over per-thread counts).
  EXPECT_NE(norm.source.find("kiln_reduce_fused<1, 0>(kiln_mean_m2{kiln_count_acc0, acc0, acc1}, kiln_parity)"), std::string::npos) << norm.source;
  EXPECT_EQ(norm.source.find("kiln_block_reduce<float>"), std::string::npos) << norm.source;
  // At 32 elements a thread mean and variance stay two reductions (registers; rows/register_rows.cc).
  auto long_norm = kernel_of(Op::LayerNorm, DType::BF16, 2, 32768, 16);
  EXPECT_NE(long_norm.source.find("x 32 elements x 4 blocks"), std::string::npos) << long_norm.source;
  EXPECT_EQ(long_norm.source.find("kiln_mean_m2{"), std::string::npos) << long_norm.source;
  // Split over a cluster, its weights are read a 16-byte chunk at a time in the write loop, and
  // the output stored a chunk at a time (registers for the weights' chunks).
  EXPECT_NE(long_norm.source.find("if (kiln_e % 8 == 0) kiln_load_chunk<8>(p1001, kiln_e, p1 + (0) + i1);"),
            std::string::npos)
      << long_norm.source;
  EXPECT_NE(long_norm.source.find("if (kiln_e % 8 == 7) kiln_store_chunk<8>(p2 + (32768*i0) + (i1 - 7), p1002, kiln_e - 7);"),
            std::string::npos)
      << long_norm.source;
  EXPECT_EQ(long_norm.source.find("kiln_store_regs"), std::string::npos) << long_norm.source;
  // 262144 bf16 elements: 8 blocks of 1024 threads x 32 elements, reductions across the cluster.
  auto split = kernel_of(Op::Softmax, DType::BF16, 2, 262144, 8);
  EXPECT_EQ(split.cluster, 8) << split.source;
  EXPECT_NE(split.source.find("__cluster_dims__(8, 1, 1)"), std::string::npos) << split.source;
  EXPECT_NE(split.source.find("kiln_reduce_fused<8, 0>(kiln_max_sum{"), std::string::npos) << split.source;
  EXPECT_NE(split.source.find("kiln_row = blockIdx.x / 8"), std::string::npos) << split.source;
  // One (fused) reduction a row: its slots alternate row by row, so no barrier at each row's end;
  // one before the blocks leave.
  EXPECT_NE(split.source.find("++kiln_parity;"), std::string::npos) << split.source;
  EXPECT_EQ(split.source.find("kiln_cluster_sync();  // the cluster's reductions"), std::string::npos) << split.source;
  EXPECT_NE(split.source.find("kiln_cluster_sync();  // no block leaves"), std::string::npos) << split.source;
  // Without clusters such a row falls back to the shared-memory path (here: too long to stage).
  auto unsplit = kernel_of(Op::Softmax, DType::BF16, 2, 262144, 1);
  EXPECT_EQ(unsplit.cluster, 1);
  EXPECT_EQ(unsplit.source.find("rows in registers"), std::string::npos) << unsplit.source;
  expect_kernels_compile({softmax, f32_softmax, norm, long_norm, split, unsplit}, "register_rows.cu");
}

// Register rows (with and without prefetching the next row), split over a cluster of up to 8 or
// 16 blocks (forced here for long rows by allowing 8 elements a thread), with and without chunked
// weights; split over a cluster, weights read from a shared-memory copy (the default) or from L1 —
// against the interpreter on the row-form graph (row_forms_test_util.h).
TEST(CudaRegisterRows, RegisterAndClusterRowsMatchTheInterpreter) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  for (const RowFormVariant& v :
       {RowFormVariant{"registers", true, 32, 1, true}, RowFormVariant{"no prefetch", true, 32, 1, false},
        RowFormVariant{"cluster", true, 8, 8, true}, RowFormVariant{"cluster16", true, 8, 16, true},
        RowFormVariant{"unchunked cluster", true, 8, 8, true, true, false},
        RowFormVariant{"cluster, weights from L1", true, 8, 8, true, true, true, 1 << 20, 1024, false, false}})
    expect_row_variant_matches(v);
}

}  // namespace
}  // namespace kiln::testing
