// Output buffers come back to the executable when the caller drops a run's results, and the next
// run reuses them (runtime/output_pool.h); results the caller keeps are never written again. Why:
// reuse saves first-touch page faults on large outputs, and a reused buffer that a caller still
// held would silently change that caller's data.
#include <gtest/gtest.h>

#include "runtime/output_pool.h"
#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

TEST(OutputPool, ReturnedBuffersAreReusedAndKeptOnesAreNot) {
  runtime::OutputPool pool;
  const void* first = nullptr;
  {
    HostTensor a = pool.take(DType::F32, {3, 1000});
    first = a.raw();
    EXPECT_EQ(pool.idle_buffers(), 0u);
  }
  EXPECT_EQ(pool.idle_buffers(), 1u);
  HostTensor b = pool.take(DType::F32, {1000, 3});  // same bytes, another shape
  EXPECT_EQ(b.raw(), first);
  EXPECT_EQ(b.shape(), (std::vector<int64_t>{1000, 3}));
  HostTensor c = pool.take(DType::F32, {3, 1000});  // b is still held: a new buffer
  EXPECT_NE(c.raw(), b.raw());
  HostTensor d = pool.take(DType::I64, {7});  // another size
  EXPECT_NE(d.raw(), first);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d.raw()) % 64, 0u);
}

TEST(OutputPool, KeepsAFewBuffersPerSizeAndOutlivesItsOwner) {
  std::vector<HostTensor> held;
  {
    runtime::OutputPool pool;
    std::vector<HostTensor> many;
    for (size_t i = 0; i < runtime::OutputPool::kKeptPerSize + 3; ++i) many.push_back(pool.take(DType::F32, {64}));
    many.clear();
    EXPECT_EQ(pool.idle_buffers(), runtime::OutputPool::kKeptPerSize);
    held.push_back(pool.take(DType::F32, {64}));
    held[0].data<float>()[63] = 2.5f;
  }
  EXPECT_EQ(held[0].data<float>()[63], 2.5f);  // the pool is gone; its buffer lives on with the tensor
}

// A compiled executable hands out pooled outputs: dropped results come back to the next run, kept
// ones keep their values while later runs write elsewhere.
TEST(OutputPool, ExecutableReusesDroppedOutputsOnly) {
  Graph g("chain");
  Value* x = g.add_input("x", f32({301, 517}));
  g.set_outputs({g.add(Op::Tanh, {g.add(Op::Mul, {x, x})})});
  auto exe = compile(g, test_options());
  std::vector<HostTensor> in{HostTensor::random(DType::F32, {301, 517}, 5, -2, 2)};
  const void* first = nullptr;
  {
    std::vector<HostTensor> r = exe->run(in, nullptr);
    first = r[0].raw();
  }
  std::vector<HostTensor> kept = exe->run(in, nullptr);
  EXPECT_EQ(kept[0].raw(), first);
  const std::vector<HostTensor> want = interp::run(g, in);
  std::vector<HostTensor> other{HostTensor::random(DType::F32, {301, 517}, 6, -2, 2)};
  std::vector<HostTensor> next = exe->run(other, nullptr);
  EXPECT_NE(next[0].raw(), kept[0].raw());
  EXPECT_EQ(compare_tensors(kept[0], want[0]), "");  // untouched by the later run
  EXPECT_EQ(compare_tensors(next[0], interp::run(g, other)[0]), "");
}

}  // namespace
}  // namespace kiln::testing
