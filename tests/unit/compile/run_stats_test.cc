// Executable::last_run() and Target::refusal. Why: onnx_conformance --compile calls a test whose
// library steps all ran the reference kernel "reference-only", not a compiled pass, and a graph
// the CUDA target refuses "unsupported on cuda", not a failure; both rest on these answers.
#include <gtest/gtest.h>

#include "unit/compile/compile_test_util.h"
#include "kiln/target.h"

namespace kiln::testing {
namespace {

TensorType f32_of(std::initializer_list<int64_t> d) { return f32(to_shape(std::vector<int64_t>(d))); }

TEST(RunStats, ALibraryStepWithoutAFastKernelIsAReferenceFallback) {
  auto g = std::make_unique<Graph>("cumsum");
  Value* x = g->add_input("x", f32_of({3, 5}));
  g->set_outputs({g->add(Op::CumSum, {x}, {{"axis", int64_t(1)}})});
  auto exe = compile(*g, test_options());
  EXPECT_EQ(exe->last_run().library_steps, 0) << "nothing ran yet";
  exe->run({HostTensor::random(DType::F32, {3, 5}, 1, -1, 1)});
  RunStats ran = exe->last_run();
  EXPECT_EQ(exe->stats().kernels_generated, 0);
  EXPECT_EQ(ran.library_steps, 1);
  ASSERT_EQ(ran.reference_fallbacks.size(), 1u);
  EXPECT_EQ(ran.reference_fallbacks[0], "cumsum");
}

TEST(RunStats, AFastLibraryStepAndAGeneratedKernelAreNotFallbacks) {
  auto g = std::make_unique<Graph>("matmul_relu");
  Value* a = g->add_input("a", f32_of({4, 6}));
  Value* b = g->add_input("b", f32_of({6, 3}));
  g->set_outputs({g->add(Op::Relu, {g->add(Op::MatMul, {a, b})})});
  auto exe = compile(*g, test_options());
  exe->run({HostTensor::random(DType::F32, {4, 6}, 1, -1, 1), HostTensor::random(DType::F32, {6, 3}, 2, -1, 1)});
  EXPECT_GE(exe->stats().kernels_generated, 1);
  EXPECT_EQ(exe->last_run().library_steps, 1);
  EXPECT_TRUE(exe->last_run().reference_fallbacks.empty());
}

TEST(TargetRefusal, TheCpuRunsWhatCudaRefusesAndCudaSaysWhyWithoutADevice) {
  auto g = std::make_unique<Graph>("gather");
  Value* x = g->add_input("x", f32_of({5, 4}));
  Value* idx = g->add_input("idx", TensorType{DType::I64, to_shape(std::vector<int64_t>{3}), Device::CPU});
  g->set_outputs({g->add(Op::Gather, {x, idx}, {{"axis", int64_t(0)}})});
  EXPECT_EQ(cpu_target().refusal(*g), "");
  EXPECT_EQ(cuda_target()->refusal(*g), "");  // gather is a CUDA library kernel (issue 20)
  // A sequence lives on the host: the CUDA target cuts the graph there (runtime/host_segments.h).
  auto seq = std::make_unique<Graph>("sequence");
  Value* s0 = seq->add_input("x", f32_of({5, 4}));
  seq->set_outputs({seq->add(Op::SequenceConstruct, {seq->add(Op::Relu, {s0}), s0})});
  EXPECT_EQ(cpu_target().refusal(*seq), "");
  EXPECT_EQ(cuda_target()->refusal(*seq), "");
  // A matmul batch broadcast cuBLASLt cannot run: refused, saying why, segments included.
  auto bcast = std::make_unique<Graph>("broadcast_matmul");
  Value* a = bcast->add_input("a", f32_of({2, 3, 4, 5}));
  Value* b = bcast->add_input("b", f32_of({3, 5, 6}));
  bcast->set_outputs({bcast->add(Op::SequenceConstruct, {bcast->add(Op::MatMul, {a, b})})});
  EXPECT_EQ(cpu_target().refusal(*bcast), "");
  std::string why = cuda_target()->refusal(*bcast);
  EXPECT_NE(why.find("batch broadcast"), std::string::npos) << why;

  auto ok = std::make_unique<Graph>("relu");
  ok->set_outputs({ok->add(Op::Relu, {ok->add_input("x", f32_of({8}))})});
  EXPECT_EQ(cuda_target()->refusal(*ok), "");
}

}  // namespace
}  // namespace kiln::testing
