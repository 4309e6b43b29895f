// The CUDA library kernels (gather, concat, pad, pooling, conv, topk...: codegen/cuda/library_kernels.h)
// against the reference interpreter on random inputs: every op sample of a library op in every
// dtype its kernel takes, larger odd sizes (an embedding table, concat of eleven operands, a
// 1001-wide topk, strided and grouped convs), and bad input (an out-of-range gather index) as a
// clear error. Device tests skip without a GPU; placement tests run everywhere.
#include <gtest/gtest.h>

#include <array>
#include <set>

#include "codegen/cuda/library_kernels.h"
#include "common/op_samples.h"
#include "kiln/cuda.h"
#include "kiln/interp.h"
#include "runtime/cuda_lowering.h"
#include "unit/cuda/row_forms_test_util.h"

namespace kiln::testing {
namespace {

using Ints = std::vector<int64_t>;
TensorType T(DType d, Shape s) { return TensorType{d, std::move(s), Device::CPU}; }

// Samples of library ops with their float data operands retyped to `d` (index operands kept).
struct Case {
  std::string label;
  Op op;
  std::vector<TensorType> types;
  Attrs attrs;
  std::vector<InputRange> ranges;
};

std::vector<Case> sample_variants() {
  std::vector<Case> out;
  for (const OpSample& s : op_samples()) {
    std::unique_ptr<Graph> g = build_sample_graph(s);
    if (g->nodes().empty() || !codegen::cuda::has_library_kernel(g->nodes().back()->op)) continue;
    for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8}) {
      Case c{str(s.label, "->", dtype_name(d)), s.op, s.input_types, s.attrs, s.ranges};
      bool changed = false;
      for (size_t i = 0; i < c.types.size(); ++i) {
        const bool index_operand = (s.op == Op::Gather || s.op == Op::GatherElements) && i == 1;
        if (index_operand || c.types[i].dtype == d) continue;
        if (is_float(c.types[i].dtype) || is_integer(c.types[i].dtype)) c.types[i].dtype = d, changed = true;
      }
      if (!changed) continue;
      if (is_integer(d) && c.ranges.empty()) c.ranges.assign(c.types.size(), InputRange{-20, 20});
      if (d == DType::U8)
        for (auto& r : c.ranges) r = InputRange{0, 50};
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::vector<Case> larger_cases() {
  std::vector<Case> v;
  for (DType d : {DType::F32, DType::BF16}) {
    v.push_back({str("gather/embedding/", dtype_name(d)), Op::Gather, {T(d, {1000, 77}), T(DType::I64, {3, 129})},
                 {{"axis", int64_t(0)}}, {{}, {-1000, 999}}});
    v.push_back({str("conv2d/stride2_pad/", dtype_name(d)), Op::Conv2d, {T(d, {2, 5, 17, 19}), T(d, {7, 5, 3, 3}), T(d, {7})},
                 {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, {}});
    v.push_back({str("conv2d/depthwise/", dtype_name(d)), Op::Conv2d, {T(d, {1, 6, 13, 11}), T(d, {6, 1, 5, 5})},
                 {{"groups", int64_t(6)}, {"pads", Ints{2, 2, 2, 2}}}, {}});
    // ConvNeXt's depthwise 7x7 (the direct kernel usually wins the timing) and a patch conv (a
    // matmul of the patches after prepare_graph_for_cuda).
    v.push_back({str("conv2d/depthwise7x7/", dtype_name(d)), Op::Conv2d, {T(d, {3, 24, 29, 27}), T(d, {24, 1, 7, 7})},
                 {{"groups", int64_t(24)}, {"pads", Ints{3, 3, 3, 3}}}, {}});
    // Depthwise (on cuDNN, or on its own kernel without cuDNN): stride 2 with dilation, asymmetric
    // pads and a bias, odd widths.
    v.push_back({str("conv2d/depthwise_s2_dil2_bias/", dtype_name(d)), Op::Conv2d,
                 {T(d, {2, 10, 23, 21}), T(d, {10, 1, 3, 3}), T(d, {10})},
                 {{"groups", int64_t(10)}, {"strides", Ints{2, 2}}, {"dilations", Ints{2, 2}}, {"pads", Ints{1, 2, 3, 0}}}, {}});
    // A stem (3 input channels, 7x7/2, padded): im2col and a batched matmul after prepare_graph.
    v.push_back({str("conv2d/stem7x7s2/", dtype_name(d)), Op::Conv2d, {T(d, {2, 3, 37, 41}), T(d, {8, 3, 7, 7}), T(d, {8})},
                 {{"strides", Ints{2, 2}}, {"pads", Ints{3, 3, 3, 3}}}, {}});
    v.push_back({str("conv2d/patch4/", dtype_name(d)), Op::Conv2d, {T(d, {2, 3, 20, 12}), T(d, {9, 3, 4, 4}), T(d, {9})},
                 {{"strides", Ints{4, 4}}}, {}});
    v.push_back({str("max_pool2d/3x3s2/", dtype_name(d)), Op::MaxPool2d, {T(d, {2, 3, 33, 31})},
                 {{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, {}});
  }
  std::vector<TensorType> eleven;
  for (int i = 0; i < 11; ++i) eleven.push_back(T(DType::F16, {3, 1 + i % 4, 5}));
  v.push_back({"concat/eleven/f16", Op::Concat, eleven, {{"axis", int64_t(1)}}, {}});
  v.push_back({"topk/wide/f32", Op::TopK, {T(DType::F32, {5, 1001})}, {{"k", int64_t(7)}}, {}});
  v.push_back({"cumsum/long/f32", Op::CumSum, {T(DType::F32, {3, 1025})}, {{"axis", int64_t(1)}}, {}});
  v.push_back({"argmax/axis1/bf16", Op::ArgMax, {T(DType::BF16, {4, 301, 3})}, {{"axis", int64_t(1)}}, {}});
  v.push_back({"pad/reflect/f32", Op::Pad, {T(DType::F32, {2, 7, 9})},
               {{"pads", Ints{0, 2, 3, 0, 1, 4}}, {"mode", std::string("reflect")}}, {}});
  v.push_back({"pad/constant/i32", Op::Pad, {T(DType::I32, {3, 4})}, {{"pads", Ints{1, 0, 2, 3}}, {"value", 7.0}}, {{-9, 9}}});
  v.push_back({"det/f64", Op::Det, {T(DType::F64, {6, 5, 5})}, {}, {}});
  v.push_back({"triu/k1/f32", Op::Triu, {T(DType::F32, {2, 9, 7})}, {{"k", int64_t(1)}}, {}});
  v.push_back({"gather_elements/axis0/f32", Op::GatherElements, {T(DType::F32, {9, 5}), T(DType::I32, {4, 5})},
               {{"axis", int64_t(0)}}, {{}, {-9, 8}}});
  v.push_back({"resize/cubic/f32", Op::Resize, {T(DType::F32, {1, 2, 6, 5})},
               {{"sizes", Shape{1, 2, 11, 9}}, {"scales", std::vector<double>{1, 1, 11.0 / 6, 9.0 / 5}},
                {"mode", std::string("cubic")}}, {}});
  return v;
}

// One graph of all cases that the CUDA backend takes (one NVRTC compile); the rest are listed.
void expect_cases_match(const std::vector<Case>& cases, uint64_t seed, const CudaCompileOptions& options = cuda_options()) {
  Graph g("library_kernels");
  std::vector<HostTensor> inputs;
  std::vector<Value*> outs;
  std::vector<std::pair<std::string, std::vector<HostTensor>>> expected;
  int taken = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    OpSample s{c.label, c.op, c.types, c.attrs, c.ranges, false};
    std::unique_ptr<Graph> one;
    try {
      one = build_sample_graph(s);
    } catch (const Error&) {
      continue;  // the op's shape rule refuses this dtype (e.g. conv on integers)
    }
    runtime::CudaLowering l = runtime::lower_for_cuda(*one, CompileOptions{}, true, "kiln_");
    if (!l.refusal.empty()) continue;
    std::vector<HostTensor> in = sample_inputs(s, seed + i);
    std::vector<HostTensor> want;
    try {
      want = interp::run(*one, in);
    } catch (const Error&) {
      continue;  // the reference rejects these inputs
    }
    std::vector<Value*> ins;
    for (size_t k = 0; k < c.types.size(); ++k) ins.push_back(g.add_input(str("c", i, "_", k), c.types[k]));
    for (Value* v : g.add_node(c.op, ins, c.attrs)) outs.push_back(v);
    expected.push_back({c.label, want});
    for (auto& t : in) inputs.push_back(t);
    ++taken;
  }
  ASSERT_GT(taken, 10);
  g.set_outputs(outs);
  auto exe = compile_cuda(g, options);
  std::vector<HostTensor> got = exe->run(inputs);
  size_t o = 0;
  for (const auto& [label, want] : expected)
    for (const HostTensor& w : want) {
      ASSERT_LT(o, got.size());
      EXPECT_EQ(compare_tensors(got[o], w), "") << label;
      ++o;
    }
  std::cout << taken << " of " << cases.size() << " cases on the GPU\n";
}

TEST(CudaLibraryKernels, EveryLibraryOpSampleHasAKernelInItsDtypes) {
  // Placement only (no GPU): each sample of a library op in each dtype its shape rule allows is
  // placed on a library kernel, or refused with a reason naming the dtype.
  for (const Case& c : sample_variants()) {
    OpSample s{c.label, c.op, c.types, c.attrs, c.ranges, false};
    std::unique_ptr<Graph> one;
    try {
      one = build_sample_graph(s);
    } catch (const Error&) {
      continue;
    }
    runtime::CudaLowering l = runtime::lower_for_cuda(*one, CompileOptions{}, true, "kiln_");
    if (!l.refusal.empty()) {
      EXPECT_NE(l.refusal.find("kernel takes"), std::string::npos) << c.label << ": " << l.refusal;
      continue;
    }
    EXPECT_FALSE(l.placement.library_kernels.empty() && l.program->kernels.empty()) << c.label;
  }
}

TEST(CudaLibraryKernels, SamplesInEveryDtypeMatchTheInterpreter) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  expect_cases_match(sample_variants(), 500);
}

TEST(CudaLibraryKernels, LargerOddSizesMatchTheInterpreter) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  // Convs with symmetric pads: on cuDNN where it loads; then cuDNN or the direct kernel, whichever
  // is faster (timed at the first run); then the direct kernel everywhere.
  expect_cases_match(larger_cases(), 900);
  CudaCompileOptions timed = cuda_options();
  timed.time_conv_forms = true;
  expect_cases_match(larger_cases(), 902, timed);
  CudaCompileOptions direct = cuda_options();
  direct.use_cudnn = false;  // every conv on the direct library kernel
  expect_cases_match(larger_cases(), 901, direct);
}

// Depthwise convs on Kiln's register-tiled kernel (dwconv2d) in each shape class its tile plan
// meets: bands of a wide plane (ConvNeXt-T's stage 1 is 56 wide), several small planes a block
// (7x7 planes), strides and dilations (the generic tap loop), 3x3 and 5x5 sliding windows, asymmetric
// pads, f64 (staged in double), a plane too wide for shared memory (the untiled form), and the
// channels-last kernel.
std::vector<Case> depthwise_cases() {
  std::vector<Case> v;
  auto dw = [&](const std::string& label, DType d, Ints x, int64_t k, Ints strides, Ints dil, Ints pads, bool bias) {
    std::vector<TensorType> types = {T(d, {x[0], x[1], x[2], x[3]}), T(d, {x[1], 1, k, k})};
    if (bias) types.push_back(T(d, {x[1]}));
    v.push_back({str("dwconv/", label, "/", dtype_name(d)), Op::Conv2d, types,
                 {{"groups", x[1]}, {"strides", strides}, {"dilations", dil}, {"pads", pads}}, {}});
  };
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    dw("7x7_wide", d, {2, 5, 57, 59}, 7, {1, 1}, {1, 1}, {3, 3, 3, 3}, true);
    dw("7x7_small_planes", d, {3, 37, 7, 7}, 7, {1, 1}, {1, 1}, {3, 3, 3, 3}, false);
    dw("5x5_s2", d, {2, 9, 31, 29}, 5, {2, 2}, {1, 1}, {2, 2, 2, 2}, true);
    dw("3x3_asym", d, {1, 11, 19, 113}, 3, {1, 1}, {1, 1}, {0, 1, 2, 1}, true);
  }
  dw("3x3_dil2_s2x1", DType::F64, {2, 6, 23, 17}, 3, {2, 1}, {2, 2}, {2, 1, 2, 1}, true);
  dw("5x5", DType::F64, {1, 4, 21, 35}, 5, {1, 1}, {1, 1}, {2, 2, 2, 2}, false);
  dw("too_wide_to_stage", DType::F32, {1, 2, 5, 7001}, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, true);
  // Channels-last (dwconv2d_nhwc; x given [N, C, H, W] above, here [N, H, W, C]): channel counts
  // not a multiple of the 32 lanes, the sliding windows and the generic tap loop.
  auto nhwc = [&](const std::string& label, DType d, Ints x, int64_t k, Ints strides, Ints dil, Ints pads, bool bias) {
    std::vector<TensorType> types = {T(d, {x[0], x[2], x[3], x[1]}), T(d, {x[1], 1, k, k})};
    if (bias) types.push_back(T(d, {x[1]}));
    v.push_back({str("dwconv_nhwc/", label, "/", dtype_name(d)), Op::Conv2d, types,
                 {{"groups", x[1]}, {"strides", strides}, {"dilations", dil}, {"pads", pads}, {"layout", std::string("NHWC")}},
                 {}});
  };
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    nhwc("7x7", d, {2, 70, 19, 23}, 7, {1, 1}, {1, 1}, {3, 3, 3, 3}, true);
    nhwc("7x7_small", d, {3, 40, 7, 7}, 7, {1, 1}, {1, 1}, {3, 3, 3, 3}, false);
    nhwc("3x3_asym", d, {1, 33, 9, 31}, 3, {1, 1}, {1, 1}, {0, 1, 2, 1}, true);
  }
  nhwc("5x5_s2_dil2", DType::F32, {2, 12, 21, 17}, 5, {2, 2}, {2, 2}, {4, 3, 4, 3}, true);
  nhwc("5x5", DType::F64, {1, 7, 11, 13}, 5, {1, 1}, {1, 1}, {2, 2, 2, 2}, true);
  return v;
}

TEST(CudaLibraryKernels, DepthwiseTilesCoverEveryOutputOnce) {
  // The plan alone (no GPU): bands cover the output rows, the staged rows and width cover every
  // tap of the band, shared memory holds the planes, and planes too wide to stage go untiled.
  using codegen::cuda::plan_depthwise_tile;
  for (auto [oh, ow, k, s, d] : std::vector<std::array<int64_t, 5>>{{56, 56, 7, 1, 1}, {7, 7, 7, 1, 1}, {112, 112, 3, 2, 1},
                                                                     {15, 301, 5, 1, 2}, {3, 1, 3, 1, 1}}) {
    const auto t = plan_depthwise_tile(oh, ow, k, k, s, s, d, d, 4);
    ASSERT_GT(t.rows_per_band, 0) << oh << "x" << ow;
    EXPECT_EQ(t.rows_per_band % codegen::cuda::kDepthwiseRows, 0);
    EXPECT_GE(t.bands * t.rows_per_band, oh);
    EXPECT_LT((t.bands - 1) * t.rows_per_band, oh);
    EXPECT_EQ(t.staged_width, (ow - 1) * s + (k - 1) * d + 1);
    EXPECT_EQ(t.staged_rows, (t.rows_per_band - 1) * s + (k - 1) * d + 1);
    EXPECT_LE(t.planes * (t.staged_rows * t.staged_width + k * k) * 4, codegen::cuda::kDepthwiseSharedBytes);
  }
  EXPECT_GT(plan_depthwise_tile(7, 7, 7, 7, 1, 1, 1, 1, 4).planes, 1);  // small planes share a block
  EXPECT_EQ(plan_depthwise_tile(5, 7001, 3, 3, 1, 1, 1, 1, 4).rows_per_band, 0);
  EXPECT_EQ(plan_depthwise_tile(0, 7, 3, 3, 1, 1, 1, 1, 4).rows_per_band, 0);
}

TEST(CudaLibraryKernels, DepthwiseConvsOnTheTiledKernelMatchTheInterpreter) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  CudaCompileOptions own = cuda_options();
  own.depthwise_kernel = true;
  expect_cases_match(depthwise_cases(), 903, own);
}

TEST(CudaLibraryKernels, AnOutOfRangeGatherIndexIsAnError) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  Graph g("bad_gather");
  Value* x = g.add_input("x", T(DType::F32, {5, 3}));
  Value* i = g.add_input("i", T(DType::I64, {2}));
  g.set_outputs({g.add(Op::Gather, {x, i})});
  auto exe = compile_cuda(g, cuda_options());
  HostTensor xs = HostTensor::random(DType::F32, {5, 3}, 1);
  HostTensor ok = HostTensor::from_doubles(DType::I64, {2}, {4, -5});
  EXPECT_EQ(compare_tensors(exe->run({xs, ok})[0], interp::run(g, {xs, ok})[0]), "");
  HostTensor bad = HostTensor::from_doubles(DType::I64, {2}, {1, 5});
  try {
    exe->run({xs, bad});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index out of range"), std::string::npos) << e.what();
  }
  // The status word is cleared for the next run: a good index runs again.
  EXPECT_EQ(compare_tensors(exe->run({xs, ok})[0], interp::run(g, {xs, ok})[0]), "");
}

}  // namespace
}  // namespace kiln::testing
