// The CUDA target of the emitter and compile_cuda. Source tests run wherever NVRTC loads (no GPU
// needed): every op sample's kernels compile for sm_90. Device tests compare compile_cuda with the
// reference interpreter on random inputs at odd sizes in f32/f16/bf16 and skip without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>
#include <set>

#include "codegen/common/c_emitter.h"
#include "codegen/cuda/cuda_emitter.h"
#include "common/op_samples.h"
#include "codegen/cuda/prepare_graph.h"
#include "kiln/cuda.h"
#include "kiln/demo.h"
#include "kiln/trace.h"
#include "kiln/interp.h"
#include "runtime/cuda/cuda_executable.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/executable.h"
#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

// Samples whose lowering needs only generated kernels and float matmuls: what the CUDA backend runs.
bool runs_on_cuda(const runtime::CompiledExecutable& low) {
  for (const auto& step : low.steps) {
    if (!step.library || step.node->op == Op::ShapeOf) continue;
    if (step.node->op != Op::MatMul) return false;
    if (!cuda::cuda_matmul_batch_supported(step.node->inputs[0]->type.static_shape(),
                                           step.node->inputs[1]->type.static_shape()))
      return false;
    DType t = step.node->outputs[0]->type.dtype;
    if (t != DType::F32 && t != DType::F16 && t != DType::BF16) return false;
  }
  return true;
}

TEST(CudaCodegen, EveryGeneratedOpSampleCompilesWithNvrtc) {
  std::vector<codegen::cuda::CudaKernelSource> kernels;
  int row_kernels = 0;
  const auto& samples = op_samples();
  // Every kernel is printed; NVRTC (~0.3 s per kernel on the 2-core CI machine) compiles every
  // third row-block kernel and every sixteenth kernel here. The GPU test compiles them all.
  std::vector<codegen::cuda::CudaKernelSource> to_compile;
  for (size_t i = 0; i < samples.size(); ++i) {
    std::unique_ptr<Graph> g = build_sample_graph(samples[i]);
    auto low = runtime::lower_for_target(*g, CompileOptions{}, str("kiln_s", i, "_"));
    for (const auto& lk : low->kernels) {
      kernels.push_back(codegen::cuda::emit_cuda_kernel(lk.kernel));
      bool row = kernels.back().mapping == codegen::cuda::GridMapping::kRowBlock;
      row_kernels += row;
      if ((row && row_kernels % 3 == 1) || kernels.size() % 16 == 0) to_compile.push_back(kernels.back());
    }
  }
  EXPECT_GT(kernels.size(), 100u);
  EXPECT_GT(row_kernels, 5);  // reductions, softmax, norms
  if (!cuda::nvrtc_status().loaded) GTEST_SKIP() << cuda::nvrtc_status().message;
  std::string source = codegen::cuda::cuda_translation_unit(to_compile);
  EXPECT_NO_THROW(cuda::nvrtc_compile(source, "op_samples.cu", "sm_90", {"--std=c++17", "-diag-suppress=550,177"}));
}

// The shared expressions call the CPU prelude's helpers by name; the CUDA prelude must define
// every one of them (a helper added on one side only breaks the other target).
TEST(CudaCodegen, ThePreludesDefineTheSameHelpers) {
  auto helpers = [](const std::string& text) {
    std::set<std::string> names;
    std::regex def(R"((?:inline|__device__)[^;{(]*?\b(kiln_[a-z0-9_]+)\s*\()");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), def); it != std::sregex_iterator(); ++it)
      names.insert((*it)[1]);
    return names;
  };
  std::set<std::string> cpu = helpers(codegen::c_prelude()), gpu = helpers(codegen::cuda::cuda_prelude());
  EXPECT_GT(cpu.size(), 15u);
  for (const auto& name : cpu) EXPECT_TRUE(gpu.count(name)) << name << " is in the CPU prelude but not the CUDA one";
}

TEST(CudaCodegen, SoftmaxIsOneBlockPerRowWithBlockReductions) {
  Graph g("softmax");
  Value* x = g.add_input("x", TensorType{DType::F32, {SymInt(7), SymInt(33)}, Device::CPU});
  g.set_outputs({g.add(Op::Softmax, {x})});
  auto low = runtime::lower_for_target(g, CompileOptions{}, "kiln_");
  ASSERT_EQ(low->kernels.size(), 1u);
  auto k = codegen::cuda::emit_cuda_kernel(low->kernels[0].kernel);
  EXPECT_EQ(k.mapping, codegen::cuda::GridMapping::kRowBlock);
  // Max and sum of exp: one fused reduction across the block (register rows, the default).
  EXPECT_NE(k.source.find("kiln_reduce_fused<1, 0>(kiln_max_sum{"), std::string::npos) << k.source;
  EXPECT_EQ(k.source.find(" std::"), std::string::npos) << "NVRTC has no std: " << k.source;
  EXPECT_EQ(k.source.find("(std::"), std::string::npos) << "NVRTC has no std: " << k.source;
}

