// Movement and indexing reference kernels: literal examples for every op (negative slice steps,
// clamped bounds, reflect/edge/negative pads, negative gather indices) plus permute/expand/slice
// sweeps against index loops written here, and out-of-range index errors.
#include <gtest/gtest.h>

#include "interp_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {
using Ints = std::vector<int64_t>;
HostTensor iota(DType dt, Ints shape) {
  std::vector<double> v(size_t(numel_of(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i);
  return tensor(dt, std::move(shape), v);
}
std::vector<int64_t> ints_of(const HostTensor& t) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.get_i64(i));
  return out;
}
}  // namespace

TEST(RefMovement, ReshapeSqueezeUnsqueezeFlattenKeepOrder) {
  HostTensor x = iota(DType::I32, {2, 1, 3});
  HostTensor r = run1(Op::Reshape, {{"shape", Shape{3, -1}}}, {x});
  EXPECT_EQ(r.shape(), (Ints{3, 2}));
  expect_ints(r, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(run1(Op::Squeeze, {}, {x}).shape(), (Ints{2, 3}));
  EXPECT_EQ(run1(Op::Unsqueeze, {{"axes", Ints{0, -1}}}, {x}).shape(), (Ints{1, 2, 1, 3, 1}));
  HostTensor f = run1(Op::Flatten, {{"start_dim", int64_t(1)}}, {x});
  EXPECT_EQ(f.shape(), (Ints{2, 3}));
  expect_ints(f, {0, 1, 2, 3, 4, 5});
}

TEST(RefMovement, PermuteHandChecked) {
  // x[i][j] = 3i + j, shape [2, 3]; transpose gives [[0, 3], [1, 4], [2, 5]].
  expect_ints(run1(Op::Permute, {{"perm", Ints{1, 0}}}, {iota(DType::I64, {2, 3})}), {0, 3, 1, 4, 2, 5});
}

TEST(RefMovement, PermuteSweepMatchesCoordinateLoop) {
  std::vector<Ints> perms = {{0, 1, 2}, {2, 0, 1}, {1, 2, 0}, {2, 1, 0}, {-1, 0, 1}};
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::Bool})
    for (const Ints& perm : perms) {
      HostTensor x = HostTensor::random(dt, {3, 7, 5}, 3, -5, 5);
      HostTensor y = run1(Op::Permute, {{"perm", perm}}, {x});
      Ints p;
      for (int64_t v : perm) p.push_back(v < 0 ? v + 3 : v);
      Ints out_shape = {x.shape()[size_t(p[0])], x.shape()[size_t(p[1])], x.shape()[size_t(p[2])]};
      ASSERT_EQ(y.shape(), out_shape);
      for (int64_t i = 0; i < y.numel(); ++i) {
        Ints oc = coords_of(i, out_shape), ic(3);
        for (int d = 0; d < 3; ++d) ic[size_t(p[size_t(d)])] = oc[size_t(d)];
        ASSERT_EQ(y.get_f64(i), x.get_f64((ic[0] * 7 + ic[1]) * 5 + ic[2])) << label(dt, out_shape);
      }
    }
}

TEST(RefMovement, ExpandRepeatsSizeOneDims) {
  HostTensor x = tensor(DType::F16, {3, 1}, {1, 2, 3});
  HostTensor y = run1(Op::Expand, {{"shape", Shape{2, 3, 4}}}, {x});
  EXPECT_EQ(y.shape(), (Ints{2, 3, 4}));
  std::vector<double> want;
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) want.push_back(i + 1);
  expect_close(y, want);
}

TEST(RefMovement, SliceWithStepsNegativeStepsAndClamping) {
  HostTensor x = iota(DType::I32, {10});
  auto slice = [&](int64_t s, int64_t e, int64_t step) {
    return ints_of(run1(Op::Slice, {{"starts", Ints{s}}, {"ends", Ints{e}}, {"steps", Ints{step}}}, {x}));
  };
  EXPECT_EQ(slice(2, 7, 1), (Ints{2, 3, 4, 5, 6}));
  EXPECT_EQ(slice(1, 8, 3), (Ints{1, 4, 7}));
  EXPECT_EQ(slice(-3, 100, 1), (Ints{7, 8, 9}));       // end clamped
  EXPECT_EQ(slice(9, -100, -2), (Ints{9, 7, 5, 3, 1}));  // python x[9::-2]
  EXPECT_EQ(slice(-1, -4, -1), (Ints{9, 8, 7}));
  EXPECT_EQ(slice(100, 0, -3), (Ints{9, 6, 3}));         // start clamped to the last element
  EXPECT_EQ(slice(5, 2, 1), (Ints{}));
  EXPECT_EQ(slice(0, int64_t(1) << 62, 4), (Ints{0, 4, 8}));  // INT64-style "to the end"
  EXPECT_ERROR_CONTAINS(slice(0, 5, 0), "step cannot be 0");
}

