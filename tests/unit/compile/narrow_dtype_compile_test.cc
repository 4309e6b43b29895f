// Generated kernels on the 8- and 4-bit dtypes and u64: the C prelude's bit-arithmetic conversions
// must give exactly the host's codes (src/ir/narrow_float.cc, written independently with
// frexp/ldexp) for every f16 value (which includes every fp8 tie), specials and random f32 bit
// patterns; 4-bit integers wrap like the interpreter; u64 divides and compares above 2^63.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "kiln/random.h"
#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

const DType kNarrowFloats[] = {DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2,
                               DType::F8E5M2FNUZ, DType::F4E2M1,  DType::F8E8M0};

HostTensor probe_floats() {
  std::vector<float> xs;
  for (uint32_t h = 0; h < 65536; ++h) xs.push_back(f16_bits_to_f32(uint16_t(h)));
  const float inf = std::numeric_limits<float>::infinity();
  for (float f : {inf, -inf, std::numeric_limits<float>::quiet_NaN(), -0.0f, 1e-45f, -1e-40f, 3e38f,
                  std::ldexp(1.0f, -127), std::ldexp(1.0f, -126), std::ldexp(1.5f, 127), 464.0f, 465.0f})
    xs.push_back(f);
  for (uint64_t i = 0; i < 30011; ++i) {  // random bit patterns: every exponent, odd count
    uint32_t bits = uint32_t(random_uniform01(7, i) * 4294967296.0);
    float f;
    std::memcpy(&f, &bits, 4);
    xs.push_back(f);
  }
  HostTensor t = HostTensor::empty(DType::F32, {int64_t(xs.size())});
  std::memcpy(t.raw(), xs.data(), xs.size() * 4);
  return t;
}

TEST(NarrowDTypeCompile, EncodingMatchesTheHostBitForBit) {
  HostTensor in = probe_floats();
  const int64_t n = in.numel();
  for (DType t : kNarrowFloats) {
    Graph g(str("encode_", dtype_name(t)));
    Value* x = g.add_input("x", f32({n}));
    g.set_outputs({g.add(Op::Cast, {x}, {{"dtype", t}})});
    HostTensor out = compile(g, test_options())->run({in})[0];
    ASSERT_EQ(out.dtype(), t);
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 5; ++i) {
      float v = in.data<float>()[i];
      uint8_t want = f32_to_narrow_bits(t, v);
      if (out.data<uint8_t>()[i] != want) {
        ++bad;
        ADD_FAILURE() << dtype_name(t) << " of " << v << ": generated code " << int(out.data<uint8_t>()[i])
                      << ", host " << int(want);
      }
    }
  }
}

TEST(NarrowDTypeCompile, DecodingMatchesTheHostForEveryCode) {
  for (DType t : kNarrowFloats) {
    const int64_t codes = t == DType::F4E2M1 ? 16 : 256;
    HostTensor in = HostTensor::empty(t, {codes});
    for (int64_t c = 0; c < codes; ++c) in.data<uint8_t>()[c] = uint8_t(c);
    Graph g(str("decode_", dtype_name(t)));
    Value* x = g.add_input("x", typed(t, {codes}));
    g.set_outputs({g.add(Op::Cast, {x}, {{"dtype", DType::F32}}), g.add(Op::Cast, {x}, {{"dtype", DType::F16}})});
    auto outs = compile(g, test_options())->run({in});
    for (int64_t c = 0; c < codes; ++c) {
      float want = narrow_bits_to_f32(t, uint8_t(c)), got = outs[0].data<float>()[c];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << dtype_name(t) << " code " << c;
      } else {
        EXPECT_EQ(std::memcmp(&want, &got, 4), 0) << dtype_name(t) << " code " << c << ": " << got << " vs " << want;
        EXPECT_EQ(outs[1].get_f64(c), double(Half(want))) << dtype_name(t) << " code " << c;
      }
    }
  }
}

TEST(NarrowDTypeCompile, NarrowAndU64GraphsMatchTheInterpreter) {
  // f32 -> every narrow type -> f32 at an odd size, with values past every format's range.
  for (DType t : kNarrowFloats) {
    Graph g(str("round_trip_", dtype_name(t)));
    Value* x = g.add_input("x", f32({3, 37}));
    Value* narrow = g.add(Op::Cast, {x}, {{"dtype", t}});
    g.set_outputs({g.add(Op::Cast, {narrow}, {{"dtype", DType::F32}}), narrow});
    compile_and_check(g, {HostTensor::random(DType::F32, {3, 37}, 5, -600, 600)}, str("round trip ", dtype_name(t)));
  }
  // 4-bit integers: casts from floats and ints wrap; an add wraps after the op.
  for (DType t : {DType::I4, DType::U4}) {
    Graph g(str("int4_", dtype_name(t)));
    Value* x = g.add_input("x", f32({41}));
    Value* i = g.add_input("i", typed(DType::I32, {41}));
    Value* a = g.add(Op::Cast, {x}, {{"dtype", t}});
    Value* b = g.add(Op::Cast, {i}, {{"dtype", t}});
    g.set_outputs({a, b, g.add(Op::Add, {a, b}), g.add(Op::Cast, {a}, {{"dtype", DType::F32}})});
    compile_and_check(g, {HostTensor::random(DType::F32, {41}, 8, -40, 40), HostTensor::random(DType::I32, {41}, 9, -100, 100)},
                      str("4-bit ", dtype_name(t)));
  }
}

TEST(NarrowDTypeCompile, U64DividesComparesAndCastsAboveTwoToThe63) {
  const uint64_t top = 1ull << 63, all = ~0ull;
  HostTensor a = HostTensor::empty(DType::U64, {5}), b = HostTensor::empty(DType::U64, {5});
  uint64_t av[5] = {all, top, 7, top + 5, 12}, bv[5] = {2, 1, top, 3, 5};
  std::memcpy(a.raw(), av, sizeof av);
  std::memcpy(b.raw(), bv, sizeof bv);
  Graph g("u64");
  Value* x = g.add_input("a", typed(DType::U64, {5}));
  Value* y = g.add_input("b", typed(DType::U64, {5}));
  g.set_outputs({g.add(Op::Div, {x, y}), g.add(Op::Mod, {x, y}), g.add(Op::Maximum, {x, y}),
                 g.add(Op::Lt, {x, y}), g.add(Op::Cast, {x}, {{"dtype", DType::F64}})});
  auto exe = compile_and_check(g, {a, b}, "u64");
  auto want = interp::run(g, {a, b});
  // Hand-computed: unsigned quotients, remainders and order.
  uint64_t q[5] = {all / 2, top, 0, (top + 5) / 3, 2}, r[5] = {1, 0, 7, (top + 5) % 3, 2};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(want[0].data<uint64_t>()[i], q[i]) << i;
    EXPECT_EQ(want[1].data<uint64_t>()[i], r[i]) << i;
    EXPECT_EQ(want[2].data<uint64_t>()[i], std::max(av[i], bv[i])) << i;
    EXPECT_EQ(want[3].get_i64(i), av[i] < bv[i] ? 1 : 0) << i;
    EXPECT_EQ(want[4].get_f64(i), double(av[i])) << i;
  }
}

}  // namespace
}  // namespace kiln::testing
