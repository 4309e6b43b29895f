// kiln::trace: graphs recorded from the tensor API, guards on dtypes and shapes, re-tracing,
// dynamic dims, the recompile limit, constants from eager tensors and multi-result ops.
#include <gtest/gtest.h>

#include "kiln/graph.h"
#include "kiln/trace.h"
#include "unit/trace/trace_test_util.h"

using namespace kiln;
using namespace kiln::trace_test;

namespace {
int count_ops(const Graph& g, Op op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op == op;
  return n;
}

Tensor softmax_mlp_head(const Tensor& x) { return softmax(gelu(x * 2.0 - 0.5), -1); }
}  // namespace

TEST(Trace, RecordsAGraphThatMatchesEagerResults) {
  Tensor x = random_tensor({4, 6}, 1);
  TracedFunction f = trace(softmax_mlp_head, x);
  EXPECT_EQ(f.num_traces(), 1);
  const Graph& g = f.graph();
  EXPECT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(g.inputs()[0]->type.to_string(), "f32[4, 6]");
  EXPECT_EQ(count_ops(g, Op::Mul), 1);
  EXPECT_EQ(count_ops(g, Op::Gelu), 1);
  EXPECT_EQ(count_ops(g, Op::Softmax), 1);
  EXPECT_NO_THROW(verify(g));
  Tensor traced = f(x);
  EXPECT_FALSE(traced.is_traced());
  EXPECT_TRUE(close(softmax_mlp_head(x), traced));
}

TEST(Trace, TracedTensorsExposeSymbolicShapesButNoData) {
  Tensor x = random_tensor({3, 5}, 1);
  std::string host_error;
  Shape seen;
  bool was_traced = false;
  TraceOptions options;
  options.dynamic_dims = {{0, 0, "B"}};
  trace(
      [&](const Tensor& t) {
        was_traced = t.is_traced();
        seen = t.shape();
        host_error = error_of([&] { t.host(); });
        return exp(t);
      },
      x, options);
  EXPECT_TRUE(was_traced);
  EXPECT_EQ(seen, (Shape{SymInt::symbol("B"), 5}));
  EXPECT_NE(host_error.find("traced"), std::string::npos) << host_error;
}

TEST(Trace, DtypeRankAndStaticDimChangesTraceAgain) {
  TracedFunction f = trace([](const Tensor& t) { return sum(t * t, {-1}); }, random_tensor({4, 8}, 1));
  f(random_tensor({4, 8}, 2));
  EXPECT_EQ(f.num_traces(), 1);
  EXPECT_EQ(f.last_retrace_reason(), "");

  Tensor f64_input = random_tensor({4, 8}, 3, DType::F64);
  EXPECT_TRUE(close(sum(f64_input * f64_input, {-1}), f(f64_input)));
  EXPECT_EQ(f.num_traces(), 2);
  EXPECT_NE(f.last_retrace_reason().find("dtype f64"), std::string::npos) << f.last_retrace_reason();

  f(random_tensor({4, 8, 2}, 4));
  EXPECT_EQ(f.num_traces(), 3);
  EXPECT_NE(f.last_retrace_reason().find("rank 3"), std::string::npos) << f.last_retrace_reason();

  Tensor wider = random_tensor({4, 9}, 5);
  EXPECT_TRUE(close(sum(wider * wider, {-1}), f(wider)));
  EXPECT_EQ(f.num_traces(), 4);
  EXPECT_NE(f.last_retrace_reason().find("dim 1 is 9, traced with 8"), std::string::npos)
      << f.last_retrace_reason();

  // Every earlier signature is still cached.
  f(random_tensor({4, 8}, 6));
  f(random_tensor({4, 8}, 7, DType::F64));
  f(random_tensor({4, 9}, 8));
  EXPECT_EQ(f.num_traces(), 4);
  EXPECT_EQ(f.graph(1).inputs()[0]->type.dtype, DType::F64);
}