// The one kernel of softmax / layer_norm (weights x) over [rows, cols] of `t`, emitted with `o`;
// `tag` keeps kernel names apart when several are compiled together.
codegen::cuda::CudaKernelSource row_kernel(Op op, DType t, int64_t rows, int64_t cols,
                                           const codegen::cuda::CudaEmitOptions& o, const std::string& tag) {
  Graph g("rows");
  Value* x = g.add_input("x", TensorType{t, {SymInt(rows), SymInt(cols)}, Device::CPU});
  Value* y;
  if (op == Op::LayerNorm) {
    Value* w = g.add_input("w", TensorType{t, {SymInt(cols)}, Device::CPU});
    y = g.add(Op::LayerNorm, {x, w, w});
  } else {
    y = g.add(op, {x});
  }
  g.set_outputs({y});
  auto low = runtime::lower_for_target(g, CompileOptions{}, str("kiln_", op_name(op), "_", dtype_name(t), "_", cols, tag, "_"));
  EXPECT_EQ(low->kernels.size(), 1u);
  return codegen::cuda::emit_cuda_kernel(low->kernels[0].kernel, o);
}

// Row staging: softmax's row is copied into shared memory once (16-byte vectors where aligned)
// and its output written over it; layer_norm's weights are staged once per block; a row larger
// than the budget is not staged. The staged kernels compile with NVRTC.
TEST(CudaCodegen, RowsAreStagedInSharedMemoryWithinTheBudget) {
  auto kernel_of = [](Op op, DType t, int64_t rows, int64_t cols, int64_t budget) {
    codegen::cuda::CudaEmitOptions o;
    o.shared_budget_bytes = budget;
    o.register_rows = false;  // this test is about shared memory (register rows: the next test)
    return row_kernel(op, t, rows, cols, o, str("_shared", budget));
  };
  auto softmax = kernel_of(Op::Softmax, DType::BF16, 64, 4096, 48 * 1024);
  EXPECT_EQ(softmax.shared_bytes, 4096 * 2) << softmax.source;  // the output shares the input's row
  EXPECT_NE(softmax.source.find("kiln_copy_row<kiln_block, 4096>(p1000, p0 + "), std::string::npos) << softmax.source;
  EXPECT_NE(softmax.source.find("kiln_copy_row<kiln_block, 4096>(p1 + "), std::string::npos) << softmax.source;
  EXPECT_EQ(softmax.source.find("p0[4096*i0 + i1]"), std::string::npos) << "every row read is on chip: " << softmax.source;
  auto norm = kernel_of(Op::LayerNorm, DType::F32, 5, 1000, 48 * 1024);
  EXPECT_EQ(norm.shared_bytes, 2 * 1000 * 4) << norm.source;
  EXPECT_NE(norm.source.find("the same for every row"), std::string::npos) << norm.source;
  auto too_long = kernel_of(Op::Softmax, DType::F32, 2, 70001, 48 * 1024);
  EXPECT_EQ(too_long.shared_bytes, 0);
  EXPECT_EQ(too_long.source.find("kiln_smem"), std::string::npos) << too_long.source;
  auto opt_in = kernel_of(Op::Softmax, DType::F32, 2, 40000, 200 * 1024);
  EXPECT_EQ(opt_in.shared_bytes, 160000);
  if (!cuda::nvrtc_status().loaded) GTEST_SKIP() << cuda::nvrtc_status().message;
  std::string source = codegen::cuda::cuda_translation_unit({softmax, norm, too_long, opt_in});
  EXPECT_NO_THROW(cuda::nvrtc_compile(source, "staged.cu", "sm_90", {"--std=c++17", "-diag-suppress=550,177"}));
}

