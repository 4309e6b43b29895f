// The CUDA target of the emitter and compile_cuda. Source tests run wherever NVRTC loads (no GPU
// needed): every op sample's kernels compile for sm_90. Device tests compare compile_cuda with the
// reference interpreter on random inputs at odd sizes in f32/f16/bf16 and skip without a GPU. Each
// row form has its own tests (rows_*_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>
#include <set>

#include "codegen/common/c_emitter.h"
#include "codegen/cuda/cuda_emitter.h"
#include "codegen/cuda/library_kernels.h"
#include "common/op_samples.h"
#include "codegen/cuda/prepare_graph.h"
#include "kiln/cuda.h"
#include "kiln/demo.h"
#include "kiln/trace.h"
#include "kiln/interp.h"
#include "codegen/cuda/step_placement.h"
#include "runtime/cuda_lowering.h"
#include "runtime/cuda/cuda_executable.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/executable.h"
#include "unit/compile/compile_test_util.h"
#include "unit/cuda/row_forms_test_util.h"

namespace kiln::testing {
namespace {

// Whether compile_cuda runs a lowered graph: its placement of library steps (host steps, cuBLASLt,
// fused attention; codegen/cuda/step_placement.h) accepts every one — including each matmul's
// batch dims being ones cuBLASLt takes.
bool runs_on_cuda(const runtime::CompiledExecutable& low) {
  try {
    codegen::cuda::place_library_steps(low);
  } catch (const Error&) {
    return false;
  }
  return true;
}

// The same for a graph as compile_cuda lowers it (runtime::lower_for_cuda).
bool graph_runs_on_cuda(const Graph& g) {
  runtime::CudaLowering l = runtime::lower_for_cuda(g, CompileOptions{}, /*fused_attention=*/true, "kiln_");
  return l.refusal.empty() && runs_on_cuda(*l.program);
}

TEST(CudaCodegen, EveryGeneratedOpSampleCompilesWithNvrtc) {
  std::vector<codegen::cuda::CudaKernelSource> kernels;
  int row_kernels = 0;
  const auto& samples = op_samples();
  // Every kernel is printed; NVRTC (~0.3 s per kernel on the 2-core CI machine) compiles every
  // third row-block kernel and every sixteenth kernel here. The GPU test compiles them all.
  std::vector<codegen::cuda::CudaKernelSource> to_compile;
  for (size_t i = 0; i < samples.size(); ++i) {
    std::unique_ptr<Graph> g = build_sample_graph(samples[i]);
    auto low = runtime::lower_for_target(*g, CompileOptions{}, str("kiln_s", i, "_"));
    for (const auto& lk : low->kernels) {
      kernels.push_back(codegen::cuda::emit_cuda_kernel(lk.kernel));
      bool row = kernels.back().mapping == codegen::cuda::GridMapping::kRowBlock;
      row_kernels += row;
      if ((row && row_kernels % 3 == 1) || kernels.size() % 16 == 0) to_compile.push_back(kernels.back());
    }
  }
  EXPECT_GT(kernels.size(), 100u);
  EXPECT_GT(row_kernels, 5);  // reductions, softmax, norms
  if (!cuda::nvrtc_status().loaded) GTEST_SKIP() << cuda::nvrtc_status().message;
  std::string source = codegen::cuda::cuda_translation_unit(to_compile).source;
  EXPECT_NO_THROW(cuda::nvrtc_compile(source, "op_samples.cu", "sm_90", {"--std=c++17", "-diag-suppress=550,177"}));
}

// Kernels equal up to their names and comments (a transformer's layers) are written once and
// run through the first one's entry point; a kernel differing in one constant is its own.
TEST(CudaCodegen, TranslationUnitWritesEachDistinctKernelOnce) {
  auto kernel = [](const std::string& name, const std::string& note, const std::string& constant) {
    codegen::cuda::CudaKernelSource k;
    k.name = name;
    k.source = "// " + name + ": " + note + "\nextern \"C\" __global__ void " + name +
               "(float* p) { p[threadIdx.x] *= " + constant + "f; } // " + note + "\n";
    return k;
  };
  const std::vector<codegen::cuda::CudaKernelSource> kernels = {
      kernel("kiln_k1", "layer 0", "2.0"), kernel("kiln_k12", "layer 1", "2.0"), kernel("kiln_k13", "other", "3.0"),
      kernel("kiln_k1x", "layer 2", "2.0")};
  const codegen::cuda::CudaTranslationUnit tu = codegen::cuda::cuda_translation_unit(kernels);
  EXPECT_EQ(tu.distinct_kernels, 2);
  EXPECT_EQ(tu.function_of, (std::vector<std::string>{"kiln_k1", "kiln_k1", "kiln_k13", "kiln_k1"}));
  EXPECT_NE(tu.source.find("void kiln_k1("), std::string::npos);
  EXPECT_EQ(tu.source.find("void kiln_k12("), std::string::npos);
  EXPECT_NE(tu.source.find("void kiln_k13("), std::string::npos);
  if (!cuda::nvrtc_status().loaded) GTEST_SKIP() << cuda::nvrtc_status().message;
  EXPECT_NO_THROW(cuda::nvrtc_compile(tu.source, "dedup.cu", "sm_90", {"--std=c++17", "-diag-suppress=550,177"}));
}

// Every library kernel (gather, concat, conv...; library_kernels.h) in every dtype it takes.
TEST(CudaCodegen, EveryLibraryKernelCompilesWithNvrtc) {
  const std::set<std::string> names = codegen::cuda::all_library_kernel_names();
  EXPECT_GT(names.size(), 60u);
  const std::string source = codegen::cuda::cuda_prelude() + codegen::cuda::library_kernels_source(names);
  for (const std::string& name : names) EXPECT_NE(source.find(" " + name + "("), std::string::npos) << name;
  if (!cuda::nvrtc_status().loaded) GTEST_SKIP() << cuda::nvrtc_status().message;
  EXPECT_NO_THROW(cuda::nvrtc_compile(source, "library_kernels.cu", "sm_90", {"--std=c++17", "-diag-suppress=550,177"}));
}

// The shared expressions call the CPU prelude's helpers by name; the CUDA prelude must define
// every one of them (a helper added on one side only breaks the other target).
TEST(CudaCodegen, ThePreludesDefineTheSameHelpers) {
  auto helpers = [](const std::string& text) {
    std::set<std::string> names;
    std::regex def(R"((?:inline|__device__)[^;{(]*?\b(kiln_[a-z0-9_]+)\s*\()");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), def); it != std::sregex_iterator(); ++it)
      names.insert((*it)[1]);
    return names;
  };
  std::set<std::string> cpu = helpers(codegen::c_prelude()), gpu = helpers(codegen::cuda::cuda_prelude());
  EXPECT_GT(cpu.size(), 15u);
  for (const auto& name : cpu) EXPECT_TRUE(gpu.count(name)) << name << " is in the CPU prelude but not the CUDA one";
}

