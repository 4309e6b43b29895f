// The eager kernels' fast paths at odd sizes (1, 7, 13, 1021, 65537 - the last above the OpenMP
// threshold) and in each broadcast pattern, against the reference interpreter; plus results that
// must not depend on the thread count, and user errors that must be kiln::Error.
#include <gtest/gtest.h>

#include <limits>

#include <cmath>

#include "kernels/cpu/eager.h"
#include "kiln/interp.h"
#include "common/eager_tolerance.h"

namespace kiln::testing {
namespace {

using Dims = std::vector<int64_t>;
const Dims kOddSizes = {1, 7, 13, 1021, 65537};

HostTensor rand(DType d, Dims shape, uint64_t seed, double lo = -3, double hi = 3) {
  return HostTensor::random(d, std::move(shape), seed, lo, hi);
}

// Runs op eagerly and through the interpreter; expects agreement and the fast kernel's name.
void expect_matches(Op op, const std::vector<HostTensor>& in, const Attrs& attrs = {}, bool expect_fast = true) {
  std::vector<HostTensor> want = interp::run_op(op, attrs, in);
  Scoreboard sb;
  std::vector<HostTensor> got = eager::run_op(op, attrs, in, &sb);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(tensors_match(got[i], want[i], eager_tolerance(op, want[i].dtype())))
        << op_name(op) << " output " << i << " of " << want[i].to_string();
  ASSERT_EQ(sb.kernels().size(), 1u);
  if (expect_fast) {
    EXPECT_EQ(sb.kernels()[0].name.find("(reference)"), std::string::npos) << sb.kernels()[0].name;
  }
}

TEST(EagerFastPaths, UnaryOpsAtOddSizes) {
  for (int64_t n : kOddSizes) {
    SCOPED_TRACE(str("n = ", n));
    for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
      SCOPED_TRACE(dtype_name(d));
      for (Op op : {Op::Exp, Op::Tanh, Op::Sigmoid, Op::Silu, Op::Gelu, Op::Neg, Op::Relu, Op::Floor, Op::Round})
        expect_matches(op, {rand(d, {n}, 11)});
      expect_matches(Op::Log, {rand(d, {n}, 12, 0.01, 9)});
      expect_matches(Op::Sqrt, {rand(d, {n}, 13, 0, 9)});
      expect_matches(Op::Clamp, {rand(d, {n}, 14)}, {{"min", -0.1}, {"max", 1.3}});
    }
    for (DType d : {DType::I8, DType::I32, DType::I64, DType::U8}) {
      SCOPED_TRACE(dtype_name(d));
      for (Op op : {Op::Neg, Op::Abs, Op::Relu, Op::Sign})
        if (!(op == Op::Neg && d == DType::U8)) expect_matches(op, {rand(d, {n}, 15, -100, 100)});
      expect_matches(Op::Clamp, {rand(d, {n}, 16, -100, 100)}, {{"min", -7.5}, {"max", 20.0}});
    }
  }
}

TEST(EagerFastPaths, CastsBetweenEveryDtypePair) {
  const std::vector<DType> all = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8,
                                  DType::I16, DType::I32, DType::I64, DType::U8, DType::Bool};
  for (DType from : all)
    for (DType to : all) {
      SCOPED_TRACE(str(dtype_name(from), " -> ", dtype_name(to)));
      HostTensor x = rand(from, {1021}, 17, -70000, 70000);  // overflows f16 and every narrow int
      expect_matches(Op::Cast, {x}, {{"dtype", to}});
      // Large integers that f32 cannot hold exactly (double rounding would show here).
      if (from == DType::I64 || from == DType::I32)
        expect_matches(Op::Cast, {rand(from, {1021}, 18, -2e9, 2e9)}, {{"dtype", to}});
    }
}