// Register rows: a row kernel whose loops share one constant extent holds the row in per-thread
// arrays (one vector load per chunk), keeps softmax's exp from the sum loop for the write loop,
// multiplies by the sum's reciprocal (16-bit outputs only), and splits rows too long for one
// block over a thread-block cluster. Each form compiles with NVRTC for sm_90.
TEST(CudaCodegen, RowsAreHeldInRegistersAndLongRowsSplitOverAClusters) {
  auto kernel_of = [](Op op, DType t, int64_t rows, int64_t cols, int max_cluster) {
    codegen::cuda::CudaEmitOptions o;
    o.registers.max_cluster = max_cluster;
    return row_kernel(op, t, rows, cols, o, str("_cluster", max_cluster));
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
  // At 32 elements a thread mean and variance stay two reductions (registers; register_rows.cc).
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
  // Unfused (row_fuse_reductions off): two float reductions, as before.
  codegen::cuda::CudaEmitOptions unfused_options;
  unfused_options.registers.fuse_reductions = false;
  auto unfused = row_kernel(Op::LayerNorm, DType::F32, 5, 1000, unfused_options, "_unfused");
  EXPECT_EQ(unfused.source.find("kiln_mean_m2"), std::string::npos) << unfused.source;
  auto first_reduce = unfused.source.find("kiln_block_reduce<float>");
  EXPECT_NE(unfused.source.find("kiln_block_reduce<float>", first_reduce + 1), std::string::npos) << unfused.source;
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
  // Bulk rows (an H200's shared memory): at 32 elements a thread the next rows come through a
  // ring of stages the copy engine fills, instead of a second register array.
  codegen::cuda::CudaEmitOptions bulk_options;
  bulk_options.registers.max_cluster = 16;
  bulk_options.registers.shared_per_multiprocessor = 228 * 1024;
  bulk_options.registers.shared_per_block = 226 * 1024;
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
  small_blocks.registers.max_threads = 256;
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
    o.registers.bulk_min_per_thread = 1;
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
  // Cluster mail: the fused reduction's partials travel by st.async into every block's slots; such
  // a row keeps the register prefetch rather than bulk rows (faster together on the H200).
  codegen::cuda::CudaEmitOptions mail_options = bulk_options;
  mail_options.registers.cluster_mail = true;
  auto mail_split = row_kernel(Op::Softmax, DType::BF16, 2, 262144, mail_options, "_mail");
  EXPECT_NE(mail_split.source.find("kiln_reduce_fused<8, 0, kiln_max_sum, true>(kiln_max_sum{"), std::string::npos)
      << mail_split.source;
  EXPECT_NE(mail_split.source.find("kiln_mail_init<0>();"), std::string::npos) << mail_split.source;
  EXPECT_NE(mail_split.source.find("++kiln_parity;"), std::string::npos) << mail_split.source;
  EXPECT_EQ(mail_split.bulk_stages, 0) << mail_split.source;
  EXPECT_NE(mail_split.source.find("kiln_next0"), std::string::npos) << mail_split.source;
  // Layer norm split over a cluster by mail: mean and variance in one exchange a row, not two;
  // with weights, 16 blocks of 512 threads rather than softmax's 8 of 1024 (register_rows.cc).
  auto mail_norm = row_kernel(Op::LayerNorm, DType::BF16, 2, 262144, mail_options, "_mail_norm");
  EXPECT_EQ(mail_norm.cluster, 16) << mail_norm.source;
  EXPECT_EQ(mail_norm.block_threads, 512) << mail_norm.source;
  EXPECT_EQ(mail_split.cluster, 8) << mail_split.source;
  EXPECT_EQ(mail_norm.bulk_stages, 0) << mail_norm.source;
  EXPECT_NE(mail_norm.source.find("kiln_reduce_fused<16, 0, kiln_mean_m2, true>(kiln_mean_m2{"), std::string::npos)
      << mail_norm.source;
  EXPECT_EQ(mail_norm.source.find("kiln_cluster_reduce<"), std::string::npos) << mail_norm.source;
  // Its weights: the block's 16384 copied once into shared memory, each chunk read from there.
  EXPECT_EQ(mail_norm.shared_bytes, 32768) << mail_norm.source;
  EXPECT_NE(mail_norm.source.find("kiln_w1[kiln_i] = p1[(0) + kiln_first + kiln_i];"), std::string::npos) << mail_norm.source;
  EXPECT_NE(mail_norm.source.find("kiln_load_chunk<8>(p1001, kiln_e, kiln_w1 + (i1 - kiln_first));"), std::string::npos)
      << mail_norm.source;
  // 16 elements a thread keep the register prefetch; rows not whole 16-byte vectors too.
  EXPECT_EQ(row_kernel(Op::Softmax, DType::BF16, 64, 4096, bulk_options, "_short").bulk_stages, 0);
  EXPECT_EQ(row_kernel(Op::Softmax, DType::BF16, 2, 32766, bulk_options, "_odd").bulk_stages, 0);
  if (!cuda::nvrtc_status().loaded) GTEST_SKIP() << cuda::nvrtc_status().message;
  std::string source = codegen::cuda::cuda_translation_unit({softmax, f32_softmax, norm, long_norm, unfused, split, unsplit,
                                                             bulk_softmax, bulk_norm, bulk_cluster, bulk_split, mail_split,
                                                             mail_norm});
  EXPECT_NO_THROW(cuda::nvrtc_compile(source, "register_rows.cu", "sm_90", {"--std=c++17", "-diag-suppress=550,177"}));
}

// Vector points: a pointwise kernel whose innermost extent is a multiple of 16 bytes' worth takes
// that many consecutive points a thread; contiguous buffers (x, and the bias row broadcast along
// the outer dim) move as vectors. An odd innermost extent keeps one point a thread.
TEST(CudaCodegen, PointwiseKernelsTakeVectorsOfConsecutivePoints) {
  auto kernel_of = [](int64_t cols) {
    Graph g("points");
    Value* x = g.add_input("x", TensorType{DType::BF16, {SymInt(7), SymInt(cols)}, Device::CPU});
    Value* b = g.add_input("b", TensorType{DType::BF16, {SymInt(cols)}, Device::CPU});
    g.set_outputs({g.add(Op::Gelu, {g.add(Op::Add, {x, b})})});
    auto low = runtime::lower_for_target(g, CompileOptions{}, str("kiln_points_", cols, "_"));
    EXPECT_EQ(low->kernels.size(), 1u);
    return codegen::cuda::emit_cuda_kernel(low->kernels[0].kernel);
  };
  auto vec = kernel_of(64);
  EXPECT_EQ(vec.points_per_thread, 8) << vec.source;
  EXPECT_NE(vec.source.find("kiln_load_vec(p1000, p0 + ("), std::string::npos) << vec.source;
  EXPECT_NE(vec.source.find("kiln_load_vec(p1001, p1 + ("), std::string::npos) << vec.source;
  EXPECT_NE(vec.source.find("kiln_store_vec(p2 + ("), std::string::npos) << vec.source;
  auto odd = kernel_of(33);
  EXPECT_EQ(odd.points_per_thread, 1) << odd.source;
  EXPECT_EQ(odd.source.find("kiln_load_vec"), std::string::npos) << odd.source;
  if (!cuda::nvrtc_status().loaded) GTEST_SKIP() << cuda::nvrtc_status().message;
  std::string source = codegen::cuda::cuda_translation_unit({vec, odd});
  EXPECT_NO_THROW(cuda::nvrtc_compile(source, "points.cu", "sm_90", {"--std=c++17", "-diag-suppress=550,177"}));
}

// The built-in GPT block needs nothing but generated kernels and matmuls on the GPU.
TEST(CudaCodegen, TheDemoBlockLowersToKernelsAndMatmulsOnly) {
  demo::BlockConfig cfg{64, 4, 256};
  demo::BlockParams params = demo::make_block_params(cfg, 5, DType::BF16);
  Tensor example = Tensor::from_host(HostTensor::random(DType::BF16, {2, 7, 64}, 9));
  TracedFunction f = trace([&](const Tensor& x) { return demo::transformer_block(x, params); }, example);
  std::unique_ptr<Graph> g = f.graph().clone();
  codegen::cuda::prepare_graph_for_cuda(*g);
  auto low = runtime::lower_for_target(*g, CompileOptions{}, "kiln_");
  std::string library_ops;
  for (const auto& step : low->steps)
    if (step.library && step.node->op != Op::MatMul) library_ops += step.node->describe() + " ";
  EXPECT_EQ(library_ops, "");
  EXPECT_TRUE(runs_on_cuda(*low));
}

TEST(CudaCodegen, TooManyBuffersIsAClearError) {
  lower::LoopKernel k;
  k.name = "kiln_wide";
  for (int i = 0; i < codegen::cuda::kMaxKernelBuffers + 1; ++i) k.params.push_back({str("x", i), DType::F32, i == 0, SymInt(1)});
  try {
    codegen::cuda::emit_cuda_kernel(k);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kiln_wide"), std::string::npos) << e.what();
  }
}

std::string skip_reason() { return cuda_unavailable_reason(); }

CudaCompileOptions cuda_options() {
  CudaCompileOptions o;
  o.base.cache_dir = test_cache_dir();
  return o;
}

void expect_cuda_matches(const Graph& g, const std::vector<std::vector<HostTensor>>& runs, const std::string& label,
                         const CudaCompileOptions& options = cuda_options()) {
  auto exe = compile_cuda(g, options);
  for (size_t r = 0; r < runs.size(); ++r) {
    std::vector<HostTensor> want = interp::run(g, runs[r]);
    std::vector<HostTensor> got;
    try {
      got = exe->run(runs[r]);
    } catch (const std::exception& e) {  // name the form that failed (the error names the kernel)
      ADD_FAILURE() << label << " run " << r << ": " << e.what() << "\n" << exe->explain().substr(0, 8000);
      return;
    }
    ASSERT_EQ(got.size(), want.size()) << label;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(compare_tensors(got[i], want[i]), "") << label << " run " << r << " output " << i << "\n"
                                                      << exe->explain().substr(0, 4000);
  }
}

TEST(CudaCompiled, EveryOpSampleMatchesTheInterpreter) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  // All samples the backend runs go into one graph: one NVRTC compile, one run.
  Graph g("op_samples");
  std::vector<HostTensor> inputs;
  std::vector<std::pair<size_t, std::vector<HostTensor>>> expected;  // sample index, outputs
  std::vector<Value*> outs;
  std::set<std::string> skipped;
  const auto& samples = op_samples();
  for (size_t i = 0; i < samples.size(); ++i) {
    const OpSample& s = samples[i];
    std::unique_ptr<Graph> one = build_sample_graph(s);
    if (!runs_on_cuda(*runtime::lower_for_target(*one, CompileOptions{}, "kiln_"))) {
      skipped.insert(std::string(op_name(s.op)));
      continue;
    }
    std::vector<HostTensor> in = sample_inputs(s, 99 + i);
    std::vector<Value*> ins;
    for (size_t k = 0; k < s.input_types.size(); ++k) ins.push_back(g.add_input(str("s", i, "_", k), s.input_types[k]));
    for (Value* v : g.add_node(s.op, ins, s.attrs)) outs.push_back(v);
    expected.push_back({i, interp::run(*one, in)});
    for (auto& t : in) inputs.push_back(t);
  }
  g.set_outputs(outs);
  auto exe = compile_cuda(g, cuda_options());
  std::vector<HostTensor> got = exe->run(inputs);
  size_t o = 0;
  for (const auto& [index, want] : expected)
    for (const HostTensor& w : want) {
      ASSERT_LT(o, got.size());
      EXPECT_EQ(compare_tensors(got[o], w), "") << samples[index].label;
      ++o;
    }
  std::string list;
  for (const auto& s : skipped) list += s + " ";
  std::cout << expected.size() << " samples on the GPU; ops without a CUDA kernel yet: " << list << "\n";
  EXPECT_GT(expected.size(), 150u);
}