TEST(Trace, DynamicDimsRunEverySizeWithoutTracingAgain) {
  Tensor w = random_tensor({8, 3}, 10);
  auto fn = [&](const Tensor& x) { return relu(matmul(x, cast(w, x.dtype()))) + 1.0; };
  TraceOptions options;
  options.dynamic_dims = {{0, 0, "B"}};
  TracedFunction f = trace(fn, random_tensor({4, 8}, 1), options);
  EXPECT_EQ(f.graph().inputs()[0]->type.to_string(), "f32[B, 8]");
  EXPECT_EQ(f.graph().outputs()[0]->type.to_string(), "f32[B, 3]");
  for (int64_t b : {1, 2, 4, 17}) {
    Tensor x = random_tensor({b, 8}, uint64_t(b));
    EXPECT_TRUE(close(fn(x), f(x))) << "B = " << b;
  }
  EXPECT_EQ(f.num_traces(), 1);
  // A static dim is still guarded.
  f(random_tensor({4, 8}, 1, DType::F64));
  EXPECT_EQ(f.num_traces(), 2);
  std::string guards = f.guards_text();
  EXPECT_NE(guards.find("input 0: f32[B, 8]"), std::string::npos) << guards;
  EXPECT_NE(guards.find("B >= 1"), std::string::npos) << guards;
  EXPECT_NE(guards.find("trace 1"), std::string::npos) << guards;
}

TEST(Trace, SymbolicShapesFlowIntoReshapeAndFactories) {
  // Reshape and zeros use the traced dims, so one trace serves every batch size.
  auto fn = [](const Tensor& x) {
    Tensor grouped = reshape(x, {x.dim(0), 2, 3});
    return sum(grouped, {1}) + zeros({x.dim(0), 3}) + arange(3, 0, 1, DType::F32);
  };
  TraceOptions options;
  options.dynamic_dims = {{0, 0, "N"}};
  TracedFunction f = trace(fn, random_tensor({5, 6}, 1), options);
  for (int64_t n : {1, 5, 8}) {
    Tensor x = random_tensor({n, 6}, uint64_t(n) + 100);
    EXPECT_TRUE(close(fn(x), f(x))) << "N = " << n;
  }
  EXPECT_EQ(f.num_traces(), 1);
}

TEST(Trace, InputsSharingASymbolMustAgree) {
  TraceOptions options;
  options.dynamic_dims = {{0, 0, "B"}, {1, 0, "B"}};
  TraceFn add_fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + in[1]}; };
  TracedFunction f = trace(add_fn, {random_tensor({3, 4}, 1), random_tensor({3, 4}, 2)}, options);
  Tensor a = random_tensor({6, 4}, 3), b = random_tensor({6, 4}, 4);
  EXPECT_TRUE(close(a + b, f({a, b})[0]));
  EXPECT_EQ(f.num_traces(), 1);
  std::string msg = error_of([&] { f({random_tensor({3, 4}, 5), random_tensor({5, 4}, 6)}); });
  EXPECT_NE(msg.find("disagree on dynamic dim 'B'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("input 1 dim 0 is 5"), std::string::npos) << msg;
  EXPECT_EQ(f.num_traces(), 1);
  // The example inputs are checked the same way.
  EXPECT_NE(error_of([&] { trace(add_fn, {random_tensor({3, 4}, 1), random_tensor({2, 4}, 2)}, options); })
                .find("disagree"),
            std::string::npos);
  // And the declarations themselves.
  TraceOptions bad;
  bad.dynamic_dims = {{2, 0, "B"}};
  EXPECT_NE(error_of([&] { trace(add_fn, {a, b}, bad); }).find("names input 2"), std::string::npos);
  bad.dynamic_dims = {{0, 5, "B"}};
  EXPECT_NE(error_of([&] { trace(add_fn, {a, b}, bad); }).find("rank 2"), std::string::npos);
  EXPECT_NE(error_of([&] { f({a}); }).find("takes 2 inputs, got 1"), std::string::npos);
}

TEST(Trace, ShapeGuardsRecordedWhileTracingAreChecked) {
  // x[B] + y[T] can only broadcast when B == T: tracing records that guard.
  TraceOptions options;
  options.dynamic_dims = {{0, 0, "B"}, {1, 0, "T"}};
  TraceFn add_fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + in[1]}; };
  TracedFunction f = trace(add_fn, {random_tensor({3}, 1), random_tensor({3}, 2)}, options);
  ASSERT_EQ(f.graph().guards().size(), 1u);
  EXPECT_NE(f.guards_text().find("B == T"), std::string::npos) << f.guards_text();
  Tensor a = random_tensor({5}, 3), b = random_tensor({5}, 4);
  EXPECT_TRUE(close(a + b, f({a, b})[0]));
  std::string msg = error_of([&] { f({random_tensor({5}, 3), random_tensor({4}, 4)}); });
  EXPECT_NE(msg.find("break a guard"), std::string::npos) << msg;
  EXPECT_NE(msg.find("5 != 4"), std::string::npos) << msg;
}

