// to_float_precision (include/kiln/passes.h): the f32 demo transformer block rebuilt in bf16 and
// f16 keeps f32 at its boundaries, stores every intermediate in 16 bits, and computes what the f32
// graph computes within the 16-bit tolerance (reference interpreter on random inputs).
#include <gtest/gtest.h>

#include "common/compare.h"
#include "kiln/demo.h"
#include "kiln/interp.h"
#include "kiln/passes.h"
#include "kiln/trace.h"

namespace kiln::testing {
namespace {

std::unique_ptr<Graph> block_graph() {
  demo::BlockConfig cfg{32, 4, 64};
  demo::BlockParams params = demo::make_block_params(cfg, 3, DType::F32);
  Tensor example = Tensor::from_host(HostTensor::random(DType::F32, {2, 7, 32}, 5));
  TracedFunction f = trace([&](const Tensor& x) { return demo::transformer_block(x, params); }, example);
  return f.graph().clone();
}

TEST(FloatPrecision, BlockInBf16AndF16MatchesF32WithinTheirTolerance) {
  std::unique_ptr<Graph> g = block_graph();
  HostTensor x = HostTensor::random(DType::F32, {2, 7, 32}, 11);
  HostTensor want = interp::run(*g, {x})[0];
  for (DType to : {DType::BF16, DType::F16}) {
    std::unique_ptr<Graph> low = to_float_precision(*g, to);
    verify(*low);
    ASSERT_EQ(low->inputs()[0]->type.dtype, DType::F32);
    ASSERT_EQ(low->outputs()[0]->type.dtype, DType::F32);
    int f32_values = 0, low_values = 0;
    for (const auto& n : low->nodes())
      for (const Value* v : n->outputs) {
        f32_values += v->type.dtype == DType::F32;
        low_values += v->type.dtype == to;
      }
    EXPECT_EQ(f32_values, 1) << "only the final cast back should be f32";
    EXPECT_GT(low_values, 20);
    HostTensor got = interp::run(*low, {x})[0];
    // Each stored intermediate rounds to 16 bits: the tolerance of a chain of them (8 ulps).
    EXPECT_EQ(compare_tensors(got, want, scaled(compiled_tolerance(to), 8)), "") << dtype_name(to);
    // And it is not the f32 result: the graph really computes in 16 bits.
    EXPECT_NE(compare_tensors(got, want, compiled_tolerance(DType::F32)), "") << dtype_name(to);
  }
}

TEST(FloatPrecision, RejectsOtherTargetsAndKeepsF32Graphs) {
  std::unique_ptr<Graph> g = block_graph();
  EXPECT_THROW(to_float_precision(*g, DType::I32), Error);
  std::unique_ptr<Graph> same = to_float_precision(*g, DType::F32);
  EXPECT_EQ(print_graph(*same), print_graph(*g));
}

}  // namespace
}  // namespace kiln::testing