TEST(CudaCodegen, SoftmaxIsOneBlockPerRowWithBlockReductions) {
  Graph g("softmax");
  Value* x = g.add_input("x", TensorType{DType::F32, {SymInt(7), SymInt(33)}, Device::CPU});
  g.set_outputs({g.add(Op::Softmax, {x})});
  auto low = runtime::lower_for_target(g, CompileOptions{}, "kiln_");
  ASSERT_EQ(low->kernels.size(), 1u);
  auto k = codegen::cuda::emit_cuda_kernel(low->kernels[0].kernel);
  EXPECT_EQ(k.mapping, codegen::cuda::GridMapping::kRowBlock);
  // Max and sum of exp: one fused reduction across the block (register rows, the default).
  EXPECT_NE(k.source.find("kiln_reduce_fused<1, 0>(kiln_max_sum{"), std::string::npos) << k.source;
  EXPECT_EQ(k.source.find(" std::"), std::string::npos) << "NVRTC has no std: " << k.source;
  EXPECT_EQ(k.source.find("(std::"), std::string::npos) << "NVRTC has no std: " << k.source;
}

// Vector points: a pointwise kernel whose innermost extent is a multiple of 16 bytes' worth takes
// that many consecutive points a thread; contiguous buffers (x, and the bias row broadcast along
// the outer dim) move as vectors. An odd innermost extent keeps one point a thread.
TEST(CudaCodegen, PointwiseKernelsTakeVectorsOfConsecutivePoints) {
  auto kernel_of = [](int64_t cols) {
    Graph g("points");
    Value* x = g.add_input("x", TensorType{DType::BF16, {SymInt(7), SymInt(cols)}, Device::CPU});
    Value* b = g.add_input("b", TensorType{DType::BF16, {SymInt(cols)}, Device::CPU});
    g.set_outputs({g.add(Op::Gelu, {g.add(Op::Add, {x, b})})});
    auto low = runtime::lower_for_target(g, CompileOptions{}, str("kiln_points_", cols, "_"));
    EXPECT_EQ(low->kernels.size(), 1u);
    return codegen::cuda::emit_cuda_kernel(low->kernels[0].kernel);
  };
  auto vec = kernel_of(64);
  EXPECT_EQ(vec.points_per_thread, 8) << vec.source;
  EXPECT_NE(vec.source.find("kiln_load_vec(p1000, p0 + ("), std::string::npos) << vec.source;
  EXPECT_NE(vec.source.find("kiln_load_vec(p1001, p1 + ("), std::string::npos) << vec.source;
  EXPECT_NE(vec.source.find("kiln_store_vec(p2 + ("), std::string::npos) << vec.source;
  auto odd = kernel_of(33);
  EXPECT_EQ(odd.points_per_thread, 1) << odd.source;
  EXPECT_EQ(odd.source.find("kiln_load_vec"), std::string::npos) << odd.source;
  if (!cuda::nvrtc_status().loaded) GTEST_SKIP() << cuda::nvrtc_status().message;
  std::string source = codegen::cuda::cuda_translation_unit({vec, odd}).source;
  EXPECT_NO_THROW(cuda::nvrtc_compile(source, "points.cu", "sm_90", {"--std=c++17", "-diag-suppress=550,177"}));
}