TEST(Trace, RecompileLimitThrowsWithAClearMessage) {
  TraceOptions options;
  options.recompile_limit = 3;
  options.name = "shape_hungry";
  TracedFunction f = trace([](const Tensor& t) { return t + 1.0; }, random_tensor({1}, 1), options);
  f(random_tensor({2}, 2));
  f(random_tensor({3}, 3));
  EXPECT_EQ(f.num_traces(), 3);
  ::testing::internal::CaptureStderr();
  std::string msg = error_of([&] { f(random_tensor({4}, 4)); });
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(msg.find("'shape_hungry' reached its recompile limit (3 traces)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dim 0 is 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dynamic_dims"), std::string::npos) << msg;
  EXPECT_NE(err.find("recompile limit"), std::string::npos) << err;
  EXPECT_EQ(f.num_traces(), 3);
  f(random_tensor({2}, 5));  // cached traces keep working
}

TEST(Trace, RecompileLimitCanFallBackToEager) {
  TraceOptions options;
  options.recompile_limit = 1;
  options.on_limit = OnRecompileLimit::FallBackToEager;
  auto fn = [](const Tensor& t) { return exp(t) * 3.0; };
  TracedFunction f = trace(fn, random_tensor({2}, 1), options);
  ::testing::internal::CaptureStderr();
  Tensor x = random_tensor({5}, 2);
  Tensor y = f(x);
  Tensor z = f(random_tensor({6}, 3));
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(close(fn(x), y));
  EXPECT_EQ(z.sizes(), (std::vector<int64_t>{6}));
  EXPECT_EQ(f.num_traces(), 1);
  EXPECT_EQ(f.num_eager_fallbacks(), 2);
  EXPECT_NE(err.find("warning"), std::string::npos) << err;
  EXPECT_EQ(err.find("warning"), err.rfind("warning")) << "warns once: " << err;
}

TEST(Trace, EagerTensorsBecomeConstantsOnce) {
  Tensor w = random_tensor({4, 4}, 1);
  Tensor bias = random_tensor({4}, 2);
  auto fn = [&](const Tensor& x) { return matmul(matmul(x, w) + bias, w) + bias; };
  TracedFunction f = trace(fn, random_tensor({2, 4}, 3));
  // w and bias are each captured once, however often they are used.
  EXPECT_EQ(count_ops(f.graph(), Op::Constant), 2);
  EXPECT_EQ(count_ops(f.graph(), Op::MatMul), 2);
  Tensor x = random_tensor({2, 4}, 4);
  EXPECT_TRUE(close(fn(x), f(x)));
  // A reshaped view of the same storage is a different constant.
  TracedFunction g = trace([&](const Tensor& x) { return x + reshape(w, {16}); }, random_tensor({16}, 5));
  EXPECT_EQ(count_ops(g.graph(), Op::Constant), 1);
}

TEST(Trace, OpsOnEagerTensorsInsideATraceRunEagerly) {
  Tensor w = random_tensor({3}, 1);
  TracedFunction f = trace([&](const Tensor& x) { return x * (w * 2.0); }, random_tensor({3}, 2));
  // w * 2.0 has no traced operand: it runs now and enters the graph as one constant.
  EXPECT_EQ(count_ops(f.graph(), Op::Mul), 1);
  EXPECT_EQ(count_ops(f.graph(), Op::Constant), 1);
  Tensor x = random_tensor({3}, 3);
  EXPECT_TRUE(close(x * (w * 2.0), f(x)));
}

TEST(Trace, MultiResultSplitAndSeveralOutputs) {
  auto fn = [](const std::vector<Tensor>& in) {
    std::vector<Tensor> parts = split(in[0], 1, {1, 2, 3});
    return std::vector<Tensor>{parts[2], parts[0] * in[1], parts[1]};
  };
  TraceOptions options;
  options.dynamic_dims = {{0, 0, "B"}};
  Tensor x = random_tensor({2, 6}, 1), s = random_tensor({1}, 2);
  TracedFunction f = trace(fn, {x, s}, options);
  EXPECT_EQ(count_ops(f.graph(), Op::Split), 1);
  EXPECT_EQ(f.graph().outputs().size(), 3u);
  Tensor x5 = random_tensor({5, 6}, 3);
  std::vector<Tensor> expected = fn({x5, s}), got = f({x5, s});
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(close(expected[i], got[i])) << "output " << i;
  EXPECT_EQ(got[0].sizes(), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(f.num_traces(), 1);
}

TEST(Trace, OutputsThatAreInputsOrConstantsWork) {
  Tensor c = random_tensor({2}, 1);
  TracedFunction f = trace([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0], c}; },
                           {random_tensor({3}, 2)});
  Tensor x = random_tensor({3}, 3);
  std::vector<Tensor> out = f({x});
  EXPECT_TRUE(out[0].host().bit_equal(x.host()));
  EXPECT_TRUE(out[1].host().bit_equal(c.host()));
}

