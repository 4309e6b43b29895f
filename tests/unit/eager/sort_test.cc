// The CPU sort / argsort kernel (src/kernels/cpu/sort.cc, an LSD radix sort) against the reference
// kernel (a stable comparison sort), bit for bit: odd line lengths across the insertion-sort /
// radix boundary (1, 2, 47, 48, 49, 1021, 65537), both directions, every float dtype and i32/i64,
// along the last, a middle and the first axis, lines of ties (stability), special values (NaN of
// either sign, infinities, signed zeros) and the integer extremes; and a hand-written case whose
// expected order is stated in the test. Why: a radix sort gets the order of keys right long before
// it gets ties, -0 and NaN right, and a skipped pass only shows on some inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/compare.h"
#include "kernels/cpu/eager.h"
#include "kiln/interp.h"

namespace kiln::testing {
namespace {

void expect_sort_matches(const HostTensor& x, int64_t axis, bool descending, const std::string& label) {
  SCOPED_TRACE(str(label, ", axis = ", axis, descending ? ", descending" : ", ascending"));
  const Attrs attrs{{"axis", axis}, {"descending", int64_t(descending)}};
  std::vector<HostTensor> want = interp::run_op(Op::Sort, attrs, {x});
  Scoreboard sb;
  std::vector<HostTensor> got = eager::run_op(Op::Sort, attrs, {x}, &sb);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(tensors_match(got[0], want[0], Tolerance{})) << "values";
  EXPECT_TRUE(tensors_match(got[1], want[1], Tolerance{})) << "indices";
  ASSERT_EQ(sb.kernels().size(), 1u);
  EXPECT_EQ(sb.kernels()[0].name.find("(reference)"), std::string::npos) << sb.kernels()[0].name;
  std::vector<HostTensor> idx = eager::run_op(Op::ArgSort, attrs, {x});
  EXPECT_TRUE(tensors_match(idx[0], want[1], Tolerance{})) << "argsort";
}

std::vector<int64_t> indices_of(const HostTensor& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

TEST(EagerSort, HandWrittenOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  HostTensor x = HostTensor::from_doubles(DType::F32, {8}, {3, -0.0, nan, 1, -inf, 0.0, 1, -2});
  std::vector<HostTensor> up = eager::run_op(Op::Sort, {{"axis", int64_t(0)}, {"descending", int64_t(0)}}, {x});
  // -inf, -2, then -0 and +0 in position order (equal), 1 (pos 3) before 1 (pos 6), 3, NaN last.
  EXPECT_EQ(indices_of(up[1]), (std::vector<int64_t>{4, 7, 1, 5, 3, 6, 0, 2}));
  std::vector<HostTensor> down = eager::run_op(Op::Sort, {{"axis", int64_t(0)}, {"descending", int64_t(1)}}, {x});
  EXPECT_EQ(indices_of(down[1]), (std::vector<int64_t>{2, 0, 3, 6, 1, 5, 7, 4}));
  EXPECT_TRUE(std::signbit(up[0].data<float>()[2]) && !std::signbit(up[0].data<float>()[3])) << "values keep their sign";
}

TEST(EagerSort, OddLengthsBothDirections) {
  for (int64_t n : {1, 2, 47, 48, 49, 1021, 65537}) {
    HostTensor x = HostTensor::random(DType::F32, {3, n}, uint64_t(n), -5, 5);
    for (bool descending : {false, true}) expect_sort_matches(x, -1, descending, str("f32 [3, ", n, "]"));
  }
}

TEST(EagerSort, EveryDtypeAndEveryAxis) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64}) {
    HostTensor x = HostTensor::random(d, {3, 501, 5}, 7, -1000, 1000);  // 16-bit floats: many ties
    for (bool descending : {false, true})
      for (int64_t axis : {0, 1, 2}) expect_sort_matches(x, axis, descending, str(dtype_name(d), " [3, 501, 5]"));
  }
  HostTensor ints = HostTensor::random(DType::I64, {2, 301}, 3, -50, 50);
  ints.data<int64_t>()[10] = std::numeric_limits<int64_t>::min();
  ints.data<int64_t>()[200] = std::numeric_limits<int64_t>::max();
  ints.data<int64_t>()[400] = int64_t(1) << 60;  // differs from its neighbours only in a high byte
  HostTensor i32 = HostTensor::random(DType::I32, {2, 301}, 4, -50, 50);
  i32.data<int32_t>()[5] = std::numeric_limits<int32_t>::min();
  i32.data<int32_t>()[6] = std::numeric_limits<int32_t>::max();
  for (bool descending : {false, true}) {
    expect_sort_matches(ints, -1, descending, "i64 with its extremes");
    expect_sort_matches(i32, -1, descending, "i32 with its extremes");
  }
}

TEST(EagerSort, TiesAndSpecialValues) {
  HostTensor ties = HostTensor::empty(DType::F32, {2, 20011});
  for (int64_t i = 0; i < ties.numel(); ++i) ties.data<float>()[i] = float((i * 7919) % 5);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (bool descending : {false, true}) expect_sort_matches(ties, -1, descending, "five values");
  for (DType d : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    HostTensor x = HostTensor::random(d, {4, 4099}, 11, -2, 2);
    for (int64_t i = 0; i < x.numel(); ++i) {
      double v = i % 97 == 0 ? nan : i % 89 == 0 ? inf : i % 83 == 0 ? -inf : i % 13 == 0 ? -0.0 : i % 11 == 0 ? 0.0 : 1e9;
      if (v != 1e9) x.set_f64(i, v);
    }
    x.set_f64(4099 + 5, -nan);  // a NaN with its sign bit set is still the largest value
    for (bool descending : {false, true}) expect_sort_matches(x, -1, descending, str(dtype_name(d), " special values"));
  }
}

}  // namespace
}  // namespace kiln::testing