// The built-in GPT block needs nothing but generated kernels and matmuls on the GPU.
TEST(CudaCodegen, TheDemoBlockLowersToKernelsAndMatmulsOnly) {
  demo::BlockConfig cfg{64, 4, 256};
  demo::BlockParams params = demo::make_block_params(cfg, 5, DType::BF16);
  Tensor example = Tensor::from_host(HostTensor::random(DType::BF16, {2, 7, 64}, 9));
  TracedFunction f = trace([&](const Tensor& x) { return demo::transformer_block(x, params); }, example);
  std::unique_ptr<Graph> g = f.graph().clone();
  codegen::cuda::prepare_graph_for_cuda(*g);
  auto low = runtime::lower_for_target(*g, CompileOptions{}, "kiln_");
  std::string library_ops;
  for (const auto& step : low->steps)
    if (step.library && step.node->op != Op::MatMul) library_ops += step.node->describe() + " ";
  EXPECT_EQ(library_ops, "");
  EXPECT_TRUE(runs_on_cuda(*low));
}

// Convs whose windows tile the input (ViT's patch embedding, ConvNeXt's stem) become a matmul of
// the patches; the rest stay convs. The rewritten graph computes what the conv does.
// Patch convs (kernel == stride) become a matmul of the patches; convs over at most 4 input
// channels (stems) the weights times their im2col columns; others stay convs. Each rewrite is
// checked against the original in the interpreter.
TEST(CudaCodegen, PatchAndThinConvsBecomeMatmuls) {
  enum Form { kConv, kPatch, kThin };
  struct Conv { const char* label; Shape x, w; std::vector<int64_t> strides, pads; int64_t groups; bool bias; Form form; };
  const Conv convs[] = {
      {"vit-like 4x4/4 with bias", {2, 3, 12, 8}, {5, 3, 4, 4}, {4, 4}, {0, 0, 0, 0}, 1, true, kPatch},
      {"2x3/2x3 no bias, symbolic batch", {SymInt::symbol("B"), 4, 6, 9}, {7, 4, 2, 3}, {2, 3}, {0, 0, 0, 0}, 1, false, kPatch},
      {"stem-like 3x3/2 over 3 channels", {1, 3, 9, 9}, {4, 3, 3, 3}, {2, 2}, {0, 0, 0, 0}, 1, false, kThin},
      {"padded 2x2/2 over 3 channels, bias", {1, 3, 8, 8}, {4, 3, 2, 2}, {2, 2}, {1, 0, 1, 1}, 1, true, kThin},
      {"grouped", {1, 4, 8, 8}, {4, 2, 2, 2}, {2, 2}, {0, 0, 0, 0}, 2, false, kConv},
      {"input not a multiple of the window", {1, 3, 9, 8}, {4, 3, 2, 2}, {2, 2}, {0, 0, 0, 0}, 1, false, kThin},
      {"5 input channels: cuDNN's", {1, 5, 9, 8}, {4, 5, 3, 3}, {1, 1}, {1, 1, 1, 1}, 1, false, kConv},
      {"1x1 over 3 channels: cuDNN's", {1, 3, 9, 8}, {4, 3, 1, 1}, {1, 1}, {0, 0, 0, 0}, 1, false, kConv},
  };
  for (const Conv& c : convs) {
    for (DType d : {DType::F32, DType::BF16}) {
      Graph g("patch_conv");
      std::vector<Value*> in = {g.add_input("x", typed(d, c.x)), g.add_input("w", typed(d, c.w))};
      if (c.bias) in.push_back(g.add_input("b", typed(d, {c.w[0]})));
      Attrs attrs{{"strides", c.strides}, {"pads", c.pads}, {"groups", c.groups}};
      g.set_outputs({g.add(Op::Relu, {g.add(Op::Conv2d, in, attrs)})});
      std::unique_ptr<Graph> prepared = g.clone();
      codegen::cuda::prepare_graph_for_cuda(*prepared);
      int convs_left = 0, matmuls = 0, im2cols = 0;
      for (const Node* n : prepared->node_list())
        convs_left += n->op == Op::Conv2d, matmuls += n->op == Op::MatMul, im2cols += n->op == Op::Im2Col;
      EXPECT_EQ(convs_left, c.form == kConv ? 1 : 0) << c.label;
      EXPECT_EQ(matmuls, c.form == kConv ? 0 : 1) << c.label;
      EXPECT_EQ(im2cols, c.form == kThin ? 1 : 0) << c.label;
      std::vector<HostTensor> inputs;
      uint64_t seed = 40;
      for (const Value* v : g.inputs()) {
        std::vector<int64_t> shape;
        for (const SymInt& s : v->type.shape) shape.push_back(s.is_constant() ? s.constant() : 3);
        inputs.push_back(HostTensor::random(d, shape, seed++));
      }
      EXPECT_EQ(compare_tensors(interp::run(*prepared, inputs)[0], interp::run(g, inputs)[0]), "")
          << c.label << " " << dtype_name(d);
    }
  }
}