TEST(RefMovement, SliceSweepOnTwoAxesMatchesPythonSemantics) {
  HostTensor x = HostTensor::random(DType::F32, {7, 13}, 11);
  struct S { int64_t s, e, st; };
  std::vector<S> cases = {{0, 7, 1}, {1, -1, 2}, {-2, -8, -1}, {6, -100, -3}, {-100, 100, 5}};
  auto py_range = [](int64_t dim, S c) {
    // Python's slice.indices(), written out.
    Ints idx;
    int64_t s = c.s, e = c.e;
    if (c.st > 0) {
      s = s < 0 ? std::max<int64_t>(s + dim, 0) : std::min(s, dim);
      e = e < 0 ? std::max<int64_t>(e + dim, 0) : std::min(e, dim);
      for (int64_t i = s; i < e; i += c.st) idx.push_back(i);
    } else {
      s = s < 0 ? std::max<int64_t>(s + dim, -1) : std::min(s, dim - 1);
      e = e < 0 ? std::max<int64_t>(e + dim, -1) : std::min(e, dim - 1);
      for (int64_t i = s; i > e; i += c.st) idx.push_back(i);
    }
    return idx;
  };
  for (S a : cases)
    for (S b : cases) {
      HostTensor y = run1(Op::Slice, {{"starts", Ints{a.s, b.s}}, {"ends", Ints{a.e, b.e}},
                                      {"axes", Ints{0, -1}}, {"steps", Ints{a.st, b.st}}}, {x});
      Ints ra = py_range(7, a), rb = py_range(13, b);
      ASSERT_EQ(y.shape(), (Ints{int64_t(ra.size()), int64_t(rb.size())}));
      std::vector<double> want;
      for (int64_t i : ra)
        for (int64_t j : rb) want.push_back(x.get_f64(i * 13 + j));
      expect_close(y, want);
    }
}

TEST(RefMovement, ConcatAndSplit) {
  HostTensor a = iota(DType::I16, {2, 2}), b = tensor(DType::I16, {2, 1}, {7, 8});
  HostTensor c = run1(Op::Concat, {{"axis", int64_t(-1)}}, {a, b});
  expect_ints(c, {0, 1, 7, 2, 3, 8});
  HostTensor rows = run1(Op::Concat, {{"axis", int64_t(0)}}, {a, a, a});
  EXPECT_EQ(rows.shape(), (Ints{6, 2}));
  auto pieces = interp::run_op(Op::Split, {{"axis", int64_t(1)}, {"sizes", Ints{1, 0, 2}}}, {c});
  ASSERT_EQ(pieces.size(), 3u);
  expect_ints(pieces[0], {0, 2});
  EXPECT_EQ(pieces[1].shape(), (Ints{2, 0}));
  expect_ints(pieces[2], {1, 7, 3, 8});
}

TEST(RefMovement, PadConstantReflectEdgeAndNegativeCrop) {
  HostTensor x = tensor(DType::F32, {3}, {1, 2, 3});
  auto pad = [&](Ints pads, std::string mode) {
    return run1(Op::Pad, {{"pads", pads}, {"mode", mode}, {"value", 9.0}}, {x});
  };
  expect_close(pad({2, 1}, "constant"), {9, 9, 1, 2, 3, 9});
  expect_close(pad({2, 2}, "reflect"), {3, 2, 1, 2, 3, 2, 1});
  expect_close(pad({2, 1}, "edge"), {1, 1, 1, 2, 3, 3});
  expect_close(pad({-1, 1}, "constant"), {2, 3, 9});
  expect_close(pad({1, -2}, "edge"), {1, 1});
  // 2-D: pads = [top, left, bottom, right].
  HostTensor m = iota(DType::I32, {2, 2});
  HostTensor p = run1(Op::Pad, {{"pads", Ints{1, 0, 0, 1}}}, {m});
  EXPECT_EQ(p.shape(), (Ints{3, 3}));
  expect_ints(p, {0, 0, 0, 0, 1, 0, 2, 3, 0});
}

