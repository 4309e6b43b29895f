// str tensors through kiln::compile: nodes with string operands or results are host steps run by
// the interpreter, their bool results feed generated kernels, and string outputs come back whole.
// Why: generated C++ kernels must never see strings, yet compiled graphs must match the interpreter.
#include <gtest/gtest.h>

#include "kiln/graph.h"
#include "unit/compile/compile_test_util.h"

using namespace kiln;
using namespace kiln::testing;

TEST(StringCompile, EqualHostStepFeedsGeneratedKernels) {
  SymInt B = SymInt::symbol("B");
  Graph g("strings");
  Value* x = g.add_input("x", TensorType{DType::Str, {B, 3}, Device::CPU});
  Value* y = g.add_input("y", TensorType{DType::Str, {3}, Device::CPU});
  Value* f = g.add_input("f", TensorType{DType::F32, {B, 3}, Device::CPU});
  Value* same = g.add(Op::Eq, {x, y});
  Value* scored = g.add(Op::Add, {g.add(Op::Cast, {same}, {{"dtype", DType::F32}}), g.add(Op::Exp, {f})});
  Value* moved = g.add(Op::Permute, {g.add(Op::Reshape, {x}, {{"shape", Shape{3, B}}})}, {{"perm", std::vector<int64_t>{1, 0}}});
  Value* lit = g.constant(HostTensor::from_strings({3}, {"a", "b", "c"}));
  g.set_outputs({scored, moved, g.add(Op::Ne, {y, lit}), x});
  auto exe = compile(g, test_options());
  for (int64_t b : {1, 4}) {
    std::vector<std::string> xs;
    for (int64_t i = 0; i < b * 3; ++i) xs.push_back(i % 2 ? "b" : std::string("a\n") + char('0' + i % 3));
    std::vector<HostTensor> in = {HostTensor::from_strings({b, 3}, xs), HostTensor::from_strings({3}, {"a\n0", "b", "x"}),
                                  HostTensor::random(DType::F32, {b, 3}, uint64_t(b))};
    std::vector<HostTensor> want = interp::run(g, in);
    std::vector<HostTensor> got = exe->run(in);
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(compare_tensors(got[0], want[0]), "");
    for (size_t k : {size_t(1), size_t(3)}) {
      ASSERT_EQ(got[k].dtype(), DType::Str);
      EXPECT_TRUE(got[k].bit_equal(want[k])) << got[k].to_string(12) << " vs " << want[k].to_string(12);
    }
    EXPECT_EQ(compare_tensors(got[2], want[2]), "");
  }
  // The string nodes are host steps, not generated kernels.
  std::string explained = exe->explain();
  EXPECT_NE(explained.find("eq"), std::string::npos) << explained;
}