TEST(CudaCodegen, TooManyBuffersIsAClearError) {
  lower::LoopKernel k;
  k.name = "kiln_wide";
  for (int i = 0; i < codegen::cuda::kMaxKernelBuffers + 1; ++i) k.params.push_back({str("x", i), DType::F32, i == 0, SymInt(1)});
  try {
    codegen::cuda::emit_cuda_kernel(k);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kiln_wide"), std::string::npos) << e.what();
  }
}

TEST(CudaCompiled, EveryOpSampleMatchesTheInterpreter) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  // All samples the backend runs go into one graph: one NVRTC compile, one run.
  Graph g("op_samples");
  std::vector<HostTensor> inputs;
  std::vector<std::pair<size_t, std::vector<HostTensor>>> expected;  // sample index, outputs
  std::vector<Value*> outs;
  std::set<std::string> skipped;
  const auto& samples = op_samples();
  for (size_t i = 0; i < samples.size(); ++i) {
    const OpSample& s = samples[i];
    std::unique_ptr<Graph> one = build_sample_graph(s);
    if (!graph_runs_on_cuda(*one)) {
      skipped.insert(std::string(op_name(s.op)));
      continue;
    }
    std::vector<HostTensor> in = sample_inputs(s, 99 + i);
    std::vector<Value*> ins;
    for (size_t k = 0; k < s.input_types.size(); ++k) ins.push_back(g.add_input(str("s", i, "_", k), s.input_types[k]));
    for (Value* v : g.add_node(s.op, ins, s.attrs)) outs.push_back(v);
    expected.push_back({i, interp::run(*one, in)});
    for (auto& t : in) inputs.push_back(t);
  }
  g.set_outputs(outs);
  auto exe = compile_cuda(g, cuda_options());
  std::vector<HostTensor> got = exe->run(inputs);
  size_t o = 0;
  for (const auto& [index, want] : expected)
    for (const HostTensor& w : want) {
      ASSERT_LT(o, got.size());
      EXPECT_EQ(compare_tensors(got[o], w), "") << samples[index].label;
      ++o;
    }
  std::string list;
  for (const auto& s : skipped) list += s + " ";
  std::cout << expected.size() << " samples on the GPU; ops without a CUDA kernel yet: " << list << "\n";
  EXPECT_GT(expected.size(), 150u);
}

