// Cluster mail (src/codegen/cuda/rows/cluster_mail.cc): the source of kernels whose fused row
// reductions across a cluster exchange partials by st.async instead of a cluster barrier, compiled
// by NVRTC wherever it loads; and on a GPU the form against the interpreter.
#include <gtest/gtest.h>

#include "unit/cuda/row_forms_test_util.h"

namespace kiln::testing {
namespace {

TEST(CudaClusterMail, FusedReductionsAcrossAClusterGoByMail) {
  // Cluster mail: the fused reduction's partials travel by st.async into every block's slots; such
  // a row keeps the register prefetch rather than bulk rows (faster together on the H200).
  codegen::cuda::CudaEmitOptions mail_options = bulk_emit_options();
  mail_options.rows.mail.enabled = true;
  auto mail_split = row_kernel(Op::Softmax, DType::BF16, 2, 262144, mail_options, "_mail");
  EXPECT_NE(mail_split.source.find("kiln_reduce_fused<8, 0, kiln_max_sum, true>(kiln_max_sum{"), std::string::npos)
      << mail_split.source;
  EXPECT_NE(mail_split.source.find("kiln_mail_init<0>();"), std::string::npos) << mail_split.source;
  EXPECT_NE(mail_split.source.find("++kiln_parity;"), std::string::npos) << mail_split.source;
  EXPECT_EQ(mail_split.bulk_stages, 0) << mail_split.source;
  EXPECT_NE(mail_split.source.find("kiln_next0"), std::string::npos) << mail_split.source;
  // Layer norm split over a cluster by mail: mean and variance in one exchange a row, not two;
  // with weights, 16 blocks of 512 threads rather than softmax's 8 of 1024 (rows/register_rows.cc).
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
  // Under ASan, LeakSanitizer's tracer crashes at exit (SIGSEGV reading the main thread's TLS) once
  // NVRTC has compiled these two kernels, when ctest runs the test (not when it runs directly: seen
  // on the 2-core dev box, 2026-12-07). The normal build compiles them; the sanitizer build checks
  // the rest of the test.
#if !defined(__SANITIZE_ADDRESS__)
  expect_kernels_compile({mail_split, mail_norm}, "cluster_mail.cu");
#endif
}

// Cluster mail with the register prefetch and with bulk rows against the interpreter on the
// row-form graph (row_forms_test_util.h).
TEST(CudaClusterMail, ClusterMailMatchesTheInterpreter) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  for (const RowFormVariant& v : {RowFormVariant{"cluster mail", true, 8, 8, true, true, true, 1 << 20, 1024, true},
                                  RowFormVariant{"bulk cluster mail", true, 8, 8, true, true, true, 1, 1024, true}})
    expect_row_variant_matches(v);
}

}  // namespace
}  // namespace kiln::testing
