// Traced C++ functions through kiln::compile: kiln::trace with compiled_executor() runs each trace
// as a compiled Executable; results must match eager execution of the same function, on odd
// sizes and across a symbolic dim (one compile serves both sizes).
#include <gtest/gtest.h>

#include "kiln/target.h"
#include "kiln/trace.h"
#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

Tensor head(const Tensor& x) { return softmax(gelu(x * 2.0 - 0.5), -1) + x; }

TEST(TracedCompile, CompiledExecutorMatchesEagerAcrossASymbolicDim) {
  int made = 0;
  ExecutorFactory compiled = compiled_executor(test_options());
  TraceOptions options;
  options.name = "head";
  options.dynamic_dims = {{0, 0, "B"}};
  options.executor = [&](const Graph& g) {
    ++made;
    auto e = compiled(g);
    EXPECT_EQ(e->name(), "compiled");
    return e;
  };
  HostTensor a = HostTensor::random(DType::F32, {5, 33}, 51), b = HostTensor::random(DType::F32, {11, 33}, 52);
  TracedFunction f = trace(head, Tensor::from_host(a), options);
  for (const HostTensor& in : {a, b}) {
    HostTensor got = f(Tensor::from_host(in)).host();
    HostTensor want = head(Tensor::from_host(in)).host();
    EXPECT_EQ(compare_tensors(got, want), "") << dims_to_string(in.shape());
  }
  EXPECT_EQ(f.num_traces(), 1);
  EXPECT_EQ(made, 1) << "one trace, one compile";
}

// The same through the CPU target: the optimizer's pipeline runs before the compile.
TEST(TracedCompile, TargetExecutorOptimisesAndCompilesEachTraceForItsTarget) {
  TraceOptions options;
  options.name = "head";
  options.dynamic_dims = {{0, 0, "B"}};
  ExecutorFactory compiled = target_executor(cpu_target(), test_options());
  std::string name;
  options.executor = [&](const Graph& g) {
    auto e = compiled(g);
    name = e->name();
    return e;
  };
  HostTensor a = HostTensor::random(DType::F32, {3, 17}, 61), b = HostTensor::random(DType::F32, {7, 17}, 62);
  TracedFunction f = trace(head, Tensor::from_host(a), options);
  for (const HostTensor& in : {a, b})
    EXPECT_EQ(compare_tensors(f(Tensor::from_host(in)).host(), head(Tensor::from_host(in)).host()), "")
        << dims_to_string(in.shape());
  EXPECT_EQ(name, "compiled (cpu)");
  EXPECT_EQ(f.num_traces(), 1);
}

}  // namespace
}  // namespace kiln::testing
