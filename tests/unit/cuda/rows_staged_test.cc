// Staged rows (src/codegen/cuda/rows/staged_rows.cc): the source of staged row kernels, compiled
// by NVRTC wherever it loads, and on a GPU staged rows against the interpreter.
#include <gtest/gtest.h>

#include "unit/cuda/row_forms_test_util.h"

namespace kiln::testing {
namespace {

// Row staging: softmax's row is copied into shared memory once (16-byte vectors where aligned)
// and its output written over it; layer_norm's weights are staged once per block; a row larger
// than the budget is not staged. The staged kernels compile with NVRTC.
TEST(CudaStagedRows, RowsAreStagedInSharedMemoryWithinTheBudget) {
  auto kernel_of = [](Op op, DType t, int64_t rows, int64_t cols, int64_t budget) {
    codegen::cuda::CudaEmitOptions o;
    o.device.shared_per_block = budget;
    o.rows.form = "staged_rows";  // this test is about shared memory (register rows: rows_register_test.cc)
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
  expect_kernels_compile({softmax, norm, too_long, opt_in}, "staged.cu");
}

// Rows staged in shared memory against the interpreter (the row-form graph of
// row_forms_test_util.h).
TEST(CudaStagedRows, StagedRowsMatchTheInterpreter) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  expect_row_variant_matches(RowFormVariant{"shared", false, 32, 1, true});
}

// A sliced view's rows start at any element: the staged copy falls back to element loads there.
TEST(CudaStagedRows, StagedRowsOfAMisalignedSliceMatchTheInterpreter) {
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
