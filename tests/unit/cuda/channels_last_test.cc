// The CUDA target's channels-last pass (codegen/cuda/channels_last.h) on graphs shaped like the
// models it is for: ConvNeXt blocks (depthwise conv, permute to channels-last, layer norm, linear
// layers, permute back, layer scale, residual add) lose their permutes except at the graph's
// edges and compute the same values (the interpreter before and after, random inputs); a
// MobileNet-style NCHW chain keeps its depthwise conv NCHW. No GPU needed; the channels-last
// conv itself runs on the GPU in library_kernels_test.cc.
#include <gtest/gtest.h>

#include "codegen/cuda/channels_last.h"
#include "codegen/cuda/library_kernels.h"
#include "common/compare.h"
#include "kiln/interp.h"

namespace kiln::testing {
namespace {

using Ints = std::vector<int64_t>;

HostTensor random(DType d, std::vector<int64_t> shape, uint64_t seed, double scale = 1) {
  HostTensor t = HostTensor::random(DType::F64, shape, seed);
  std::vector<double> v(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = t.get_f64(i) * scale;
  return HostTensor::from_doubles(d, shape, v);
}

// `blocks` ConvNeXt blocks over x [N, C, H, W] (NCHW), channels C, as torchvision's legacy
// export writes them; the result NCHW.
std::unique_ptr<Graph> convnext_blocks(int blocks, int64_t n, int64_t c, int64_t h, int64_t w) {
  auto g = std::make_unique<Graph>("convnext_blocks");
  Value* r = g->add_input("x", TensorType{DType::F32, {n, c, h, w}, Device::CPU});
  for (int b = 0; b < blocks; ++b) {
    const uint64_t s = uint64_t(10 * b);
    Value* conv = g->add(Op::Conv2d, {r, g->constant(random(DType::F32, {c, 1, 7, 7}, s + 1, 0.2)),
                                      g->constant(random(DType::F32, {c}, s + 2))},
                         {{"groups", c}, {"pads", Ints{3, 3, 3, 3}}});
    Value* t = g->add(Op::Permute, {conv}, {{"perm", Ints{0, 2, 3, 1}}});
    Value* ln = g->add(Op::LayerNorm, {t, g->constant(random(DType::F32, {c}, s + 3)), g->constant(random(DType::F32, {c}, s + 4))},
                       {{"axis", int64_t(-1)}});
    Value* up = g->add(Op::Add, {g->add(Op::MatMul, {ln, g->constant(random(DType::F32, {c, 4 * c}, s + 5, 0.3))}),
                                 g->constant(random(DType::F32, {4 * c}, s + 6))});
    Value* down = g->add(Op::MatMul, {g->add(Op::Gelu, {up}), g->constant(random(DType::F32, {4 * c, c}, s + 7, 0.2))});
    Value* back = g->add(Op::Permute, {down}, {{"perm", Ints{0, 3, 1, 2}}});
    Value* scaled = g->add(Op::Mul, {g->constant(random(DType::F32, {c, 1, 1}, s + 8)), back});
    r = g->add(Op::Add, {scaled, r});
  }
  g->set_outputs({r});
  return g;
}

int count(const Graph& g, Op op) {
  int k = 0;
  for (const auto& n : g.nodes()) k += n->op == op;
  return k;
}

TEST(CudaChannelsLast, ConvNeXtBlocksKeepOnlyThePermutesAtTheEdges) {
  std::unique_ptr<Graph> g = convnext_blocks(3, 2, 12, 9, 11);
  std::unique_ptr<Graph> before = g->clone();
  EXPECT_EQ(count(*g, Op::Permute), 6);
  ASSERT_TRUE(codegen::cuda::channels_last_depthwise(*g));
  // One permute into channels-last at the input, one back at the output; every conv channels-last.
  EXPECT_EQ(count(*g, Op::Permute), 2);
  for (const auto& n : g->nodes())
    if (n->op == Op::Conv2d) {
      EXPECT_TRUE(codegen::cuda::is_channels_last(*n)) << n->describe();
    }
  HostTensor x = random(DType::F32, {2, 12, 9, 11}, 77);
  std::vector<HostTensor> want = interp::run(*before, {x}), got = interp::run(*g, {x});
  EXPECT_EQ(compare_tensors(got[0], want[0]), "");
  // A second run finds nothing left to do.
  EXPECT_FALSE(codegen::cuda::channels_last_depthwise(*g));
}

TEST(CudaChannelsLast, AnNchwChainKeepsItsDepthwiseConvNchw) {
  // MobileNet: depthwise conv -> relu -> 1x1 conv, all NCHW: channels-last would add permutes.
  Graph g("mobilenet_block");
  Value* x = g.add_input("x", TensorType{DType::F32, {1, 8, 13, 13}, Device::CPU});
  Value* dw = g.add(Op::Conv2d, {x, g.constant(random(DType::F32, {8, 1, 3, 3}, 1))}, {{"groups", int64_t(8)}, {"pads", Ints{1, 1, 1, 1}}});
  Value* pw = g.add(Op::Conv2d, {g.add(Op::Relu, {dw}), g.constant(random(DType::F32, {16, 8, 1, 1}, 2))});
  g.set_outputs({pw});
  EXPECT_FALSE(codegen::cuda::channels_last_depthwise(g));
  EXPECT_EQ(count(g, Op::Permute), 0);
}

TEST(CudaChannelsLast, ChannelsLastConvIsTheNchwConvSeenThroughPermutes) {
  // The interpreter's channels-last conv against the NCHW conv between permutes, at odd sizes with
  // strides, dilations, asymmetric pads and groups.
  for (int64_t groups : {int64_t(1), int64_t(3), int64_t(6)}) {
    Graph g("nhwc");
    Value* x = g.add_input("x", TensorType{DType::F32, {2, 11, 10, 6}, Device::CPU});
    Value* w = g.constant(random(DType::F32, {6, 6 / groups, 3, 2}, 3));
    Value* b = g.constant(random(DType::F32, {6}, 4));
    Attrs a = {{"groups", groups}, {"strides", Ints{2, 1}}, {"dilations", Ints{1, 2}}, {"pads", Ints{1, 0, 2, 1}}};
    Value* nchw = g.add(Op::Conv2d, {g.add(Op::Permute, {x}, {{"perm", Ints{0, 3, 1, 2}}}), w, b}, a);
    Attrs nhwc_attrs = a;
    nhwc_attrs.set("layout", std::string("NHWC"));
    Value* nhwc = g.add(Op::Conv2d, {x, w, b}, nhwc_attrs);
    EXPECT_EQ(nhwc->type.shape, (Shape{2, 6, 9, 6}));
    g.set_outputs({g.add(Op::Permute, {nchw}, {{"perm", Ints{0, 2, 3, 1}}}), nhwc});
    std::vector<HostTensor> out = interp::run(g, {random(DType::F32, {2, 11, 10, 6}, 5)});
    EXPECT_EQ(compare_tensors(out[1], out[0]), "") << "groups " << groups;
  }
}

TEST(CudaChannelsLast, ABadLayoutIsAClearError) {
  Graph g("bad_layout");
  Value* x = g.add_input("x", TensorType{DType::F32, {1, 4, 5, 5}, Device::CPU});
  try {
    g.add(Op::Conv2d, {x, g.constant(random(DType::F32, {4, 4, 3, 3}, 1))}, {{"layout", std::string("NCWH")}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layout"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::testing
