// Reference kernels on str tensors: eq/ne with numpy broadcasting against hand-written truth
// tables, and the movement ops that carry whole strings (reshape, permute, expand, slice, concat,
// split, gather). Why: strings bypass the byte copies every other dtype's kernels use.
#include <gtest/gtest.h>

#include "interp_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {
using Ints = std::vector<int64_t>;
using Strs = std::vector<std::string>;

HostTensor strs(Ints shape, Strs values) { return HostTensor::from_strings(std::move(shape), std::move(values)); }

Strs strings_of(const HostTensor& t) {
  EXPECT_EQ(t.dtype(), DType::Str);
  Strs out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.str_at(i));
  return out;
}
}  // namespace

TEST(RefString, EqualSameShape) {
  HostTensor x = strs({2}, {"string1", "string2"});
  HostTensor y = strs({2}, {"string1", "string3"});
  HostTensor z = run1(Op::Eq, {}, {x, y});
  EXPECT_EQ(z.dtype(), DType::Bool);
  expect_ints(z, {1, 0});
  expect_ints(run1(Op::Ne, {}, {x, y}), {0, 1});
}

TEST(RefString, EqualBroadcasts) {
  // [2, 3] against [3]: each row compared with the same three strings.
  HostTensor a = strs({2, 3}, {"a", "b", "c", "a", "x", "c"});
  HostTensor b = strs({3}, {"a", "x", "c"});
  HostTensor z = run1(Op::Eq, {}, {a, b});
  EXPECT_EQ(z.shape(), (Ints{2, 3}));
  expect_ints(z, {1, 0, 1, 1, 1, 1});
  // [2, 1] against [1, 3]: an outer comparison; bytes compare exactly (case, length, NUL, UTF-8).
  HostTensor col = strs({2, 1}, {"\xc3\xa9", std::string("a\0", 2)});
  HostTensor row = strs({1, 3}, {"\xc3\xa9", "a", std::string("a\0", 2)});
  HostTensor outer = run1(Op::Eq, {}, {col, row});
  EXPECT_EQ(outer.shape(), (Ints{2, 3}));
  expect_ints(outer, {1, 0, 0, 0, 0, 1});
  // A scalar against a vector, and an empty tensor.
  expect_ints(run1(Op::Eq, {}, {strs({}, {"A"}), strs({3}, {"a", "A", ""})}), {0, 1, 0});
  EXPECT_EQ(run1(Op::Eq, {}, {strs({0}, {}), strs({1}, {"q"})}).numel(), 0);
}

TEST(RefString, MovementOpsCarryWholeStrings) {
  HostTensor x = strs({2, 3}, {"a", "bb", "ccc", "d", "", "f"});
  HostTensor r = run1(Op::Reshape, {{"shape", Shape{3, 2}}}, {x});
  EXPECT_EQ(r.shape(), (Ints{3, 2}));
  EXPECT_EQ(strings_of(r), (Strs{"a", "bb", "ccc", "d", "", "f"}));
  EXPECT_EQ(strings_of(run1(Op::Permute, {{"perm", Ints{1, 0}}}, {x})), (Strs{"a", "d", "bb", "", "ccc", "f"}));
  EXPECT_EQ(strings_of(run1(Op::Expand, {{"shape", Shape{2, 2}}}, {strs({2, 1}, {"p", "q"})})),
            (Strs{"p", "p", "q", "q"}));
  EXPECT_EQ(strings_of(run1(Op::Slice, {{"starts", Ints{2}}, {"ends", Ints{0}}, {"axes", Ints{1}}, {"steps", Ints{-1}}},
                            {x})),
            (Strs{"ccc", "bb", "f", ""}));
  EXPECT_EQ(strings_of(run1(Op::Concat, {{"axis", int64_t(0)}}, {x, strs({1, 3}, {"x", "y", "z"})})),
            (Strs{"a", "bb", "ccc", "d", "", "f", "x", "y", "z"}));
  HostTensor idx = tensor(DType::I64, {2}, {-1, 0});
  EXPECT_EQ(strings_of(run1(Op::Gather, {{"axis", int64_t(1)}}, {x, idx})), (Strs{"ccc", "a", "f", "d"}));
  auto pieces = interp::run_op(Op::Split, {{"axis", int64_t(1)}, {"sizes", Ints{1, 2}}}, {x});
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(strings_of(pieces[1]), (Strs{"bb", "ccc", "", "f"}));
}