TEST(CudaCompiled, RowReductionsAtOddSizesInEveryFloatDtype) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    for (auto dims : std::vector<std::vector<int64_t>>{{5, 1000}, {3, 4097}, {1, 70001}, {37, 3}}) {
      Graph g("norms");
      Shape shape;
      for (int64_t d : dims) shape.push_back(SymInt(d));
      Value* x = g.add_input("x", TensorType{t, shape, Device::CPU});
      Value* w = g.add_input("w", TensorType{t, {shape.back()}, Device::CPU});
      Value* sm = g.add(Op::Softmax, {x});
      Value* ln = g.add(Op::LayerNorm, {x, w, w});
      Value* col = g.add(Op::ReduceSum, {x}, {{"axes", std::vector<int64_t>{0}}});
      Value* mx = g.add(Op::ReduceMax, {x}, {{"axes", std::vector<int64_t>{1}}, {"keepdim", int64_t(1)}});
      g.set_outputs({sm, ln, col, mx});
      std::vector<std::vector<HostTensor>> runs;
      for (uint64_t r = 0; r < 3; ++r)  // three runs: direct, capture + replay, replay with new values
        runs.push_back({HostTensor::random(t, dims, 7 + r, -3, 3), HostTensor::random(t, {dims.back()}, 17 + r, 0.5, 1.5)});
      expect_cuda_matches(g, runs, str(dtype_name(t), dims_to_string(dims)));
    }
  }
}