TEST(CudaCompiled, RowReductionsAtOddSizesInEveryFloatDtype) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    for (auto dims : std::vector<std::vector<int64_t>>{{5, 1000}, {3, 4097}, {1, 70001}, {37, 3}}) {
      Graph g("norms");
      Shape shape;
      for (int64_t d : dims) shape.push_back(SymInt(d));
      Value* x = g.add_input("x", TensorType{t, shape, Device::CPU});
      Value* w = g.add_input("w", TensorType{t, {shape.back()}, Device::CPU});
      Value* sm = g.add(Op::Softmax, {x});
      Value* ln = g.add(Op::LayerNorm, {x, w, w});
      Value* col = g.add(Op::ReduceSum, {x}, {{"axes", std::vector<int64_t>{0}}});
      Value* mx = g.add(Op::ReduceMax, {x}, {{"axes", std::vector<int64_t>{1}}, {"keepdim", int64_t(1)}});
      g.set_outputs({sm, ln, col, mx});
      std::vector<std::vector<HostTensor>> runs;
      for (uint64_t r = 0; r < 3; ++r)  // three runs: direct, capture + replay, replay with new values
        runs.push_back({HostTensor::random(t, dims, 7 + r, -3, 3), HostTensor::random(t, {dims.back()}, 17 + r, 0.5, 1.5)});
      expect_cuda_matches(g, runs, str(dtype_name(t), dims_to_string(dims)));
    }
  }
}