TEST(EagerFastPaths, BinaryBroadcastPatterns) {
  struct Pattern { Dims a, b; const char* name; };
  const std::vector<Pattern> patterns = {
      {{65537}, {65537}, "same shape above threshold"}, {{1021}, {}, "tensor op scalar"},
      {{}, {13}, "scalar op tensor"},                   {{13, 1021}, {1021}, "row vector"},
      {{1021, 13}, {1021, 1}, "column vector"},         {{7, 1, 13}, {1, 5, 1}, "outer product"},
      {{3, 1, 5, 7}, {4, 1, 7}, "general"},             {{1}, {1}, "one element"},
      {{300, 257}, {300, 257}, "2-D above threshold"},  {{2, 40000}, {40000}, "few long rows"},
  };
  for (const Pattern& p : patterns) {
    SCOPED_TRACE(p.name);
    // Sizes above the OpenMP threshold run the two main dtypes only: the reference is slow.
    bool large = numel_of(p.a) + numel_of(p.b) > 20000;
    for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::F64}) {
      if (large && d != DType::F32 && d != DType::F16) continue;
      SCOPED_TRACE(dtype_name(d));
      HostTensor a = rand(d, p.a, 21), b = rand(d, p.b, 22, 0.5, 4);  // b > 0: a safe divisor
      for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Maximum, Op::Minimum, Op::Lt, Op::Eq})
        expect_matches(op, {a, b});
      expect_matches(Op::Mod, {a, b});
      if (is_float(d)) expect_matches(Op::Pow, {rand(d, p.a, 23, 0.1, 3), b});
    }
    HostTensor cond = rand(DType::Bool, p.a, 24);
    expect_matches(Op::Where, {cond, rand(DType::F32, p.b, 25), rand(DType::F32, p.a, 26)});
    expect_matches(Op::And, {cond, rand(DType::Bool, p.b, 27)});
  }
}

TEST(EagerFastPaths, IntegerDivisionAndModuloFollowTheReference) {
  for (DType d : {DType::I8, DType::I32, DType::I64}) {
    HostTensor a = rand(d, {1021}, 31, -128, 127), b = rand(d, {1021}, 32, -9, 9);
    for (int64_t i = 0; i < b.numel(); ++i)
      if (b.get_i64(i) == 0) b.set_i64(i, -1);  // also covers MIN / -1
    a.set_i64(0, d == DType::I8 ? -128 : -2147483648LL);
    expect_matches(Op::Div, {a, b});
    expect_matches(Op::Mod, {a, b});
    expect_matches(Op::Mod, {a, b}, {{"fmod", int64_t(1)}});
  }
}

TEST(EagerFastPaths, NanPropagatesThroughMaxMinAndReductions) {
  HostTensor a = rand(DType::F32, {7, 13}, 41), b = rand(DType::F32, {13}, 42);
  a.set_f64(5, NAN);
  b.set_f64(3, NAN);
  for (Op op : {Op::Maximum, Op::Minimum}) expect_matches(op, {a, b});
  for (Op op : {Op::ReduceMax, Op::ReduceMin, Op::ArgMax, Op::ArgMin}) {
    expect_matches(op, {a}, op == Op::ArgMax || op == Op::ArgMin ? Attrs{{"axis", int64_t(1)}} : Attrs{{"axes", Dims{1}}});
    expect_matches(op, {a}, op == Op::ArgMax || op == Op::ArgMin ? Attrs{{"axis", int64_t(0)}} : Attrs{{"axes", Dims{0}}});
  }
}