TEST(CudaCompiled, BatchedAndBroadcastMatmuls) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  struct Case { std::vector<int64_t> a, b; };
  for (DType t : {DType::F32, DType::BF16}) {
    for (const Case& c : {Case{{3, 5, 7}, {3, 7, 9}}, Case{{2, 4, 6}, {6, 3}}, Case{{5, 6}, {2, 6, 4}}, Case{{33, 65}, {65, 17}}}) {
      Graph g("matmul");
      auto shape = [](const std::vector<int64_t>& d) {
        Shape s;
        for (int64_t x : d) s.push_back(SymInt(x));
        return s;
      };
      Value* a = g.add_input("a", TensorType{t, shape(c.a), Device::CPU});
      Value* b = g.add_input("b", TensorType{t, shape(c.b), Device::CPU});
      Value* y = g.add(Op::MatMul, {a, b});
      g.set_outputs({g.add(Op::Relu, {y})});
      expect_cuda_matches(g, {{HostTensor::random(t, c.a, 11), HostTensor::random(t, c.b, 12)}},
                          str(dtype_name(t), dims_to_string(c.a), "@", dims_to_string(c.b)));
    }
  }
}

// act(x @ w + b) with act = relu or tanh-gelu folds into the cuBLASLt epilogue (one launch);
// exact gelu does not (cuBLASLt only has the tanh form) and stays a fused kernel.
TEST(CudaCompiled, BiasAndActivationFoldIntoTheMatmulEpilogue) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  for (DType t : {DType::F32, DType::BF16}) {
    for (std::string act : {"relu", "gelu_tanh", "gelu"}) {
      Graph g("linear");
      Value* x = g.add_input("x", TensorType{t, {SymInt(2), SymInt(9), SymInt(40)}, Device::CPU});
      Value* w = g.add_input("w", TensorType{t, {SymInt(40), SymInt(24)}, Device::CPU});
      Value* b = g.add_input("b", TensorType{t, {SymInt(24)}, Device::CPU});
      Value* z = g.add(Op::Add, {g.add(Op::MatMul, {x, w}), b});
      Value* y = act == "relu" ? g.add(Op::Relu, {z})
                               : g.add(Op::Gelu, {z}, {{"approximate", std::string(act == "gelu" ? "none" : "tanh")}});
      g.set_outputs({y});
      std::vector<HostTensor> in = {HostTensor::random(t, {2, 9, 40}, 1), HostTensor::random(t, {40, 24}, 2),
                                    HostTensor::random(t, {24}, 3)};
      auto exe = compile_cuda(g, cuda_options());
      Scoreboard sb;
      std::vector<HostTensor> got = exe->run(in, &sb);
      std::vector<HostTensor> want = interp::run(g, in);
      EXPECT_EQ(compare_tensors(got[0], want[0]), "") << dtype_name(t) << " " << act;
      EXPECT_EQ(sb.kernels().size(), act == "gelu" ? 2u : 1u) << dtype_name(t) << " " << act;
    }
  }
}

// GPT-2's MLP as exported: a 2-D GEMM, + bias, a reshape back to [B, T, F], then tanh-gelu: the
// reshape is an alias, so the bias and the gelu still fold into the epilogue (one launch); a second
// reader of the biased product keeps the gelu a kernel of its own.
TEST(CudaCompiled, GeluAfterAReshapeFoldsIntoTheMatmulEpilogue) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  for (DType t : {DType::F32, DType::BF16}) {
    for (bool second_reader : {false, true}) {
      Graph g("mlp");
      Value* x = g.add_input("x", TensorType{t, {SymInt(18), SymInt(40)}, Device::CPU});
      Value* w = g.add_input("w", TensorType{t, {SymInt(40), SymInt(24)}, Device::CPU});
      Value* b = g.add_input("b", TensorType{t, {SymInt(24)}, Device::CPU});
      Value* z = g.add(Op::Add, {g.add(Op::MatMul, {x, w}), b});
      Value* r = g.add(Op::Reshape, {z}, {{"shape", Shape{SymInt(2), SymInt(9), SymInt(24)}}});
      Value* y = g.add(Op::Gelu, {r}, {{"approximate", std::string("tanh")}});
      std::vector<Value*> outs = {y};
      if (second_reader) outs.push_back(g.add(Op::Neg, {z}));
      g.set_outputs(outs);
      std::vector<HostTensor> in = {HostTensor::random(t, {18, 40}, 1), HostTensor::random(t, {40, 24}, 2),
                                    HostTensor::random(t, {24}, 3)};
      auto exe = compile_cuda(g, cuda_options());
      Scoreboard sb;
      std::vector<HostTensor> got = exe->run(in, &sb);
      std::vector<HostTensor> want = interp::run(g, in);
      for (size_t i = 0; i < outs.size(); ++i)
        EXPECT_EQ(compare_tensors(got[i], want[i]), "") << dtype_name(t) << " output " << i;
      if (!second_reader) EXPECT_EQ(sb.kernels().size(), 1u) << dtype_name(t);
      else EXPECT_GT(sb.kernels().size(), 1u) << dtype_name(t);
    }
  }
}

