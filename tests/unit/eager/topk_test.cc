// The CPU top-k kernel (src/kernels/cpu/topk.cc) against the reference kernel, bit for bit (values
// and indices): odd row lengths (1, 7, 13, 1021, 65537), k = 1, small, 50, 1024 and n, largest and
// smallest, every float dtype and i32/i64, along the last and a middle axis, and rows that are sorted
// (every element beats the running threshold), all ties (the lower index must win), or full of
// NaN, infinities and signed zeros; k = n of a line of 64 or more runs the radix sort (sort.h).
// Why: a selection with a running threshold is easy to get almost right, and "almost" shows only
// in tie order or at the special values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/compare.h"
#include "kernels/cpu/eager.h"
#include "kiln/interp.h"

namespace kiln::testing {
namespace {

using Dims = std::vector<int64_t>;

void expect_topk_matches(const HostTensor& x, int64_t k, int64_t axis, bool largest, const std::string& label) {
  SCOPED_TRACE(str(label, ", k = ", k, ", axis = ", axis, largest ? ", largest" : ", smallest"));
  const Attrs attrs{{"k", k}, {"axis", axis}, {"largest", int64_t(largest)}, {"sorted", int64_t(1)}};
  std::vector<HostTensor> want = interp::run_op(Op::TopK, attrs, {x});
  Scoreboard sb;
  std::vector<HostTensor> got = eager::run_op(Op::TopK, attrs, {x}, &sb);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(tensors_match(got[0], want[0], Tolerance{})) << "values";
  EXPECT_TRUE(tensors_match(got[1], want[1], Tolerance{})) << "indices";
  ASSERT_EQ(sb.kernels().size(), 1u);
  EXPECT_EQ(sb.kernels()[0].name.find("(reference)"), std::string::npos) << sb.kernels()[0].name;
}

TEST(EagerTopK, OddLengthsEveryKBothDirections) {
  for (int64_t n : {1, 7, 13, 1021, 65537}) {
    HostTensor x = HostTensor::random(DType::F32, {3, n}, uint64_t(n), -5, 5);
    for (int64_t k : {int64_t(1), std::min<int64_t>(3, n), std::min<int64_t>(50, n), std::min<int64_t>(1024, n), n})
      for (bool largest : {true, false}) expect_topk_matches(x, k, -1, largest, str("f32 [3, ", n, "]"));
  }
}

TEST(EagerTopK, EveryDtypeAndAMiddleAxis) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64}) {
    HostTensor x = HostTensor::random(d, {2, 1021, 5}, 7, -1000, 1000);  // 16-bit floats: many ties
    for (bool largest : {true, false}) {
      expect_topk_matches(x, 17, 1, largest, str(dtype_name(d), " [2, 1021, 5] axis 1"));
      expect_topk_matches(x, 2, 0, largest, str(dtype_name(d), " [2, 1021, 5] axis 0"));
      expect_topk_matches(x, 4, -1, largest, str(dtype_name(d), " [2, 1021, 5] axis -1"));
    }
  }
  // The extremes of the integer range order correctly too.
  HostTensor ints = HostTensor::random(DType::I64, {1, 301}, 3, -50, 50);
  ints.data<int64_t>()[10] = std::numeric_limits<int64_t>::min();
  ints.data<int64_t>()[200] = std::numeric_limits<int64_t>::max();
  for (bool largest : {true, false}) expect_topk_matches(ints, 5, -1, largest, "i64 with its extremes");
}

TEST(EagerTopK, SortedRowsAndTies) {
  const int64_t n = 20011;
  HostTensor up = HostTensor::empty(DType::F32, {2, n});
  HostTensor ties = HostTensor::empty(DType::F32, {2, n});
  for (int64_t i = 0; i < 2 * n; ++i) {
    up.data<float>()[i] = float(i % n) * (i < n ? 1.0f : -1.0f);  // ascending row, then descending
    ties.data<float>()[i] = float((i * 7919) % 5);                 // five values, thousands of ties
  }
  for (int64_t k : {1, 50, 1024, 4999})
    for (bool largest : {true, false}) {
      expect_topk_matches(up, k, -1, largest, "sorted rows");
      expect_topk_matches(ties, k, -1, largest, "ties");
    }
}

TEST(EagerTopK, NaNInfinitiesAndSignedZeros) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (DType d : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    HostTensor x = HostTensor::random(d, {4, 4099}, 11, -2, 2);
    for (int64_t i = 0; i < x.numel(); ++i) {
      double v = i % 97 == 0 ? nan : i % 89 == 0 ? inf : i % 83 == 0 ? -inf : i % 13 == 0 ? -0.0 : i % 11 == 0 ? 0.0 : 1e9;
      if (v == 1e9) continue;
      x.set_f64(i, v);
    }
    x.set_f64(4099 + 5, -nan);  // a NaN with its sign bit set is still the largest value
    for (int64_t k : {1, 45, 60, 300})
      for (bool largest : {true, false}) expect_topk_matches(x, k, -1, largest, str(dtype_name(d), " special values"));
  }
  // A row of NaN only, and rows where every candidate is -0 or +0.
  HostTensor all_nan = HostTensor::empty(DType::F32, {1, 37});
  for (int64_t i = 0; i < 37; ++i) all_nan.data<float>()[i] = nan;
  expect_topk_matches(all_nan, 5, -1, true, "all NaN");
  HostTensor zeros = HostTensor::empty(DType::F32, {1, 1000});
  for (int64_t i = 0; i < 1000; ++i) zeros.data<float>()[i] = i % 3 ? 0.0f : -0.0f;
  for (bool largest : {true, false}) expect_topk_matches(zeros, 7, -1, largest, "signed zeros");
}

// One long row (a decode step's logits) is cut into segments selected on several threads and
// merged: ties across segment borders and special values must come out as in one pass.
TEST(EagerTopK, OneLongRowSplitOverThreads) {
  const int before = eager::num_threads();
  for (int threads : {2, 3}) {
    eager::set_num_threads(threads);
    SCOPED_TRACE(str(threads, " threads"));
    HostTensor x = HostTensor::random(DType::F32, {1, 100003}, 21, -4, 4);
    HostTensor ties = HostTensor::empty(DType::F32, {2, 65537});
    for (int64_t i = 0; i < ties.numel(); ++i) ties.data<float>()[i] = float((i * 7919) % 11);
    for (int64_t i = 0; i < x.numel(); i += 4999) x.data<float>()[i] = std::numeric_limits<float>::quiet_NaN();
    for (int64_t k : {1, 50, 1024})
      for (bool largest : {true, false}) {
        expect_topk_matches(x, k, -1, largest, "one row with NaN");
        expect_topk_matches(ties, k, -1, largest, "two rows of ties");
      }
    expect_topk_matches(HostTensor::random(DType::I64, {1, 70001}, 5, -9, 9), 33, -1, true, "i64 ties");
  }
  eager::set_num_threads(before);
}

}  // namespace
}  // namespace kiln::testing