TEST(EagerFastPaths, ReductionsOverRowsColumnsAndEverything) {
  struct Case { Dims shape, axes; };
  const std::vector<Case> cases = {
      {{1000000}, {}},         {{13, 65537}, {1}},  {{1021, 13}, {0}},   {{7, 1021, 13}, {1}},
      {{7, 1021, 13}, {1, 2}}, {{1}, {0}},          {{3, 1, 5}, {1}},    {{2, 70000}, {1}},
      {{70000, 3}, {1}},       {{5, 7, 9}, {-1}},   {{4, 1, 6}, {0, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(str(dims_to_string(c.shape), " axes ", dims_to_string(c.axes)));
    bool large = numel_of(c.shape) > 100000;  // the reference is slow: main dtypes only
    for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32}) {
      if (large && d != DType::F32 && d != DType::BF16) continue;
      HostTensor x = rand(d, c.shape, 51, is_float(d) ? -1 : -50, is_float(d) ? 1 : 50);
      for (Op op : {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin}) expect_matches(op, {x}, {{"axes", c.axes}});
      if (is_float(d)) expect_matches(Op::ReduceMean, {x}, {{"axes", c.axes}, {"keepdim", int64_t(1)}});
    }
    expect_matches(Op::ReduceProd, {rand(DType::F32, c.shape, 52, 0.999, 1.001)}, {{"axes", c.axes}});
  }
  for (Dims shape : {Dims{1021, 13}, Dims{13, 65537}, Dims{1}})
    for (int64_t axis : {int64_t(0), int64_t(-1)})
      for (DType d : {DType::F32, DType::F16, DType::I64}) {
        expect_matches(Op::ArgMax, {rand(d, shape, 53, -1000, 1000)}, {{"axis", axis}});
        expect_matches(Op::ArgMin, {rand(d, shape, 54, -1000, 1000)}, {{"axis", axis}, {"keepdim", int64_t(1)}});
      }
}

TEST(EagerFastPaths, NonContiguousReductionAxesFallBackCorrectly) {
  HostTensor x = rand(DType::F32, {3, 5, 7}, 55);
  Scoreboard sb;
  std::vector<HostTensor> got = eager::run_op(Op::ReduceSum, {{"axes", Dims{0, 2}}}, {x}, &sb);
  EXPECT_TRUE(tensors_match(got[0], interp::run_op(Op::ReduceSum, {{"axes", Dims{0, 2}}}, {x})[0],
                            eager_tolerance(Op::ReduceSum, DType::F32)));
  EXPECT_EQ(sb.kernels()[0].name, "reduce_sum(reference)");
}

TEST(EagerFastPaths, MatmulShapes) {
  struct Case { Dims a, b; };
  const std::vector<Case> cases = {
      {{1, 1}, {1, 1}},  {{7, 13}, {13, 1021}},    {{3, 1, 7, 13}, {2, 13, 5}}, {{13}, {13, 7}},
      {{7, 13}, {13}},   {{4, 65, 33}, {33, 17}},  {{5, 3, 8}, {5, 8, 2}},      {{13}, {13}},
      {{2, 0, 3}, {3, 4}}, {{3, 0}, {0, 5}},
  };
  for (const Case& c : cases)
    for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
      SCOPED_TRACE(str(dims_to_string(c.a), " x ", dims_to_string(c.b), " ", dtype_name(d)));
      expect_matches(Op::MatMul, {rand(d, c.a, 61, -1, 1), rand(d, c.b, 62, -1, 1)});
    }
}