// x @ w + b, and (x @ w + b) + r with r of the product's shape, are one cuBLASLt call (bias
// epilogue; the residual as C with beta = 1); a broadcast "residual" is not and stays a kernel.
TEST(CudaCompiled, BiasAndResidualFoldIntoTheMatmulCall) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  for (DType t : {DType::F32, DType::BF16}) {
    for (std::string form : {"bias", "bias+residual", "residual+bias", "bias+broadcast", "bias[1,1,N]+residual"}) {
      Graph g("linear");
      Value* x = g.add_input("x", TensorType{t, {SymInt(3), SymInt(7), SymInt(40)}, Device::CPU});
      Value* w = g.add_input("w", TensorType{t, {SymInt(40), SymInt(24)}, Device::CPU});
      const bool bias3 = form == "bias[1,1,N]+residual";
      std::vector<int64_t> bdims = bias3 ? std::vector<int64_t>{1, 1, 24} : std::vector<int64_t>{24};
      Value* b = g.add_input("b", TensorType{t, bias3 ? Shape{1, 1, 24} : Shape{24}, Device::CPU});
      std::vector<int64_t> rdims = form == "bias+broadcast" ? std::vector<int64_t>{24} : std::vector<int64_t>{3, 7, 24};
      Shape rshape;
      for (int64_t d : rdims) rshape.push_back(SymInt(d));
      Value* r = g.add_input("r", TensorType{t, rshape, Device::CPU});
      Value* z = g.add(Op::Add, {g.add(Op::MatMul, {x, w}), b});
      Value* y = form == "bias" ? z : form == "residual+bias" ? g.add(Op::Add, {r, z}) : g.add(Op::Add, {z, r});
      g.set_outputs({y});
      std::vector<HostTensor> in = {HostTensor::random(t, {3, 7, 40}, 1), HostTensor::random(t, {40, 24}, 2),
                                    HostTensor::random(t, bdims, 3), HostTensor::random(t, rdims, 4)};
      auto exe = compile_cuda(g, cuda_options());
      for (int run = 0; run < 3; ++run) {  // direct, captured, replayed with new values
        if (run == 2) in[3] = HostTensor::random(t, rdims, 5);
        Scoreboard sb;
        std::vector<HostTensor> got = exe->run(in, run == 0 ? &sb : nullptr);
        EXPECT_EQ(compare_tensors(got[0], interp::run(g, in)[0]), "") << dtype_name(t) << " " << form << " run " << run;
        if (run == 0) {
          EXPECT_EQ(sb.kernels().size(), form == "bias+broadcast" ? 2u : 1u) << dtype_name(t) << " " << form;
        }
      }
    }
  }
}

