// ImportOptions::static_input_values and freeze_through_shape: which given inputs the importer
// freezes into constants. Why: onnx_conformance --compile feeds data inputs at run time; an input
// frozen needlessly lets the optimizer fold the whole test, and the compiler is never tested.
#include <gtest/gtest.h>

#include "unit/onnx/one_node_model.h"

namespace kiln::testing {
namespace {

constexpr int F = onnx::TensorProto::FLOAT;

// out = Reshape(x, Shape(y)) and Clip(x, lo, hi): y reaches Reshape's shape only through Shape.
OneNode reshape_to_shape_of() {
  OneNode n("Reshape", {{"x", F, {2, 3}}, {"s", onnx::TensorProto::INT64, {2}}}, {"out"});
  auto* g = n.m.mutable_graph();
  g->mutable_input()->RemoveLast();  // s is Shape(y), not an input
  auto* y = g->add_input();
  y->set_name("y");
  auto* tt = y->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(F);
  tt->mutable_shape()->add_dim()->set_dim_value(3);
  tt->mutable_shape()->add_dim()->set_dim_value(2);
  auto* shape = g->add_node();
  shape->set_op_type("Shape");
  shape->add_input("y");
  shape->add_output("s");
  auto* clip = g->add_node();
  clip->set_op_type("Clip");
  clip->add_input("x");
  clip->add_input("lo");
  clip->add_input("hi");
  clip->add_output("clipped");
  for (const char* name : {"lo", "hi"}) {
    auto* b = g->add_input();
    b->set_name(name);
    b->mutable_type()->mutable_tensor_type()->set_elem_type(F);
    b->mutable_type()->mutable_tensor_type()->mutable_shape();
  }
  g->add_output()->set_name("clipped");
  return n;
}

std::vector<std::string> input_names(const Graph& g) {
  std::vector<std::string> names;
  for (const Value* v : g.inputs()) names.push_back(v->name);
  return names;
}

TEST(StaticInputs, AnInputReadOnlyThroughShapeStaysAnInputUnlessAskedToFreeze) {
  OneNode n = reshape_to_shape_of();
  std::string bytes;
  n.m.SerializeToString(&bytes);
  ImportOptions o;
  o.static_input_values = {{"x", HostTensor::random(DType::F32, {2, 3}, 1, -1, 1)},
                           {"y", HostTensor::random(DType::F32, {3, 2}, 2, -1, 1)},
                           {"lo", HostTensor::from_doubles(DType::F32, {}, {-0.5})},
                           {"hi", HostTensor::from_doubles(DType::F32, {}, {0.5})}};
  o.freeze_through_shape = false;
  auto kept = import_onnx_bytes(bytes, "shape_of.onnx", o);
  EXPECT_EQ(input_names(*kept), (std::vector<std::string>{"x", "y", "lo", "hi"})) << "nothing needs a value";
  EXPECT_EQ(kept->outputs()[0]->type.shape, to_shape(std::vector<int64_t>{3, 2}));

  o.freeze_through_shape = true;
  auto frozen = import_onnx_bytes(bytes, "shape_of.onnx", o);
  EXPECT_EQ(input_names(*frozen), (std::vector<std::string>{"x", "lo", "hi"}))
      << "y reaches Reshape's shape (through Shape); Clip's bounds are never frozen";
}

}  // namespace
}  // namespace kiln::testing
