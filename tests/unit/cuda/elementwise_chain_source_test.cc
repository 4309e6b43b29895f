// The hand-templated elementwise-chain kernel text: names, vector widths, conversions, literals,
// step order, and the parser and float64 reference that the GPU checks rely on.
#include "runtime/cuda/elementwise_chain.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kiln/error.h"

namespace kiln::cuda {
namespace {

bool contains(const std::string& text, const std::string& piece) {
  return text.find(piece) != std::string::npos;
}

const std::vector<ChainStep> kMulAddRelu = {{ChainOp::Mul, 0.5}, {ChainOp::Add, 1.0}, {ChainOp::Relu, 0}};

TEST(ElementwiseChainSource, KernelNameListsDtypeAndOps) {
  EXPECT_EQ(chain_kernel_name(kMulAddRelu, DType::BF16), "kiln_chain_bf16_mul_add_relu");
  EXPECT_EQ(chain_kernel_name({}, DType::F32), "kiln_chain_f32_copy");
}

TEST(ElementwiseChainSource, Bf16KernelUses16ByteVectorsAndRoundsOnStore) {
  std::string src = chain_kernel_source(kMulAddRelu, DType::BF16);
  EXPECT_TRUE(contains(src, "extern \"C\" __global__ void __launch_bounds__(256)\n"
                            "kiln_chain_bf16_mul_add_relu(const void* __restrict__ in_raw, "
                            "void* __restrict__ out_raw, long long n)"))
      << src;
  EXPECT_TRUE(contains(src, "const long long vectors = n / 8;")) << src;
  EXPECT_TRUE(contains(src, "uint4 v[1];")) << src;
  EXPECT_TRUE(contains(src, "cvt.rn.bf16.f32")) << src;
  EXPECT_TRUE(contains(src, "__uint_as_float(((unsigned)v) << 16)")) << src;
  EXPECT_TRUE(contains(src, "i += 1 * stride")) << src;  // grid-stride loop
  EXPECT_TRUE(contains(src, "for (long long j = vectors * 8 + first; j < n; j += stride)")) << src;
}

TEST(ElementwiseChainSource, StepsAppearInOrderWithExactScalars) {
  std::string src = chain_kernel_source(kMulAddRelu, DType::BF16);
  size_t mul = src.find("const float s = (0x1p-1f); x = x * s;");
  size_t add = src.find("const float s = (0x1p+0f); x = x + s;");
  size_t relu = src.find("x = fmaxf(x, 0.0f);");
  ASSERT_NE(mul, std::string::npos) << src;
  ASSERT_NE(add, std::string::npos) << src;
  ASSERT_NE(relu, std::string::npos) << src;
  EXPECT_LT(mul, add);
  EXPECT_LT(add, relu);
  // 0.1 is not exact in f32: the literal is the f32 value, printed in hex.
  std::string tenth = chain_kernel_source({{ChainOp::Add, 0.1}}, DType::F32);
  EXPECT_TRUE(contains(tenth, "(0x1.99999ap-4f)")) << tenth;
}

TEST(ElementwiseChainSource, F16AndF32UseTheirOwnConversions) {
  std::string f16 = chain_kernel_source(kMulAddRelu, DType::F16);
  EXPECT_TRUE(contains(f16, "cvt.f32.f16")) << f16;
  EXPECT_TRUE(contains(f16, "cvt.rn.f16.f32")) << f16;
  EXPECT_FALSE(contains(f16, "bf16.f32")) << f16;
  std::string f32 = chain_kernel_source(kMulAddRelu, DType::F32);
  EXPECT_TRUE(contains(f32, "const long long vectors = n / 4;")) << f32;
  EXPECT_FALSE(contains(f32, "cvt.")) << f32;
  EXPECT_TRUE(contains(f32, "typedef float kiln_elem;")) << f32;
}

TEST(ElementwiseChainSource, OptionsChangeBlockAndVectorsPerThread) {
  ChainKernelOptions options;
  options.block_threads = 512;
  options.vectors_per_thread = 4;
  std::string src = chain_kernel_source(kMulAddRelu, DType::F32, options);
  EXPECT_TRUE(contains(src, "__launch_bounds__(512)")) << src;
  EXPECT_TRUE(contains(src, "uint4 v[4];")) << src;
  EXPECT_TRUE(contains(src, "i + 3 * stride < vectors")) << src;
  options.vectors_per_thread = 0;
  EXPECT_THROW(chain_kernel_source(kMulAddRelu, DType::F32, options), Error);
}

TEST(ElementwiseChainSource, EqualChainsGiveEqualTextAndDifferentScalarsDoNot) {
  EXPECT_EQ(chain_kernel_source(kMulAddRelu, DType::F16), chain_kernel_source(kMulAddRelu, DType::F16));
  EXPECT_NE(chain_kernel_source({{ChainOp::Mul, 0.5}}, DType::F16),
            chain_kernel_source({{ChainOp::Mul, 0.25}}, DType::F16));
}

TEST(ElementwiseChainSource, RejectsUnsupportedDtypesAndNonFiniteScalars) {
  try {
    chain_kernel_source(kMulAddRelu, DType::I32);
    FAIL() << "i32 accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "i32")) << e.what();
  }
  EXPECT_THROW(chain_kernel_source({{ChainOp::Mul, 1e300}}, DType::F32), Error);
}

TEST(ElementwiseChainParse, RoundTripsAndNamesBadSteps) {
  std::vector<ChainStep> steps = parse_chain("mul(0.5), add(1), relu, gelu, max(-2.5)");
  ASSERT_EQ(steps.size(), 5u);
  EXPECT_EQ(steps[0].op, ChainOp::Mul);
  EXPECT_EQ(steps[0].scalar, 0.5);
  EXPECT_EQ(steps[4].op, ChainOp::Max);
  EXPECT_EQ(steps[4].scalar, -2.5);
  EXPECT_EQ(chain_to_string(steps), "mul(0.5),add(1),relu,gelu,max(-2.5)");
  try {
    parse_chain("mul(2),frobnicate");
    FAIL() << "unknown op accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "frobnicate")) << e.what();
  }
  EXPECT_THROW(parse_chain("mul"), Error);        // needs a scalar
  EXPECT_THROW(parse_chain("relu(1)"), Error);    // takes none
  EXPECT_THROW(parse_chain("add(one)"), Error);   // not a number
}

TEST(ElementwiseChainReference, AppliesStepsInOrderInFloat64) {
  EXPECT_DOUBLE_EQ(apply_chain_reference(kMulAddRelu, 3.0), 2.5);
  EXPECT_DOUBLE_EQ(apply_chain_reference(kMulAddRelu, -4.0), 0.0);
  EXPECT_NEAR(apply_step_reference({ChainOp::Gelu, 0}, 1.0), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(apply_step_reference({ChainOp::Sigmoid, 0}, 0.0), 0.5, 1e-15);
  EXPECT_DOUBLE_EQ(apply_step_reference({ChainOp::Min, 2}, 3.0), 2.0);
}

}  // namespace
}  // namespace kiln::cuda
