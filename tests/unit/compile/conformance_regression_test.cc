// Regression tests for mismatches that `onnx_conformance --compile` found between the compiled
// path and the interpreter (docs/onnx-coverage-compiled.md). Each test names the ONNX test(s).
#include <gtest/gtest.h>

#include <limits>

#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

// test_isinf*, test_scatternd_min, test_scatter_elements_with_reduction_min: a +-inf (or NaN)
// constant in a fused kernel was emitted as `floatstd::numeric_limits<...>` (no parentheses
// after the type name), which the C++ compiler rejected.
TEST(ConformanceRegression, InfiniteAndNanConstantsInFusedKernels) {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType d : {DType::F32, DType::F16, DType::F64}) {
    Graph g("inf_consts");
    Value* x = g.add_input("x", typed(d, {5, 3}));
    Value* is_pos_inf = g.add(Op::Eq, {x, g.scalar(d, inf)});
    Value* is_neg_inf = g.add(Op::Eq, {x, g.scalar(d, -inf)});
    Value* picked = g.add(Op::Where, {is_pos_inf, g.scalar(d, -inf), g.add(Op::Add, {x, g.scalar(d, std::nan(""))})});
    g.set_outputs({g.add(Op::Or, {is_pos_inf, is_neg_inf}), picked});
    HostTensor in = HostTensor::random(d, {5, 3}, 31);
    in.set_f64(1, inf);
    in.set_f64(4, -inf);
    auto exe = compile_and_check(g, {in}, str("inf consts ", dtype_name(d)));
    EXPECT_NE(exe->source().find("(std::numeric_limits<double>::infinity())"), std::string::npos)
        << "the constant was not inlined into the kernel, so this test no longer covers the emitter";
  }
}

}  // namespace
}  // namespace kiln::testing
