// The str dtype in the IR: HostTensor's string storage, the text form of string constants (quotes,
// escapes, newlines, UTF-8 and control bytes round trip) and the shape-rule errors for ops that
// have no string version. Why: strings are the one dtype whose elements are not bytes in storage.
#include <gtest/gtest.h>

#include <functional>

#include "kiln/graph.h"
#include "kiln/host_tensor.h"

using namespace kiln;

namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(StringDType, NameAndTraits) {
  EXPECT_EQ(dtype_name(DType::Str), "str");
  EXPECT_EQ(parse_dtype("str"), DType::Str);
  EXPECT_FALSE(is_float(DType::Str));
  EXPECT_FALSE(is_integer(DType::Str));
  EXPECT_TRUE(is_string(DType::Str));
}

TEST(StringDType, HostTensorHoldsStrings) {
  HostTensor t = HostTensor::from_strings({2, 2}, {"a", "", "hello world", std::string("x\0y", 3)});
  EXPECT_EQ(t.dtype(), DType::Str);
  EXPECT_EQ(t.numel(), 4);
  EXPECT_EQ(t.nbytes(), 0u);
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.str_at(2), "hello world");
  EXPECT_EQ(t.str_at(3).size(), 3u);
  // empty() and zeros() give empty strings.
  HostTensor e = HostTensor::zeros(DType::Str, {3});
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(e.str_at(i), "");
  // clone() copies, reshaped() shares (like byte storage).
  HostTensor c = t.clone();
  HostTensor r = t.reshaped({4});
  t.set_str(0, "changed");
  EXPECT_EQ(c.str_at(0), "a");
  EXPECT_EQ(r.str_at(0), "changed");
  EXPECT_TRUE(c.bit_equal(HostTensor::from_strings({2, 2}, {"a", "", "hello world", std::string("x\0y", 3)})));
  EXPECT_FALSE(c.bit_equal(t));
  EXPECT_FALSE(c.bit_equal(HostTensor::zeros(DType::U8, {2, 2})));
  EXPECT_EQ(HostTensor::from_strings({2}, {"p", "q"}).to_string(), "str[2] {\"p\", \"q\"}");
  // Numeric access names the problem instead of reading garbage.
  EXPECT_NE(error_of([&] { (void)t.get_f64(0); }).find("string"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)HostTensor::zeros(DType::F32, {1}).str_at(0); }).find("not str"),
            std::string::npos);
  EXPECT_NE(error_of([] { HostTensor::from_strings({3}, {"a"}); }).find("1 values for shape [3]"),
            std::string::npos);
}

TEST(StringDType, TextRoundTripEscapes) {
  std::string tricky = "say \"hi\"\\ \n\ttab\r\x01\x7f";
  std::string utf8 = "\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";  // "été € 😀"
  Graph g("strings");
  Value* x = g.add_input("x", TensorType{DType::Str, {3}, Device::CPU});
  Value* c = g.constant(HostTensor::from_strings({3}, {tricky, utf8, ""}));
  g.set_outputs({g.add(Op::Eq, {x, c})});
  std::string text = g.to_text();
  // One line per node: every control byte is escaped; UTF-8 stays as written.
  EXPECT_NE(text.find(R"(dense<str[3]>["say \"hi\"\\ \n\ttab\r\x01\x7f", ")" + utf8 + R"(", ""])"),
            std::string::npos)
      << text;
  auto parsed = parse_graph(text);
  EXPECT_EQ(parsed->to_text(), text);
  const Node* constant = nullptr;
  for (const Node* n : parsed->node_list())
    if (n->op == Op::Constant) constant = n;
  ASSERT_NE(constant, nullptr);
  const HostTensor& value = constant->attrs.get_tensor("value");
  EXPECT_EQ(value.str_at(0), tricky);
  EXPECT_EQ(value.str_at(1), utf8);
  EXPECT_EQ(value.str_at(2), "");
}

TEST(StringDType, ParseErrorsInStringLiterals) {
  std::string bad = "graph @g() {\n  %c = constant() {value = dense<str[1]>[\"a\\q\"]} : str[1]\n  return %c\n}\n";
  std::string e = error_of([&] { parse_graph(bad); });
  EXPECT_NE(e.find("bad escape in string literal"), std::string::npos) << e;
  std::string count = "graph @g() {\n  %c = constant() {value = dense<str[2]>[\"a\"]} : str[2]\n  return %c\n}\n";
  e = error_of([&] { parse_graph(count); });
  EXPECT_NE(e.find("tensor literal has 1 values, shape needs 2"), std::string::npos) << e;
}

TEST(StringDType, OpsWithoutAStringVersionNameOpAndDType) {
  Graph g("strings");
  Value* x = g.add_input("x", TensorType{DType::Str, {2}, Device::CPU});
  std::string e = error_of([&] { g.add(Op::Add, {x, x}); });
  EXPECT_NE(e.find("op 'add': operand 0 has dtype str; 'add' has no string version"), std::string::npos) << e;
  EXPECT_NE(e.find("(operands: str[2], str[2])"), std::string::npos) << e;
  e = error_of([&] { g.add(Op::Lt, {x, x}); });
  EXPECT_NE(e.find("'lt' has no string version"), std::string::npos) << e;
  Value* f = g.add_input("f", TensorType{DType::F32, {2}, Device::CPU});
  e = error_of([&] { g.add(Op::Cast, {f}, {{"dtype", DType::Str}}); });
  EXPECT_NE(e.find("'cast' cannot produce strings"), std::string::npos) << e;
  // Ops that compare or move whole elements accept strings.
  EXPECT_EQ(g.add(Op::Eq, {x, x})->type.dtype, DType::Bool);
  EXPECT_EQ(g.add(Op::Reshape, {x}, {{"shape", Shape{2, 1}}})->type.dtype, DType::Str);
  EXPECT_EQ(g.add(Op::Expand, {x}, {{"shape", Shape{3, 2}}})->type.to_string(), "str[3, 2]");
}