TEST(RefMovement, GatherWrapsNegativeIndicesAndRejectsOutOfRange) {
  HostTensor x = iota(DType::F64, {3, 4});  // x[i][j] = 4i + j
  HostTensor idx = tensor(DType::I64, {2, 2}, {0, -1, 2, 1});
  HostTensor rows = run1(Op::Gather, {{"axis", int64_t(0)}}, {x, idx});
  EXPECT_EQ(rows.shape(), (Ints{2, 2, 4}));
  expect_close(rows, {0, 1, 2, 3, 8, 9, 10, 11, 8, 9, 10, 11, 4, 5, 6, 7});
  HostTensor cols = run1(Op::Gather, {{"axis", int64_t(1)}}, {x, tensor(DType::I32, {2}, {3, -4})});
  expect_close(cols, {3, 0, 7, 4, 11, 8});
  HostTensor scalar_index = run1(Op::Gather, {{"axis", int64_t(1)}}, {x, tensor(DType::I32, {}, {2})});
  EXPECT_EQ(scalar_index.shape(), (Ints{3}));
  expect_close(scalar_index, {2, 6, 10});
  EXPECT_ERROR_CONTAINS(run1(Op::Gather, {{"axis", int64_t(1)}}, {x, tensor(DType::I32, {2}, {1, 4})}),
                        "index 4 at position [1] is out of range [-4, 4)");
  EXPECT_ERROR_CONTAINS(run1(Op::Gather, {}, {x, tensor(DType::I64, {1}, {-4})}), "index -4");
}

TEST(RefMovement, GatherElementsAndIndexSelect) {
  HostTensor x = iota(DType::I32, {2, 3});  // [[0, 1, 2], [3, 4, 5]]
  HostTensor idx = tensor(DType::I64, {2, 2}, {2, 0, -1, 1});
  expect_ints(run1(Op::GatherElements, {{"axis", int64_t(1)}}, {x, idx}), {2, 0, 5, 4});
  HostTensor idx0 = tensor(DType::I64, {1, 3}, {1, 0, 1});
  expect_ints(run1(Op::GatherElements, {{"axis", int64_t(0)}}, {x, idx0}), {3, 1, 5});
  EXPECT_ERROR_CONTAINS(run1(Op::GatherElements, {{"axis", int64_t(1)}}, {x, tensor(DType::I64, {2, 1}, {0, 3})}),
                        "index 3");
  expect_ints(run1(Op::IndexSelect, {{"axis", int64_t(1)}}, {x, tensor(DType::I32, {4}, {2, 2, -3, 1})}),
              {2, 2, 0, 1, 5, 5, 3, 4});
  EXPECT_ERROR_CONTAINS(run1(Op::IndexSelect, {}, {x, tensor(DType::I32, {1}, {2})}), "out of range");
}

TEST(RefMovement, TrilTriuOnLastTwoDimsWithK) {
  HostTensor x = tensor(DType::F32, {2, 2, 3}, {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});
  expect_close(run1(Op::Tril, {}, {x}), {1, 0, 0, 4, 5, 0, 1, 0, 0, 4, 5, 0});
  expect_close(run1(Op::Triu, {}, {x}), {1, 2, 3, 0, 5, 6, 1, 2, 3, 0, 5, 6});
  expect_close(run1(Op::Tril, {{"k", int64_t(1)}}, {x}), {1, 2, 0, 4, 5, 6, 1, 2, 0, 4, 5, 6});
  expect_close(run1(Op::Triu, {{"k", int64_t(-1)}}, {x}), {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});
  expect_close(run1(Op::Triu, {{"k", int64_t(2)}}, {x}), {0, 0, 3, 0, 0, 0, 0, 0, 3, 0, 0, 0});
  expect_ints(run1(Op::Tril, {{"k", int64_t(-1)}}, {tensor(DType::Bool, {2, 2}, {1, 1, 1, 1})}), {0, 0, 1, 0});
}

TEST(RefMovement, SymbolicSliceOutsideTheDimIsCaughtAtRunTime) {
  Graph g;
  Value* x = g.add_input("x", TensorType{DType::F32, {SymInt::symbol("N")}, Device::CPU});
  // The shape rule assumes x[5:] lies inside the dim: N - 5 elements.
  g.set_outputs({g.add(Op::Slice, {x}, {{"starts", Ints{5}}, {"ends", Ints{int64_t(1) << 50}}})});
  EXPECT_EQ(interp::run(g, {HostTensor::zeros(DType::F32, {8})})[0].numel(), 3);
  EXPECT_ERROR_CONTAINS(interp::run(g, {HostTensor::zeros(DType::F32, {3})}), "negative dim");
}
