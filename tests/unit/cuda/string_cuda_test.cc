// compile_cuda on graphs with str tensors: refused before anything touches a device, with an error
// naming the node (or the input). Why: strings run only as CPU host steps (kiln::compile).
#include <gtest/gtest.h>

#include "kiln/cuda.h"
#include "kiln/graph.h"

using namespace kiln;

namespace {
std::string cuda_error(const Graph& g) {
  try {
    compile_cuda(g);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(StringCuda, CompileCudaRefusesStringNodesAndInputs) {
  Graph g("strings");
  Value* x = g.add_input("x", TensorType{DType::Str, {2}, Device::CPU});
  Value* eq = g.add(Op::Eq, {x, x}, {}, "names/Equal");
  g.set_outputs({eq});
  std::string e = cuda_error(g);
  EXPECT_NE(e.find("compile_cuda: node 'names/Equal' (eq): string (str) tensors run only on the CPU"),
            std::string::npos)
      << e;
  Graph passthrough("passthrough");
  Value* y = passthrough.add_input("y", TensorType{DType::Str, {3}, Device::CPU});
  passthrough.set_outputs({y});
  e = cuda_error(passthrough);
  EXPECT_NE(e.find("compile_cuda: input 'y' has dtype str"), std::string::npos) << e;
  // A string constant is named as its node.
  Graph literal("literal");
  literal.set_outputs({literal.constant(HostTensor::from_strings({2}, {"a", "b"}))});
  e = cuda_error(literal);
  EXPECT_NE(e.find("(constant): string (str) tensors run only on the CPU"), std::string::npos) << e;
}
