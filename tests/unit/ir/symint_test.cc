// SymInt canonical forms, simplification, evaluation and parsing.
#include <gtest/gtest.h>

#include "kiln/error.h"
#include "kiln/symint.h"

using namespace kiln;

TEST(SymInt, ConstantsFold) {
  EXPECT_EQ((SymInt(3) + SymInt(4)).constant(), 7);
  EXPECT_EQ(floordiv(SymInt(-7), SymInt(2)).constant(), -4);
  EXPECT_EQ(mod(SymInt(-7), SymInt(2)).constant(), 1);
  EXPECT_EQ(max(SymInt(3), SymInt(9)).constant(), 9);
}

TEST(SymInt, CanonicalFormMakesEqualExpressionsEqual) {
  SymInt B = SymInt::symbol("B"), T = SymInt::symbol("T");
  EXPECT_EQ(B * T, T * B);
  EXPECT_EQ((B + SymInt(1)) * SymInt(2), B * SymInt(2) + SymInt(2));
  EXPECT_EQ(B - B, SymInt(0));
  EXPECT_TRUE((B - B).is_constant());
  EXPECT_NE(B, T);
  EXPECT_EQ((B * T + B).to_string(), "B*T + B");
}

TEST(SymInt, FloorDivPullsOutDivisibleTerms) {
  SymInt B = SymInt::symbol("B");
  EXPECT_EQ(floordiv(B * SymInt(768), SymInt(768)), B);
  EXPECT_EQ(floordiv(B * SymInt(4) + SymInt(6), SymInt(4)), B + SymInt(1) + floordiv(SymInt(2), SymInt(4)));
  EXPECT_EQ(floordiv(B * SymInt(4) + SymInt(6), SymInt(4)).to_string(), "B + 1");
  EXPECT_EQ(mod(B * SymInt(4) + SymInt(6), SymInt(4)).constant(), 2);
  SymInt odd = floordiv(B + SymInt(1), SymInt(2));
  EXPECT_EQ(odd.to_string(), "((B + 1) // 2)");
}

TEST(SymInt, EvaluateMatchesPythonSemanticsOnRandomBindings) {
  SymInt B = SymInt::symbol("B"), T = SymInt::symbol("T");
  SymInt e = floordiv(B * T + SymInt(5), SymInt(3)) + mod(B - T * SymInt(7), SymInt(4)) + max(B, T * SymInt(2));
  for (int64_t b = -5; b <= 9; ++b) {
    for (int64_t t = -3; t <= 6; ++t) {
      auto fdiv = [](int64_t x, int64_t y) { int64_t q = x / y; if ((x % y) && ((x < 0) != (y < 0))) --q; return q; };
      int64_t want = fdiv(b * t + 5, 3) + ((b - t * 7) - fdiv(b - t * 7, 4) * 4) + std::max(b, t * 2);
      EXPECT_EQ(e.evaluate({{"B", b}, {"T", t}}), want) << "B=" << b << " T=" << t;
    }
  }
}

TEST(SymInt, PrintParseRoundTrip) {
  SymInt B = SymInt::symbol("B"), T = SymInt::symbol("T");
  std::vector<SymInt> cases = {B, B * T * SymInt(3) - SymInt(2), floordiv(B + SymInt(1), SymInt(2)),
                               mod(T, SymInt(8)), max(B, T) + SymInt(1), -B + SymInt(4), SymInt(-3),
                               floordiv(B, T), B * B};
  for (const auto& c : cases) {
    std::string s = c.to_string();
    SymInt p = parse_symint(s);
    EXPECT_EQ(p, c) << s;
    EXPECT_EQ(p.to_string(), s);
  }
}

TEST(SymInt, ParseErrorsNameTheColumn) {
  try {
    parse_symint("B + * 2");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("column 5"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_symint("max(B T)"), Error);
  EXPECT_THROW(parse_symint("B )"), Error);
  EXPECT_THROW(SymInt::symbol("B").constant(), Error);
  EXPECT_THROW(SymInt::symbol("B").evaluate({}), Error);
}

TEST(SymInt, ProveEqual) {
  SymInt B = SymInt::symbol("B");
  EXPECT_EQ(SymInt::prove_equal(B + SymInt(1), SymInt(1) + B), std::optional<bool>(true));
  EXPECT_EQ(SymInt::prove_equal(B + SymInt(1), B), std::optional<bool>(false));
  EXPECT_EQ(SymInt::prove_equal(B, SymInt(4)), std::nullopt);
}

// Found by scripts/fuzz-onnx (UBSan): absurd dims in a corrupt model multiplied past int64. Dimension
// arithmetic that overflows is a clear error, not undefined behaviour.
TEST(SymInt, OverflowIsAnErrorNotUndefinedBehaviour) {
  SymInt big(int64_t(1) << 40), n = SymInt::symbol("N");
  EXPECT_THROW(big * big, Error);
  EXPECT_THROW(SymInt(INT64_MAX) + SymInt(1), Error);
  EXPECT_THROW((n * big) * big, Error);
  try {
    (void)(big * SymInt(int64_t(1) << 30));
    FAIL() << "expected an overflow error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overflows int64"), std::string::npos) << e.what();
  }
  EXPECT_EQ((big * SymInt(1024)).constant(), int64_t(1) << 50);  // large but representable
}