TEST(CudaCompiled, BatchedAndBroadcastMatmuls) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  struct Case { std::vector<int64_t> a, b; };
  for (DType t : {DType::F32, DType::BF16}) {
    for (const Case& c : {Case{{3, 5, 7}, {3, 7, 9}}, Case{{2, 4, 6}, {6, 3}}, Case{{5, 6}, {2, 6, 4}}, Case{{33, 65}, {65, 17}}}) {
      Graph g("matmul");
      auto shape = [](const std::vector<int64_t>& d) {
        Shape s;
        for (int64_t x : d) s.push_back(SymInt(x));
        return s;
      };
      Value* a = g.add_input("a", TensorType{t, shape(c.a), Device::CPU});
      Value* b = g.add_input("b", TensorType{t, shape(c.b), Device::CPU});
      Value* y = g.add(Op::MatMul, {a, b});
      g.set_outputs({g.add(Op::Relu, {y})});
      expect_cuda_matches(g, {{HostTensor::random(t, c.a, 11), HostTensor::random(t, c.b, 12)}},
                          str(dtype_name(t), dims_to_string(c.a), "@", dims_to_string(c.b)));
    }
  }
}

// act(x @ w + b) with act = relu or tanh-gelu folds into the cuBLASLt epilogue (one launch);
// exact gelu does not (cuBLASLt only has the tanh form) and stays a fused kernel.
TEST(CudaCompiled, BiasAndActivationFoldIntoTheMatmulEpilogue) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  for (DType t : {DType::F32, DType::BF16}) {
    for (std::string act : {"relu", "gelu_tanh", "gelu"}) {
      Graph g("linear");
      Value* x = g.add_input("x", TensorType{t, {SymInt(2), SymInt(9), SymInt(40)}, Device::CPU});
      Value* w = g.add_input("w", TensorType{t, {SymInt(40), SymInt(24)}, Device::CPU});
      Value* b = g.add_input("b", TensorType{t, {SymInt(24)}, Device::CPU});
      Value* z = g.add(Op::Add, {g.add(Op::MatMul, {x, w}), b});
      Value* y = act == "relu" ? g.add(Op::Relu, {z})
                               : g.add(Op::Gelu, {z}, {{"approximate", std::string(act == "gelu" ? "none" : "tanh")}});
      g.set_outputs({y});
      std::vector<HostTensor> in = {HostTensor::random(t, {2, 9, 40}, 1), HostTensor::random(t, {40, 24}, 2),
                                    HostTensor::random(t, {24}, 3)};
      auto exe = compile_cuda(g, cuda_options());
      Scoreboard sb;
      std::vector<HostTensor> got = exe->run(in, &sb);
      std::vector<HostTensor> want = interp::run(g, in);
      EXPECT_EQ(compare_tensors(got[0], want[0]), "") << dtype_name(t) << " " << act;
      EXPECT_EQ(sb.kernels().size(), act == "gelu" ? 2u : 1u) << dtype_name(t) << " " << act;
    }
  }
}

