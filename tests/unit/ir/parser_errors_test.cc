// The text IR parser rejects malformed text with "line L, column C: what", pointing at the token
// that is wrong, so a hand-edited pass test fails where the mistake is.
#include <gtest/gtest.h>

#include "kiln/error.h"
#include "kiln/graph.h"

using namespace kiln;

namespace {

std::string parse_error(const std::string& text) {
  try {
    parse_graph(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(parsed without error)";
}

// A one-input graph whose single node line is `node_line`, on line 2.
std::string graph_with(const std::string& node_line) {
  return "graph @g(%x: f32[4]) {\n" + node_line + "\n  return %0\n}\n";
}

void expect_error(const std::string& text, int line, int column, const std::string& what) {
  std::string msg = parse_error(text);
  std::string where = str("line ", line, ", column ", column, ": ");
  EXPECT_EQ(msg.rfind(where, 0), 0u) << "expected " << where << "\ngot: " << msg << "\nfor:\n" << text;
  EXPECT_NE(msg.find(what), std::string::npos) << "expected '" << what << "' in: " << msg;
}

}  // namespace

TEST(TextIRErrors, ValidBaselineParses) {
  EXPECT_EQ(parse_error(graph_with("  %0 = neg(%x) : f32[4]")), "(parsed without error)");
}

TEST(TextIRErrors, UnknownOp) {
  expect_error(graph_with("  %0 = frob(%x) : f32[4]"), 2, 8, "unknown op 'frob'");
}

TEST(TextIRErrors, UndefinedAndRedefinedValues) {
  expect_error(graph_with("  %0 = neg(%y) : f32[4]"), 2, 12, "undefined value %y");
  expect_error(graph_with("  %x = neg(%x) : f32[4]"), 2, 3, "value %x is already defined");
  expect_error("graph @g(%x: f32[4], %x: f32[4]) {\n  return\n}\n", 1, 22, "value %x is already defined");
  expect_error(graph_with("  %0, %0 = split(%x) {axis = 0, sizes = [1, 3]} : f32[1], f32[3]"), 2, 7,
               "value %0 is named twice");
  // A value is only visible after its definition: no forward references.
  expect_error("graph @g(%x: f32[4]) {\n  %0 = neg(%1) : f32[4]\n  %1 = neg(%x) : f32[4]\n  return %0\n}\n",
               2, 12, "undefined value %1");
  expect_error("graph @g(%x: f32[4]) {\n  return %nope\n}\n", 2, 10, "undefined value %nope");
}

TEST(TextIRErrors, BadAttributes) {
  expect_error(graph_with("  %0 = reduce_sum(%x) {axes = [a]} : f32[]"), 2, 32,
               "bad value for attribute 'axes' (ints): expected an integer");
  expect_error(graph_with("  %0 = reduce_sum(%x) {foo = 1} : f32[]"), 2, 24,
               "op 'reduce_sum' has no attribute 'foo'");
  expect_error(graph_with("  %0 = reduce_sum(%x) {keepdim = 0, keepdim = 1} : f32[]"), 2, 37,
               "attribute 'keepdim' is given twice");
  expect_error(graph_with("  %0 = cast(%x) {dtype = f33} : f32[4]"), 2, 26, "unknown dtype 'f33'");
  expect_error(graph_with("  %0 = gelu(%x) {approximate = \"tanh} : f32[4]"), 2, 47, "unterminated string");
  expect_error(graph_with("  %0 = reduce_sum(%x) {axes = [0] : f32[]"), 2, 35, "expected '}' closing the attributes");
  // Shape attributes parse symbolic expressions; a bad one points inside the expression.
  expect_error(graph_with("  %0 = reshape(%x) {shape = [2, B +]} : f32[4]"), 2, 36,
               "bad value for attribute 'shape' (shape): unexpected character ']'");
}

TEST(TextIRErrors, ErrorsFromTheBuilderCarryTheOpsPosition) {
  expect_error(graph_with("  %0 = add(%x) : f32[4]"), 2, 8, "expects 2 operands, got 1");
  expect_error(graph_with("  %0 = cast(%x) : f32[4]"), 2, 8, "requires attribute 'dtype'");
  expect_error("graph @g(%x: f32[4], %y: f32[5]) {\n  %0 = add(%x, %y) : f32[4]\n  return %0\n}\n", 2, 8,
               "4 != 5");
  expect_error(graph_with("  %0 = not(%x) : bool[4]"), 2, 8, "not");
}

TEST(TextIRErrors, ResultTypesMustMatchInference) {
  expect_error(graph_with("  %0 = neg(%x) : f32[5]"), 2, 18,
               "result type f32[5] does not match the inferred type f32[4]");
  expect_error(graph_with("  %0 = neg(%x) : f16[4]"), 2, 18, "does not match the inferred type f32[4]");
  expect_error(graph_with("  %0 = neg(%x) : f32[4]@cuda"), 2, 18, "f32[4]@cuda does not match");
  expect_error(graph_with("  %0 = split(%x) {axis = 0, sizes = [1, 3]} : f32[1], f32[3]"), 2, 3,
               "'split' produces 2 result(s), 1 named");
  expect_error(graph_with("  %0, %1 = split(%x) {axis = 0, sizes = [1, 3]} : f32[1]"), 2, 51,
               "'split' produces 2 result(s), 1 type(s) given");
}

TEST(TextIRErrors, MalformedTypes) {
  expect_error(graph_with("  %0 = neg(%x) : f33[4]"), 2, 18, "unknown dtype 'f33'");
  expect_error(graph_with("  %0 = neg(%x) : f32[4 +]"), 2, 25, "bad dimension: unexpected character ']'");
  expect_error(graph_with("  %0 = neg(%x) : f32"), 2, 21, "expected '[' and the dims after the dtype");
  expect_error(graph_with("  %0 = neg(%x) : f32[4]@tpu"), 2, 25, "unknown device 'tpu'");
  expect_error("graph @g(%x: f32[4, 5) {\n  return\n}\n", 1, 22, "expected ']' closing the dims");
}

TEST(TextIRErrors, StructureOfTheGraph) {
  expect_error("func @g() {\n  return\n}\n", 1, 1, "expected 'graph'");
  expect_error("// header comment\n\ngraph g() {\n  return\n}\n", 3, 7, "expected '@'");
  expect_error("graph @g(%x: f32[4]) {\n  %0 = neg(%x) : f32[4]\n  return %0\n", 4, 1,
               "unterminated graph");
  expect_error("graph @g() {\n}\n", 2, 1, "graph has no 'return' statement");
  expect_error("graph @g(%x: f32[4]) {\n  return %x\n  %0 = neg(%x) : f32[4]\n}\n", 3, 3,
               "expected '}' after 'return'");
  expect_error(graph_with("  %0 = neg(%x) : f32[4] extra"), 2, 25, "expected a node");
  expect_error(graph_with("  %0 = neg(%x) : f32[4]") + "junk\n", 5, 1, "unexpected text after the graph");
  expect_error(graph_with("  %0 = neg(%x : f32[4]"), 2, 15, "expected ')' closing the operands");
  expect_error(graph_with("  %0 neg(%x) : f32[4]"), 2, 6, "expected '=' after the node's results");
  expect_error(graph_with("  %0 = neg(%x) : f32[4] loc(r)"), 2, 29, "expected a quoted node name");
  expect_error(graph_with("  %\"unterminated = neg(%x) : f32[4]"), 2, 4, "unterminated quoted name");
  expect_error(graph_with("  % = neg(%x) : f32[4]"), 2, 4, "expected a value name after '%'");
  expect_error(graph_with("  0 = neg(%x) : f32[4]"), 2, 3, "expected a node");
}

TEST(TextIRErrors, ColumnsCountFromTheLineStartAfterComments) {
  std::string text =
      "// line 1\n"
      "graph @g(%x: f32[4]) { // line 2\n"
      "  // line 3\n"
      "  %0 = neg(%x) : f32[4]\n"
      "  %1 = exp(%0) {bad = 1} : f32[4]\n"
      "  return %1\n"
      "}\n";
  expect_error(text, 5, 17, "op 'exp' has no attribute 'bad'");
}

// Cutting or corrupting valid text anywhere must give a kiln::Error with a position (or a valid
// graph), never a crash or another exception type.
TEST(TextIRErrors, TruncatedAndCorruptedTextFailsCleanly) {
  const std::string text =
      "graph @\"g/1\"(%x: f32[B, 4], %\"w:0\": f32[4, 6]) {\n"
      "  %0 = matmul(%x, %\"w:0\") : f32[B, 6]\n"
      "  %a, %1 = split(%0) {axis = 1, sizes = [2, 4]} : f32[B, 2], f32[B, 4] loc(\"s\")\n"
      "  %c = constant() {value = dense<i32[2]>[1, -2]} : i32[2]\n"
      "  %2 = reshape(%1) {shape = [B*2, 2]} : f32[2*B, 2]\n"
      "  %3 = gelu(%a) {approximate = \"tanh\"} : f32[B, 2]\n"
      "  return %2, %3, %c\n"
      "}\n";
  ASSERT_EQ(parse_error(text), "(parsed without error)");
  auto check = [](const std::string& corrupted) {
    try {
      parse_graph(corrupted);
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("line ", 0), 0u) << e.what() << "\nfor:\n" << corrupted;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "non-kiln exception: " << e.what() << "\nfor:\n" << corrupted;
    }
  };
  for (size_t cut = 0; cut < text.size(); ++cut) {
    check(text.substr(0, cut));
    for (char c : std::string("%\"[]{}(),:=@ 9x\n/")) {
      std::string corrupted = text;
      corrupted[cut] = c;
      check(corrupted);
    }
  }
}

TEST(TextIRErrors, TensorLiteralsOfTheWrongSize) {
  expect_error(graph_with("  %0 = constant() {value = dense<f32[2]>[1.0]} : f32[2]"), 2, 41,
               "tensor literal has 1 values, shape needs 2");
  expect_error(graph_with("  %0 = constant() {value = dense<u8[2]>\"0x01\"} : u8[2]"), 2, 40,
               "hex tensor literal needs 2 bytes");
  // An absurd shape fails as a parse error too, whether allocation or the value count stops it.
  std::string msg = parse_error(graph_with("  %0 = constant() {value = dense<f32[99999999999999]>[]} : f32[1]"));
  EXPECT_EQ(msg.rfind("line 2, column ", 0), 0u) << msg;
  EXPECT_NE(msg.find("bad value for attribute 'value' (tensor)"), std::string::npos) << msg;
}