TEST(Trace, IllTypedOpsWhileTracingNameTheOpAndTypes) {
  TraceOptions options;
  options.dynamic_dims = {{0, 0, "B"}};
  std::string msg = error_of([&] {
    trace([](const Tensor& x) { return matmul(x, random_tensor({5, 2}, 1)); }, random_tensor({3, 4}, 2),
          options);
  });
  EXPECT_NE(msg.find("matmul"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f32[B, 4]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f32[5, 2]"), std::string::npos) << msg;
  msg = error_of([&] { trace([](const Tensor& x) { return x + cast(x, DType::I32); }, random_tensor({3}, 1)); });
  EXPECT_NE(msg.find("add"), std::string::npos) << msg;
  EXPECT_NE(msg.find("i32"), std::string::npos) << msg;
}

TEST(Trace, MisuseIsReportedClearly) {
  Tensor escaped;
  TracedFunction f = trace(
      [&](const Tensor& x) {
        escaped = x * 2.0;
        return escaped;
      },
      random_tensor({2}, 1));
  EXPECT_TRUE(escaped.is_traced());
  EXPECT_EQ(escaped.to_string().rfind("traced f32[2]", 0), 0u) << escaped.to_string();
  std::string msg = error_of([&] { exp(escaped); });
  EXPECT_NE(msg.find("no trace is active"), std::string::npos) << msg;

  msg = error_of([&] {
    trace([&](const Tensor& x) { return x + escaped; }, random_tensor({2}, 2));
  });
  EXPECT_NE(msg.find("another kiln::trace"), std::string::npos) << msg;

  msg = error_of([&] {
    trace([&](const Tensor& x) { return f(x); }, random_tensor({2}, 3));
  });
  EXPECT_NE(msg.find("traced tensor"), std::string::npos) << msg;

  msg = error_of([&] {
    trace([&](const Tensor& x) {
      trace([](const Tensor& y) { return y; }, random_tensor({1}, 4));
      return x;
    }, random_tensor({2}, 5));
  });
  EXPECT_NE(msg.find("nested"), std::string::npos) << msg;

  TraceOptions bad;
  bad.recompile_limit = 0;
  EXPECT_NE(error_of([&] { trace([](const Tensor& x) { return x; }, random_tensor({1}, 6), bad); })
                .find("recompile_limit"),
            std::string::npos);
  EXPECT_NE(error_of([] { TracedFunction empty; empty(random_tensor({1}, 7)); }).find("empty"),
            std::string::npos);
  // After a failed trace the thread is no longer tracing.
  EXPECT_FALSE(exp(random_tensor({1}, 8)).is_traced());
}

TEST(Trace, CustomExecutorPlugsIn) {
  struct CountingExecutor : Executor {
    const Graph& graph;
    int* runs;
    CountingExecutor(const Graph& g, int* r) : graph(g), runs(r) {}
    std::string name() const override { return "counting"; }
    std::vector<HostTensor> run(const std::vector<HostTensor>& in) override {
      ++*runs;
      return interpreter_executor()(graph)->run(in);
    }
  };
  int runs = 0, made = 0;
  TraceOptions options;
  options.executor = [&](const Graph& g) -> std::unique_ptr<Executor> {
    ++made;
    return std::make_unique<CountingExecutor>(g, &runs);
  };
  TracedFunction f = trace([](const Tensor& x) { return tanh(x); }, random_tensor({3}, 1), options);
  Tensor x = random_tensor({3}, 2);
  EXPECT_TRUE(close(tanh(x), f(x)));
  f(x);
  EXPECT_EQ(made, 1);
  EXPECT_EQ(runs, 2);
  EXPECT_NE(f.guards_text().find("executor counting"), std::string::npos);
}