// x @ w + b, and (x @ w + b) + r with r of the product's shape, are one cuBLASLt call (bias
// epilogue; the residual as C with beta = 1); a broadcast "residual" is not and stays a kernel.
TEST(CudaCompiled, BiasAndResidualFoldIntoTheMatmulCall) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  for (DType t : {DType::F32, DType::BF16}) {
    for (std::string form : {"bias", "bias+residual", "residual+bias", "bias+broadcast", "bias[1,1,N]+residual"}) {
      Graph g("linear");
      Value* x = g.add_input("x", TensorType{t, {SymInt(3), SymInt(7), SymInt(40)}, Device::CPU});
      Value* w = g.add_input("w", TensorType{t, {SymInt(40), SymInt(24)}, Device::CPU});
      const bool bias3 = form == "bias[1,1,N]+residual";
      std::vector<int64_t> bdims = bias3 ? std::vector<int64_t>{1, 1, 24} : std::vector<int64_t>{24};
      Value* b = g.add_input("b", TensorType{t, bias3 ? Shape{1, 1, 24} : Shape{24}, Device::CPU});
      std::vector<int64_t> rdims = form == "bias+broadcast" ? std::vector<int64_t>{24} : std::vector<int64_t>{3, 7, 24};
      Shape rshape;
      for (int64_t d : rdims) rshape.push_back(SymInt(d));
      Value* r = g.add_input("r", TensorType{t, rshape, Device::CPU});
      Value* z = g.add(Op::Add, {g.add(Op::MatMul, {x, w}), b});
      Value* y = form == "bias" ? z : form == "residual+bias" ? g.add(Op::Add, {r, z}) : g.add(Op::Add, {z, r});
      g.set_outputs({y});
      std::vector<HostTensor> in = {HostTensor::random(t, {3, 7, 40}, 1), HostTensor::random(t, {40, 24}, 2),
                                    HostTensor::random(t, bdims, 3), HostTensor::random(t, rdims, 4)};
      auto exe = compile_cuda(g, cuda_options());
      for (int run = 0; run < 3; ++run) {  // direct, captured, replayed with new values
        if (run == 2) in[3] = HostTensor::random(t, rdims, 5);
        Scoreboard sb;
        std::vector<HostTensor> got = exe->run(in, run == 0 ? &sb : nullptr);
        EXPECT_EQ(compare_tensors(got[0], interp::run(g, in)[0]), "") << dtype_name(t) << " " << form << " run " << run;
        if (run == 0) {
          EXPECT_EQ(sb.kernels().size(), form == "bias+broadcast" ? 2u : 1u) << dtype_name(t) << " " << form;
        }
      }
    }
  }
}

// Device memory planning: a chain of matmuls, row kernels and an exact-gelu kernel whose
// intermediates die one after another shares one arena (smaller than one buffer each, a test of
// the plan itself), and still matches the interpreter when run directly, captured and replayed
// with new values — including an epilogue-folded matmul that writes its kernel's output a step
// early.
TEST(CudaCompiled, IntermediatesShareTheDeviceArena) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  for (DType t : {DType::F32, DType::BF16}) {
    Graph g("arena");
    Value* x = g.add_input("x", TensorType{t, {SymInt(37), SymInt(64)}, Device::CPU});
    Value* w = g.add_input("w", TensorType{t, {SymInt(64), SymInt(64)}, Device::CPU});
    Value* b = g.add_input("b", TensorType{t, {SymInt(64)}, Device::CPU});
    Value* h = x;
    for (int layer = 0; layer < 4; ++layer) {
      Value* z = g.add(Op::Add, {g.add(Op::MatMul, {h, w}), b});  // bias folded into the matmul
      Value* a = layer % 2 ? g.add(Op::Gelu, {z}, {{"approximate", std::string("none")}}) : g.add(Op::Softmax, {z});
      h = g.add(Op::LayerNorm, {a, b, b});
    }
    g.set_outputs({h});
    auto exe = compile_cuda(g, cuda_options());
    const auto& cx = dynamic_cast<const cuda::CudaExecutable&>(*exe);
    const lower::MemoryPlan plan = cx.device_memory_plan({}).plan;
    EXPECT_GT(plan.arena_bytes, 0) << dtype_name(t);
    EXPECT_LT(plan.arena_bytes, plan.naive_bytes) << dtype_name(t) << "\n" << exe->explain().substr(0, 3000);
    EXPECT_NE(exe->explain().find("-byte arena"), std::string::npos);
    std::vector<std::vector<HostTensor>> runs;
    for (uint64_t r = 0; r < 3; ++r)
      runs.push_back({HostTensor::random(t, {37, 64}, 80 + r), HostTensor::random(t, {64, 64}, 90 + r, -0.2, 0.2),
                      HostTensor::random(t, {64}, 95 + r, 0.5, 1.5)});
    expect_cuda_matches(g, runs, str("arena ", dtype_name(t)));
  }
}