// f32 conv2d through each path of src/kernels/cpu/conv.cc: im2col tiles + sgemm (strides,
// dilations, asymmetric pads, groups, tiles ending mid-row, channel blocks), 1x1 direct, and the
// depthwise loop; other dtypes keep the reference kernel.
TEST(EagerFastPaths, Conv2dPaths) {
  struct Case { Dims x, w, strides, pads, dilations; int64_t groups; bool bias; };
  const std::vector<Case> cases = {
      {{2, 3, 13, 13}, {5, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {2, 2}, 1, true},
      {{2, 6, 13, 13}, {9, 2, 3, 3}, {2, 2}, {1, 1, 1, 1}, {2, 2}, 3, true},
      {{1, 3, 13, 13}, {6, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {2, 2}, 3, false},
      {{2, 8, 13, 11}, {8, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 8, true},
      {{1, 7, 13, 13}, {7, 1, 5, 5}, {2, 3}, {2, 0, 2, 1}, {1, 2}, 7, true},
      {{2, 16, 7, 9}, {12, 16, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},
      {{1, 5, 6, 7}, {3, 5, 1, 1}, {1, 1}, {0, 0, 2, 1}, {1, 1}, 1, false},
      {{1, 3, 13, 17}, {5, 3, 5, 2}, {1, 3}, {0, 2, 1, 0}, {3, 1}, 1, true},
      {{1, 4, 40, 40}, {6, 4, 5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 1, true},
      {{1, 64, 2, 2}, {128, 64, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {{1, 2, 3, 3}, {3, 2, 5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 1, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(str(dims_to_string(c.x), " * ", dims_to_string(c.w), " groups ", c.groups));
    std::vector<HostTensor> in{rand(DType::F32, c.x, 41, -1, 1), rand(DType::F32, c.w, 42, -1, 1)};
    if (c.bias) in.push_back(rand(DType::F32, {c.w[0]}, 43, -1, 1));
    Attrs attrs{{"strides", c.strides}, {"pads", c.pads}, {"dilations", c.dilations}, {"groups", c.groups}};
    expect_matches(Op::Conv2d, in, attrs);
    // The same result on one thread (the work split must not change what is summed).
    eager::set_num_threads(1);
    expect_matches(Op::Conv2d, in, attrs);
    eager::set_num_threads(0);
  }
  expect_matches(Op::Conv2d, {rand(DType::F64, {1, 2, 5, 5}, 44), rand(DType::F64, {3, 2, 3, 3}, 45)}, {},
                 /*expect_fast=*/false);
}

// f32 max pooling (pool.cc) against the reference kernel: odd sizes, strides, dilations,
// asymmetric padding, ceil_mode windows that run past the input, a NaN in the input, one thread
// and two; other dtypes stay on the reference kernel.
TEST(EagerFastPaths, MaxPool2dPaths) {
  struct Case { Dims x, kernel, strides, pads, dilations; int64_t ceil; };
  const std::vector<Case> cases = {
      {{2, 3, 13, 13}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0},
      {{1, 5, 17, 11}, {2, 3}, {1, 2}, {0, 1, 1, 0}, {2, 1}, 0},
      {{3, 2, 9, 10}, {3, 2}, {2, 3}, {1, 0, 1, 1}, {1, 1}, 1},
      {{1, 64, 32, 32}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0},  // ResNet's stem pool
      {{1, 1, 4, 4}, {4, 4}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(str(dims_to_string(c.x), " kernel ", dims_to_string(c.kernel), " ceil ", c.ceil));
    HostTensor x = rand(DType::F32, c.x, 51, -3, 3);
    Attrs attrs{{"kernel", c.kernel}, {"strides", c.strides}, {"pads", c.pads}, {"dilations", c.dilations},
                {"ceil_mode", c.ceil}};
    expect_matches(Op::MaxPool2d, {x}, attrs);
    eager::set_num_threads(1);
    expect_matches(Op::MaxPool2d, {x}, attrs);
    eager::set_num_threads(0);
  }
  HostTensor x = rand(DType::F32, {1, 2, 6, 6}, 52);
  x.set_f64(7, std::numeric_limits<double>::quiet_NaN());
  expect_matches(Op::MaxPool2d, {x}, {{"kernel", Dims{3, 3}}, {"strides", Dims{2, 2}}});
  expect_matches(Op::MaxPool2d, {rand(DType::F64, {1, 2, 6, 6}, 53)}, {{"kernel", Dims{2, 2}}}, /*expect_fast=*/false);
}

// f32 attention without a mask (attention.cc): odd sizes, Tq != Tk both ways (causal rows that
// mask every key give NaN, as in the reference), an explicit scale; masked calls stay reference.
TEST(EagerFastPaths, AttentionWithoutMask) {
  struct Case { Dims q, k, v; };
  const std::vector<Case> cases = {
      {{2, 3, 17, 8}, {2, 3, 17, 8}, {2, 3, 17, 8}}, {{1, 13, 5}, {1, 7, 5}, {1, 7, 9}},
      {{5, 7}, {11, 7}, {11, 3}},                    {{4, 1, 1, 16}, {4, 1, 33, 16}, {4, 1, 33, 16}},
  };
  for (const Case& c : cases)
    for (int64_t causal : {0, 1}) {
      SCOPED_TRACE(str(dims_to_string(c.q), " ", dims_to_string(c.k), " causal ", causal));
      std::vector<HostTensor> in{rand(DType::F32, c.q, 51, -2, 2), rand(DType::F32, c.k, 52, -2, 2),
                                 rand(DType::F32, c.v, 53, -1, 1)};
      expect_matches(Op::Attention, in, {{"causal", causal}});
      expect_matches(Op::Attention, in, {{"causal", causal}, {"scale", 0.3}});
    }
  HostTensor mask = rand(DType::Bool, {17, 17}, 54);
  expect_matches(Op::Attention, {rand(DType::F32, {2, 17, 8}, 55), rand(DType::F32, {2, 17, 8}, 56),
                                 rand(DType::F32, {2, 17, 8}, 57), mask}, {}, /*expect_fast=*/false);
}

TEST(EagerFastPaths, SoftmaxAndNormsAtOddSizes) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(d));
    for (Dims shape : {Dims{7, 1021}, Dims{1, 1}, Dims{65537}, Dims{3, 13, 7}}) {
      for (Op op : {Op::Softmax, Op::LogSoftmax}) {
        expect_matches(op, {rand(d, shape, 71, -8, 8)});
        expect_matches(op, {rand(d, shape, 72, -8, 8)}, {{"axis", int64_t(0)}});
      }
      int64_t last = shape.back();
      expect_matches(Op::LayerNorm, {rand(d, shape, 73), rand(d, {last}, 74), rand(d, {last}, 75)});
      expect_matches(Op::LayerNorm, {rand(d, shape, 76)}, {{"axis", int64_t(0)}});
      expect_matches(Op::RmsNorm, {rand(d, shape, 77), rand(d, {last}, 78)});
    }
    // weight that broadcasts inside the normalised group
    expect_matches(Op::LayerNorm, {rand(d, {5, 6, 7}, 79), rand(d, {1, 7}, 80)}, {{"axis", int64_t(1)}});
    expect_matches(Op::BatchNorm, {rand(d, {3, 5, 1021}, 81), rand(d, {5}, 82), rand(d, {5}, 83),
                                   rand(d, {5}, 84), rand(d, {5}, 85, 0.5, 2)});
  }
  HostTensor all_neg_inf = HostTensor::from_doubles(DType::F32, {2, 2}, {-INFINITY, -INFINITY, 1, 2});
  expect_matches(Op::Softmax, {all_neg_inf});
}

TEST(EagerFastPaths, MovementOps) {
  for (DType d : {DType::F32, DType::F16, DType::I64, DType::Bool, DType::I8}) {
    SCOPED_TRACE(dtype_name(d));
    expect_matches(Op::Permute, {rand(d, {1021, 67}, 91)}, {{"perm", Dims{1, 0}}});
    expect_matches(Op::Permute, {rand(d, {3, 5, 7, 11}, 92)}, {{"perm", Dims{0, 2, 3, 1}}});
    expect_matches(Op::Permute, {rand(d, {3, 5, 7, 11}, 93)}, {{"perm", Dims{3, 1, 2, 0}}});
    expect_matches(Op::Permute, {rand(d, {2, 300, 257}, 94)}, {{"perm", Dims{0, 2, 1}}});
    expect_matches(Op::Permute, {rand(d, {7, 1, 13}, 95)}, {{"perm", Dims{2, 1, 0}}});
    expect_matches(Op::Expand, {rand(d, {1021, 1}, 96)}, {{"shape", Shape{3, 1021, 13}}});
    expect_matches(Op::Expand, {rand(d, {}, 97)}, {{"shape", Shape{65537}}});
    expect_matches(Op::Slice, {rand(d, {1021, 67}, 98)},
                   {{"starts", Dims{-2, 3}}, {"ends", Dims{-1021 * 4, 60}}, {"steps", Dims{-3, 2}}});
    expect_matches(Op::Slice, {rand(d, {300, 257}, 99)}, {{"starts", Dims{5}}, {"ends", Dims{250}}, {"axes", Dims{1}}});
    expect_matches(Op::Concat, {rand(d, {300, 7}, 100), rand(d, {300, 1}, 101), rand(d, {300, 250}, 102)},
                   {{"axis", int64_t(-1)}});
    expect_matches(Op::Concat, {rand(d, {3, 1021}, 103), rand(d, {0, 1021}, 104), rand(d, {13, 1021}, 105)},
                   {{"axis", int64_t(0)}});
    expect_matches(Op::Split, {rand(d, {13, 1021}, 106)}, {{"axis", int64_t(1)}, {"sizes", Dims{1, 1000, 20}}});
    expect_matches(Op::Gather, {rand(d, {1021, 13}, 107), rand(DType::I64, {7, 5}, 108, -1021, 1020)});
    expect_matches(Op::Gather, {rand(d, {3, 1021, 2}, 109), rand(DType::I32, {13}, 110, 0, 1020)},
                   {{"axis", int64_t(1)}});
    for (int64_t k : {-3, 0, 1, 100}) {
      expect_matches(Op::Tril, {rand(d, {2, 13, 7}, 111)}, {{"k", k}});
      expect_matches(Op::Triu, {rand(d, {7, 13}, 112)}, {{"k", k}});
    }
    expect_matches(Op::Reshape, {rand(d, {6, 35}, 113)}, {{"shape", Shape{-1, 7}}});
  }
}

TEST(EagerFastPaths, ResultsDoNotDependOnTheThreadCount) {
  HostTensor x = rand(DType::F32, {3, 400000}, 121), y = rand(DType::F32, {400000}, 122);
  auto run_all = [&] {
    std::vector<HostTensor> out;
    out.push_back(eager::run_op(Op::ReduceSum, {{"axes", Dims{1}}}, {x})[0]);
    out.push_back(eager::run_op(Op::ReduceSum, {}, {x})[0]);
    out.push_back(eager::run_op(Op::Add, {}, {x, y})[0]);
    out.push_back(eager::run_op(Op::Softmax, {}, {x})[0]);
    return out;
  };
  int before = eager::num_threads();
  eager::set_num_threads(1);
  EXPECT_EQ(eager::num_threads(), 1);
  std::vector<HostTensor> one = run_all();
  eager::set_num_threads(3);
  EXPECT_EQ(eager::num_threads(), 3);
  std::vector<HostTensor> three = run_all();
  eager::set_num_threads(0);
  EXPECT_EQ(eager::num_threads(), before);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(one[i].bit_equal(three[i])) << "result " << i;
}

TEST(EagerErrors, UserErrorsNameTheOp) {
  auto expect_error = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  HostTensor ints = HostTensor::from_doubles(DType::I32, {3}, {1, 2, 3});
  HostTensor zero = HostTensor::from_doubles(DType::I32, {3}, {1, 0, 3});
  expect_error([&] { eager::run_op(Op::Div, {}, {ints, zero}); }, "division by zero");
  expect_error([&] { eager::run_op(Op::Mod, {}, {ints, zero}); }, "'mod'");
  expect_error([&] { eager::run_op(Op::Add, {}, {rand(DType::F32, {3}, 1), rand(DType::F32, {4}, 2)}); }, "'add'");
  expect_error([&] { eager::run_op(Op::Add, {}, {ints}); }, "expects 2 operands");
  expect_error([&] { eager::run_op(Op::Add, {}, {ints, rand(DType::F32, {3}, 1)}); }, "share a dtype");
  expect_error([&] { eager::run_op(Op::Gather, {}, {rand(DType::F32, {4, 2}, 1), HostTensor::scalar(DType::I64, 4)}); },
               "out of range");
  expect_error([&] { eager::run_op(Op::Softmax, {{"bogus", int64_t(1)}}, {rand(DType::F32, {4}, 1)}); }, "bogus");
}

}  // namespace
}  // namespace kiln::testing
