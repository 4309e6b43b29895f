// Bulk rows (src/codegen/cuda/rows/bulk_rows.cc): the source of kernels whose next rows come
// through a ring of shared-memory stages the copy engine fills, in one block and split over a
// cluster, compiled by NVRTC wherever it loads; and on a GPU the form against the interpreter.
#include <gtest/gtest.h>

#include "unit/cuda/row_forms_test_util.h"

namespace kiln::testing {
namespace {

TEST(CudaBulkRows, LongRowsComeThroughARingOfStagesTheCopyEngineFills) {
  // Bulk rows (an H200's shared memory): at 32 elements a thread the next rows come through a
  // ring of stages the copy engine fills, instead of a second register array.
  const codegen::cuda::CudaEmitOptions bulk_options = bulk_emit_options();
  // The whole row in one block of 1024 threads (no cluster): softmax with three 64 KiB stages,
  // layer norm with two (its 64 KiB of weights stay in L1) and mean and variance fused.
  auto expect_whole_row_ring = [](const codegen::cuda::CudaKernelSource& k, int stages) {
    EXPECT_NE(k.source.find(str("rows in registers: 1024 threads x 32 elements, a ring of ", stages,
                                " rows in shared memory")),
              std::string::npos)
        << k.source;
    EXPECT_EQ(k.cluster, 1);
    EXPECT_EQ(k.bulk_stages, stages);
    EXPECT_EQ(k.shared_bytes, 128 + stages * 65536);
  };
  auto bulk_softmax = row_kernel(Op::Softmax, DType::BF16, 2, 32768, bulk_options, "_bulk");
  expect_whole_row_ring(bulk_softmax, 3);
  auto bulk_norm = row_kernel(Op::LayerNorm, DType::BF16, 2, 32768, bulk_options, "_bulk");
  expect_whole_row_ring(bulk_norm, 2);
  EXPECT_NE(bulk_norm.source.find("kiln_mean_m2{"), std::string::npos) << bulk_norm.source;
  EXPECT_EQ(bulk_norm.source.find("kiln_next0"), std::string::npos) << "no register prefetch: " << bulk_norm.source;
  EXPECT_NE(bulk_norm.source.find("if (kiln_valid > 0) kiln_bulk_load(kiln_smem + 128 + kiln_stage * 65536 + 0, p0 + (32768*i0_next), "
                                  "unsigned(kiln_valid) * 2u, &kiln_bars[kiln_stage]);"),
            std::string::npos)
      << bulk_norm.source;
  EXPECT_NE(bulk_norm.source.find("kiln_bar_wait(&kiln_bars[kiln_stage], kiln_phase);"), std::string::npos) << bulk_norm.source;
  // The stage is refilled after the first reduction's barrier, not behind a barrier of its own.
  const auto refill = bulk_norm.source.find("// every thread has read the stage");
  EXPECT_NE(refill, std::string::npos) << bulk_norm.source;
  EXPECT_LT(bulk_norm.source.find("kiln_reduce_fused<1, 0>"), refill) << bulk_norm.source;
  EXPECT_EQ(bulk_norm.source.find("__syncthreads();  // every thread has read the stage"), std::string::npos);
  // The weights a chunk at a time (registers), misaligned pointers loading each row directly.
  EXPECT_NE(bulk_norm.source.find("read a chunk at a time"), std::string::npos) << bulk_norm.source;
  EXPECT_NE(bulk_norm.source.find("kiln_load_regs<kiln_block, 8>(p1000, p0 + (32768*i0), kiln_valid);"), std::string::npos)
      << bulk_norm.source;
  // Blocks of at most 256 threads: the ring per block of a cluster of 4, 2 stages of 16 KiB
  // beside the multiprocessor's other 3 blocks and the weights; mean and variance unfused.
  codegen::cuda::CudaEmitOptions small_blocks = bulk_options;
  small_blocks.rows.registers.max_threads = 256;
  auto bulk_cluster = row_kernel(Op::LayerNorm, DType::BF16, 2, 32768, small_blocks, "_bulk_cluster");
  EXPECT_NE(bulk_cluster.source.find("x 32 elements x 4 blocks, a ring of 2 rows in shared memory"), std::string::npos)
      << bulk_cluster.source;
  EXPECT_EQ(bulk_cluster.shared_bytes, 128 + 2 * 16384);
  EXPECT_EQ(bulk_cluster.source.find("kiln_mean_m2{"), std::string::npos) << bulk_cluster.source;
  EXPECT_NE(bulk_cluster.source.find("if (kiln_valid > 0) kiln_bulk_load(kiln_smem + 128 + kiln_stage * 16384 + 0, p0 + (32768*i0_next) + "
                                     "kiln_first, unsigned(kiln_valid) * 2u, &kiln_bars[kiln_stage]);"),
            std::string::npos)
      << bulk_cluster.source;
  // Two per-row inputs (a residual add before the norm) take their own places in each stage.
  {
    Graph g("residual");
    Value* x = g.add_input("x", TensorType{DType::BF16, {SymInt(2), SymInt(8192)}, Device::CPU});
    Value* r = g.add_input("r", TensorType{DType::BF16, {SymInt(2), SymInt(8192)}, Device::CPU});
    Value* w = g.add_input("w", TensorType{DType::BF16, {SymInt(8192)}, Device::CPU});
    g.set_outputs({g.add(Op::LayerNorm, {g.add(Op::Add, {x, r}), w, w})});
    auto low = runtime::lower_for_target(g, CompileOptions{}, "kiln_residual_bulk_");
    codegen::cuda::CudaEmitOptions o = bulk_options;
    o.rows.bulk.min_per_thread = 1;
    auto k = codegen::cuda::emit_cuda_kernel(low->kernels.at(0).kernel, o);
    EXPECT_GT(k.bulk_stages, 0) << k.source;
    EXPECT_NE(k.source.find("kiln_bar_expect(&kiln_bars[kiln_stage], kiln_valid > 0 ? unsigned(kiln_valid) * 2u + "
                            "unsigned(kiln_valid) * 2u : 0u);"),
              std::string::npos)
        << k.source;
    EXPECT_NE(k.source.find("kiln_stage * 32768 + 0, p0 + (8192*i0_next)"), std::string::npos) << k.source;
    EXPECT_NE(k.source.find("kiln_stage * 32768 + 16384, p1 + (8192*i0_next)"), std::string::npos) << k.source;
  }
  auto bulk_split = row_kernel(Op::Softmax, DType::BF16, 2, 262144, bulk_options, "_bulk");
  EXPECT_EQ(bulk_split.cluster, 8) << bulk_split.source;
  EXPECT_EQ(bulk_split.shared_bytes, 128 + 3 * 65536) << bulk_split.source;
  // 16 elements a thread keep the register prefetch; rows not whole 16-byte vectors too.
  EXPECT_EQ(row_kernel(Op::Softmax, DType::BF16, 64, 4096, bulk_options, "_short").bulk_stages, 0);
  EXPECT_EQ(row_kernel(Op::Softmax, DType::BF16, 2, 32766, bulk_options, "_odd").bulk_stages, 0);
  expect_kernels_compile({bulk_softmax, bulk_norm, bulk_cluster, bulk_split}, "bulk_rows.cu");
}

// Bulk rows (forced here at every width whose rows are whole 16-byte vectors), with 1 and 8
// blocks a row, and with the 128 registers that let layer norm's reductions fuse at 32 elements a
// thread, against the interpreter on the row-form graph (row_forms_test_util.h).
TEST(CudaBulkRows, BulkRowsMatchTheInterpreter) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  for (const RowFormVariant& v : {RowFormVariant{"bulk", true, 32, 1, true, true, true, 1},
                                  RowFormVariant{"bulk cluster", true, 8, 8, true, true, true, 1},
                                  RowFormVariant{"bulk 128 registers", true, 32, 1, true, true, true, 1, 512}})
    expect_row_variant_matches(v);
}

}  // namespace
}  // namespace kiln::testing