// The row forms — register rows (with and without prefetching the next row), register rows split
// over a cluster of up to 8 or 16 blocks (forced here for long rows by allowing 8 elements a
// thread), bulk rows (a ring of rows in shared memory filled by the copy engine, forced here at
// every width whose rows are whole 16-byte vectors, with 1 and 8 blocks a row, and with the
// 128 registers that let layer norm's reductions fuse at 32 elements a thread), and rows staged
// in shared memory; split over a cluster, weights read from a shared-memory copy (the default) or
// from L1 — against the interpreter, on softmax, log_softmax, layer_norm and a row max, at
// whole-chunk and odd widths.
TEST(CudaCompiled, RegisterRowsClusterRowsAndSharedRowsMatchTheInterpreter) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  struct Variant {
    const char* name; bool registers; int per_thread; int cluster; bool prefetch; bool fuse = true; bool chunks = true;
    int bulk_min = 1 << 20;  // elements a thread from which rows are bulk rows (default: never here)
    int occupancy = 1024;
    bool mail = false;       // fused reductions across a cluster by mail
    bool weights_in_shared = true;  // split over a cluster, chunked weights from a shared-memory copy
  };
  for (Variant v : {Variant{"registers", true, 32, 1, true}, Variant{"no prefetch", true, 32, 1, false},
                    Variant{"cluster", true, 8, 8, true}, Variant{"cluster16", true, 8, 16, true},
                    Variant{"unfused cluster", true, 8, 8, true, false},
                    Variant{"unchunked cluster", true, 8, 8, true, true, false}, Variant{"shared", false, 32, 1, true},
                    Variant{"cluster, weights from L1", true, 8, 8, true, true, true, 1 << 20, 1024, false, false},
                    Variant{"bulk", true, 32, 1, true, true, true, 1},
                    Variant{"bulk cluster", true, 8, 8, true, true, true, 1},
                    Variant{"bulk 128 registers", true, 32, 1, true, true, true, 1, 512},
                    Variant{"cluster mail", true, 8, 8, true, true, true, 1 << 20, 1024, true},
                    Variant{"bulk cluster mail", true, 8, 8, true, true, true, 1, 1024, true}}) {
    CudaCompileOptions o = cuda_options();
    o.register_rows = v.registers, o.row_max_per_thread = v.per_thread, o.row_max_cluster = v.cluster;
    o.row_prefetch = v.prefetch, o.row_fuse_reductions = v.fuse, o.row_chunks = v.chunks;
    o.row_bulk_min_per_thread = v.bulk_min, o.row_occupancy_threads = v.occupancy, o.row_cluster_mail = v.mail;
    o.row_weights_in_shared = v.weights_in_shared;
    if (v.cluster == 16) o.row_preferred_threads = 32, o.row_max_threads = 512;  // rows split 16 ways
    for (DType t : {DType::F32, DType::BF16, DType::F16}) {
      if (t == DType::F16 && std::string(v.name) != "registers") continue;
      // Every width in one graph: one compile per form and dtype.
      Graph g("rows");
      std::vector<Value*> outs;
      const std::vector<std::vector<int64_t>> widths = {{6, 4096}, {3, 2050}, {2, 9999}, {65, 64}, {2, 20000}, {3, 33333}};
      for (const auto& dims : widths) {
        Value* x = g.add_input(str("x", dims[1]), TensorType{t, {SymInt(dims[0]), SymInt(dims[1])}, Device::CPU});
        Value* w = g.add_input(str("w", dims[1]), TensorType{t, {SymInt(dims[1])}, Device::CPU});
        Value* r = g.add_input(str("r", dims[1]), TensorType{t, {SymInt(dims[0]), SymInt(dims[1])}, Device::CPU});
        Value* mx = g.add(Op::ReduceMax, {x}, {{"axes", std::vector<int64_t>{1}}, {"keepdim", int64_t(1)}});
        // A residual add before the norm: two per-row inputs (two copies a stage in bulk rows).
        Value* residual_norm = g.add(Op::LayerNorm, {g.add(Op::Add, {x, r}), w, w});
        for (Value* y : {g.add(Op::Softmax, {x}), g.add(Op::LogSoftmax, {x}), g.add(Op::LayerNorm, {x, w, w}), mx, residual_norm})
          outs.push_back(y);
      }
      g.set_outputs(outs);
      std::vector<std::vector<HostTensor>> runs(2);
      for (uint64_t r = 0; r < 2; ++r)
        for (const auto& dims : widths) {
          runs[r].push_back(HostTensor::random(t, dims, 60 + r + uint64_t(dims[1]), -5, 5));
          runs[r].push_back(HostTensor::random(t, {dims[1]}, 70 + r, 0.5, 1.5));
          runs[r].push_back(HostTensor::random(t, dims, 75 + r + uint64_t(dims[1]), -2, 2));
        }
      expect_cuda_matches(g, runs, str(v.name, " ", dtype_name(t)), o);
    }
  }
}

