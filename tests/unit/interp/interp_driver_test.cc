// The interpreter driver: symbol binding, guard checks, error messages, multi-node graphs, run_op.
#include <gtest/gtest.h>

#include "interp_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {
TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s), Device::CPU}; }
}  // namespace

TEST(InterpDriver, BindsPlainSymbolsAndChecksCompoundDims) {
  Graph g;
  SymInt B = SymInt::symbol("B"), T = SymInt::symbol("T");
  Value* x = g.add_input("x", f32({B, T}));
  Value* y = g.add_input("y", f32({B * SymInt(2), 3}));
  g.set_outputs({x, y});
  auto bindings = interp::bind_symbols(g, {HostTensor::zeros(DType::F32, {4, 5}), HostTensor::zeros(DType::F32, {8, 3})});
  EXPECT_EQ(bindings.at("B"), 4);
  EXPECT_EQ(bindings.at("T"), 5);
  EXPECT_ERROR_CONTAINS(interp::bind_symbols(g, {HostTensor::zeros(DType::F32, {4, 5}), HostTensor::zeros(DType::F32, {7, 3})}),
                        "input 'y' dim 0: expected 8 (2*B");
  EXPECT_ERROR_CONTAINS(interp::bind_symbols(g, {HostTensor::zeros(DType::F32, {4, 5}), HostTensor::zeros(DType::F32, {8, 4})}),
                        "input 'y' dim 1: expected 3, got 4");
}

TEST(InterpDriver, InputMismatchesNameInputDimAndValues) {
  Graph g;
  Value* x = g.add_input("x", f32({2, 784}));
  g.set_outputs({g.add(Op::Relu, {x})});
  EXPECT_ERROR_CONTAINS(interp::run(g, {HostTensor::zeros(DType::F32, {2, 783})}), "input 'x' dim 1: expected 784, got 783");
  EXPECT_ERROR_CONTAINS(interp::run(g, {HostTensor::zeros(DType::F64, {2, 784})}), "input 'x': expected dtype f32, got f64");
  EXPECT_ERROR_CONTAINS(interp::run(g, {HostTensor::zeros(DType::F32, {784})}), "input 'x': expected rank 2");
  EXPECT_ERROR_CONTAINS(interp::run(g, {}), "takes 1 inputs, got 0");
}

TEST(InterpDriver, ConflictingSymbolBindingNamesBothInputs) {
  Graph g;
  SymInt B = SymInt::symbol("B");
  Value* x = g.add_input("x", f32({B}));
  Value* y = g.add_input("y", f32({B}));
  g.set_outputs({g.add(Op::Add, {x, y})});
  EXPECT_ERROR_CONTAINS(interp::run(g, {HostTensor::zeros(DType::F32, {3}), HostTensor::zeros(DType::F32, {4})}),
                        "input 'y' dim 0: expected 3 (B, bound by input 'x' dim 0), got 4");
}

TEST(InterpDriver, GuardFailureNamesTheGuard) {
  Graph g;
  Value* x = g.add_input("x", f32({SymInt::symbol("T"), 4}));
  Value* y = g.add_input("y", f32({3, 4}));
  g.set_outputs({g.add(Op::Add, {x, y})});
  ASSERT_EQ(g.guards().size(), 1u);
  auto ok = interp::run(g, {HostTensor::random(DType::F32, {3, 4}, 1), HostTensor::random(DType::F32, {3, 4}, 2)});
  EXPECT_EQ(ok[0].shape(), (std::vector<int64_t>{3, 4}));
  std::string msg = error_of([&] {
    interp::run(g, {HostTensor::zeros(DType::F32, {5, 4}), HostTensor::zeros(DType::F32, {3, 4})});
  });
  EXPECT_NE(msg.find("guard"), std::string::npos) << msg;
  EXPECT_NE(msg.find("T = 5"), std::string::npos) << msg;
}

TEST(InterpDriver, SymbolicGraphRunsAtSeveralSizes) {
  Graph g;
  SymInt B = SymInt::symbol("B");
  Value* x = g.add_input("x", f32({B, 3}));
  Value* r = g.add(Op::Reshape, {x}, {{"shape", Shape{-1}}});
  Value* s = g.add(Op::ReduceSum, {r});
  g.set_outputs({r, s});
  for (int64_t b : {1, 2, 7}) {
    HostTensor in = HostTensor::random(DType::F32, {b, 3}, uint64_t(b));
    auto out = interp::run(g, {in});
    EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3 * b}));
    double sum = 0;
    for (int64_t i = 0; i < in.numel(); ++i) sum += in.get_f64(i);
    expect_close(out[1], {sum}, Tolerance{.rtol = 1e-5, .atol = 1e-5});
  }
}

TEST(InterpDriver, MultiNodeGraphChainsValuesAndReturnsInputsAsOutputs) {
  Graph g;
  Value* x = g.add_input("x", f32({3}));
  Value* two = g.scalar(DType::F32, 2.0);
  Value* y = g.add(Op::Mul, {x, two});
  Value* z = g.add(Op::Add, {y, x});
  g.set_outputs({z, x, y});
  auto out = interp::run(g, {tensor(DType::F32, {3}, {1, 2, 3})});
  ASSERT_EQ(out.size(), 3u);
  expect_close(out[0], {3, 6, 9});
  expect_close(out[1], {1, 2, 3});
  expect_close(out[2], {2, 4, 6});
}

TEST(InterpDriver, KernelErrorsNameTheNode) {
  Graph g;
  Value* x = g.add_input("x", TensorType{DType::I32, {2}, Device::CPU});
  Value* y = g.add_input("y", TensorType{DType::I32, {2}, Device::CPU});
  g.set_outputs({g.add(Op::Div, {x, y}, {}, "my_div")});
  EXPECT_ERROR_CONTAINS(interp::run(g, {tensor(DType::I32, {2}, {1, 2}), tensor(DType::I32, {2}, {1, 0})}),
                        "node 'my_div' (div): integer division by zero");
}

TEST(InterpDriver, RunOpInfersTypesAndFillsDefaultAttributes) {
  HostTensor x = tensor(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor s = run1(Op::ReduceSum, {{"axes", std::vector<int64_t>{1}}}, {x});
  EXPECT_EQ(s.shape(), (std::vector<int64_t>{2}));
  expect_close(s, {6, 15});
  EXPECT_ERROR_CONTAINS(run1(Op::Add, {}, {x, tensor(DType::F32, {4}, {1, 2, 3, 4})}), "add");
  EXPECT_ERROR_CONTAINS(run1(Op::ReduceSum, {{"bogus", int64_t(1)}}, {x}), "has no attribute 'bogus'");
}

TEST(InterpDriver, RunReferenceKernelDispatchesDirectly) {
  HostTensor x = tensor(DType::F64, {2}, {-1, 4});
  std::vector<HostTensor> in = {x}, out = {HostTensor::empty(DType::F64, {2})};
  Attrs attrs;
  interp::run_reference_kernel(interp::KernelArgs{Op::Abs, attrs, in, out});
  expect_close(out[0], {1, 4});
}
