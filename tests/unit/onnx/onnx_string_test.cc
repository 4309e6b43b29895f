// The ONNX importer on STRING tensors: graph inputs, string_data initializers, Equal with
// broadcasting, .pb round trips, and errors naming the node, op and dtype for ops that have no
// string version. Why: strings are held beside HostTensor's byte storage, not in it.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>

#include "kiln/interp.h"
#include "kiln/onnx.h"
#include "kiln/tensor_io.h"
#include "unit/onnx/one_node_model.h"

using namespace kiln;
using kiln::testing::Io;
using kiln::testing::OneNode;

namespace {
constexpr int kStr = onnx::TensorProto::STRING, kBool = onnx::TensorProto::BOOL;

std::vector<int64_t> ints_of(const HostTensor& t) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.get_i64(i));
  return out;
}
}  // namespace

TEST(OnnxString, EqualOnStringInputsBroadcasts) {
  OneNode n("Equal", {{"x", kStr, {2, 2}}, {"y", kStr, {2}}}, {"z"}, 19, kBool);
  HostTensor x = HostTensor::from_strings({2, 2}, {"cat", "dog", "Cat", "dog"});
  HostTensor y = HostTensor::from_strings({2}, {"cat", "dog"});
  HostTensor z = n.run({x, y})[0];
  EXPECT_EQ(z.dtype(), DType::Bool);
  EXPECT_EQ(z.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(ints_of(z), (std::vector<int64_t>{1, 1, 0, 1}));
}

TEST(OnnxString, StringInitializerFromStringData) {
  OneNode n("Equal", {{"x", kStr, {3}}}, {"z"}, 19, kBool);
  n.node->add_input("w");
  auto* w = n.m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(kStr);
  w->add_dims(3);
  w->add_string_data("a\"b");
  w->add_string_data(std::string("\xe2\x82\xac\n", 4));
  w->add_string_data("");
  HostTensor x = HostTensor::from_strings({3}, {"a\"b", "\xe2\x82\xac", ""});
  EXPECT_EQ(ints_of(n.run({x})[0]), (std::vector<int64_t>{1, 0, 1}));
  // The imported graph holds the initializer as a str constant whose text round trips.
  std::string bytes;
  n.m.SerializeToString(&bytes);
  auto g = import_onnx_bytes(bytes, "strings.onnx");
  std::string text = g->to_text();
  EXPECT_NE(text.find(R"(dense<str[3]>["a\"b", "€\n", ""])"), std::string::npos) << text;
  EXPECT_EQ(parse_graph(text)->to_text(), text);
  // A string initializer whose string_data does not match its shape is refused, named.
  w->add_string_data("extra");
  std::string e = n.import_error();
  EXPECT_NE(e.find("initializer 'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("string_data holds 4 values, the shape needs 3"), std::string::npos) << e;
}

TEST(OnnxString, StringPbRoundTrip) {
  auto path = std::filesystem::temp_directory_path() / "kiln_onnx_string_test.pb";
  HostTensor t = HostTensor::from_strings({2, 1}, {"x y", std::string("\0\x01", 2)});
  write_tensor_pb(path.string(), t, "s");
  std::string name;
  HostTensor back = read_tensor_pb(path.string(), &name);
  std::filesystem::remove(path);
  EXPECT_EQ(name, "s");
  EXPECT_TRUE(back.bit_equal(t));
}

TEST(OnnxString, OpsWithoutAStringVersionAreUnsupportedAndNamed) {
  OneNode add("Add", {{"x", kStr, {2}}, {"y", kStr, {2}}}, {"z"}, 19, kStr);
  std::string e = add.import_error();
  EXPECT_NE(e.find("node 'the_Add' (Add"), std::string::npos) << e;
  EXPECT_NE(e.find("Add on input 0 of dtype str"), std::string::npos) << e;
  OneNode less("Less", {{"x", kStr, {2}}, {"y", kStr, {2}}}, {"z"}, 19, kBool);
  e = less.import_error();
  EXPECT_NE(e.find("Less on input 0 of dtype str"), std::string::npos) << e;
  OneNode cast("Cast", {{"x", onnx::TensorProto::FLOAT, {2}}}, {"z"}, 19, kStr);
  cast.attr("to", int64_t(kStr));
  e = cast.import_error();
  EXPECT_NE(e.find("cast to element type STRING is not supported"), std::string::npos) << e;
}

TEST(OnnxString, IdentityAndReshapeMoveStrings) {
  OneNode n("Reshape", {{"x", kStr, {2, 2}}}, {"z"}, 19, kStr);
  n.node->add_input("shape");
  auto* s = n.m.mutable_graph()->add_initializer();
  s->set_name("shape");
  s->set_data_type(onnx::TensorProto::INT64);
  s->add_dims(1);
  s->add_int64_data(4);
  HostTensor z = n.run({HostTensor::from_strings({2, 2}, {"a", "b", "c", "d"})})[0];
  ASSERT_EQ(z.dtype(), DType::Str);
  EXPECT_EQ(z.shape(), (std::vector<int64_t>{4}));
  EXPECT_EQ(z.str_at(3), "d");
}