// Device memory planning: a chain of matmuls, row kernels and an exact-gelu kernel whose
// intermediates die one after another shares one arena (smaller than one buffer each, a test of
// the plan itself), and still matches the interpreter when run directly, captured and replayed
// with new values — including an epilogue-folded matmul that writes its kernel's output a step
// early.
TEST(CudaCompiled, IntermediatesShareTheDeviceArena) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  for (DType t : {DType::F32, DType::BF16}) {
    Graph g("arena");
    Value* x = g.add_input("x", TensorType{t, {SymInt(37), SymInt(64)}, Device::CPU});
    Value* w = g.add_input("w", TensorType{t, {SymInt(64), SymInt(64)}, Device::CPU});
    Value* b = g.add_input("b", TensorType{t, {SymInt(64)}, Device::CPU});
    Value* h = x;
    for (int layer = 0; layer < 4; ++layer) {
      Value* z = g.add(Op::Add, {g.add(Op::MatMul, {h, w}), b});  // bias folded into the matmul
      Value* a = layer % 2 ? g.add(Op::Gelu, {z}, {{"approximate", std::string("none")}}) : g.add(Op::Softmax, {z});
      h = g.add(Op::LayerNorm, {a, b, b});
    }
    g.set_outputs({h});
    auto exe = compile_cuda(g, cuda_options());
    const auto& cx = dynamic_cast<const cuda::CudaExecutable&>(*exe);
    const lower::MemoryPlan plan = cx.device_memory_plan({}).plan;
    EXPECT_GT(plan.arena_bytes, 0) << dtype_name(t);
    EXPECT_LT(plan.arena_bytes, plan.naive_bytes) << dtype_name(t) << "\n" << exe->explain().substr(0, 3000);
    EXPECT_NE(exe->explain().find("-byte arena"), std::string::npos);
    std::vector<std::vector<HostTensor>> runs;
    for (uint64_t r = 0; r < 3; ++r)
      runs.push_back({HostTensor::random(t, {37, 64}, 80 + r), HostTensor::random(t, {64, 64}, 90 + r, -0.2, 0.2),
                      HostTensor::random(t, {64}, 95 + r, 0.5, 1.5)});
    expect_cuda_matches(g, runs, str("arena ", dtype_name(t)));
  }
}

// Vector points against the interpreter: broadcasts along either dim, a transposed operand (not
// contiguous along the innermost loop: stays scalar), and a misaligned slice (element fallback).
TEST(CudaCompiled, VectorPointsMatchTheInterpreter) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    Graph g("points");
    Value* x = g.add_input("x", TensorType{t, {SymInt(9), SymInt(65)}, Device::CPU});
    Value* row = g.add_input("row", TensorType{t, {SymInt(64)}, Device::CPU});
    Value* col = g.add_input("col", TensorType{t, {SymInt(9), SymInt(1)}, Device::CPU});
    Value* sq = g.add_input("sq", TensorType{t, {SymInt(64), SymInt(64)}, Device::CPU});
    Value* v = g.add(Op::Slice, {x}, {{"starts", std::vector<int64_t>{1}}, {"ends", std::vector<int64_t>{65}},
                                      {"axes", std::vector<int64_t>{1}}});
    Value* a = g.add(Op::Gelu, {g.add(Op::Mul, {g.add(Op::Add, {v, row}), col})});
    Value* tr = g.add(Op::Permute, {sq}, {{"perm", std::vector<int64_t>{1, 0}}});
    Value* b = g.add(Op::Sub, {g.add(Op::Exp, {tr}), sq});
    g.set_outputs({a, b});
    std::vector<std::vector<HostTensor>> runs;
    for (uint64_t r = 0; r < 2; ++r)
      runs.push_back({HostTensor::random(t, {9, 65}, 80 + r, -3, 3), HostTensor::random(t, {64}, 81 + r, -1, 1),
                      HostTensor::random(t, {9, 1}, 82 + r, -2, 2), HostTensor::random(t, {64, 64}, 83 + r, -2, 2)});
    expect_cuda_matches(g, runs, str("points ", dtype_name(t)));
  }
}

}  // namespace
}  // namespace kiln::testing