// Fused row reductions (softmax's max and sum, layer norm's mean and variance as one reduction a
// row) at the values that break naive versions: rows entirely -inf (NaN out, as unfused), rows
// with some -inf (masked attention), +inf and NaN elements, rows far below zero, and layer norm
// rows offset far from zero (Chan's variance keeps the small spread), in one block and split
// over a cluster, against the interpreter.
TEST(CudaCompiled, FusedRowReductionsKeepSpecialValuesAndLargeOffsets) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  const double inf = std::numeric_limits<double>::infinity();
  for (int cluster : {1, 8, -8}) {  // -8: a cluster of 8 exchanging partials by mail
    CudaCompileOptions o = cuda_options();
    o.row_cluster_mail = cluster < 0;
    cluster = std::abs(cluster);
    o.row_max_cluster = cluster;
    if (cluster > 1) o.row_max_per_thread = 8, o.row_preferred_threads = 32;
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
      expect_cuda_matches(g, runs, str("fused rows, cluster ", cluster, o.row_cluster_mail ? " by mail " : " ", dtype_name(t)), o);
    }
  }
}

// Vector points against the interpreter: broadcasts along either dim, a transposed operand (not
// contiguous along the innermost loop: stays scalar), and a misaligned slice (element fallback).
TEST(CudaCompiled, VectorPointsMatchTheInterpreter) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    Graph g("points");
    Value* x = g.add_input("x", TensorType{t, {SymInt(9), SymInt(65)}, Device::CPU});
    Value* row = g.add_input("row", TensorType{t, {SymInt(64)}, Device::CPU});
    Value* col = g.add_input("col", TensorType{t, {SymInt(9), SymInt(1)}, Device::CPU});
    Value* sq = g.add_input("sq", TensorType{t, {SymInt(64), SymInt(64)}, Device::CPU});
    Value* v = g.add(Op::Slice, {x}, {{"starts", std::vector<int64_t>{1}}, {"ends", std::vector<int64_t>{65}},
                                      {"axes", std::vector<int64_t>{1}}});
    Value* a = g.add(Op::Gelu, {g.add(Op::Mul, {g.add(Op::Add, {v, row}), col})});
    Value* tr = g.add(Op::Permute, {sq}, {{"perm", std::vector<int64_t>{1, 0}}});
    Value* b = g.add(Op::Sub, {g.add(Op::Exp, {tr}), sq});
    g.set_outputs({a, b});
    std::vector<std::vector<HostTensor>> runs;
    for (uint64_t r = 0; r < 2; ++r)
      runs.push_back({HostTensor::random(t, {9, 65}, 80 + r, -3, 3), HostTensor::random(t, {64}, 81 + r, -1, 1),
                      HostTensor::random(t, {9, 1}, 82 + r, -2, 2), HostTensor::random(t, {64, 64}, 83 + r, -2, 2)});
    expect_cuda_matches(g, runs, str("points ", dtype_name(t)));
  }
}

// A sliced view's rows start at any element: the staged copy falls back to element loads there.
TEST(CudaCompiled, StagedRowsOfAMisalignedSliceMatchTheInterpreter) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  for (DType t : {DType::F32, DType::BF16}) {
    Graph g("sliced_softmax");
    Value* x = g.add_input("x", TensorType{t, {SymInt(9), SymInt(1025)}, Device::CPU});
    Value* v = g.add(Op::Slice, {x}, {{"starts", std::vector<int64_t>{1}}, {"ends", std::vector<int64_t>{1025}},
                                      {"axes", std::vector<int64_t>{1}}});
    g.set_outputs({g.add(Op::Softmax, {v})});
    std::vector<std::vector<HostTensor>> runs;
    for (uint64_t r = 0; r < 3; ++r) runs.push_back({HostTensor::random(t, {9, 1025}, 40 + r, -4, 4)});
    expect_cuda_matches(g, runs, str("sliced softmax ", dtype_name(t)));
  }
}

}  // namespace
}  // namespace kiln::testing
