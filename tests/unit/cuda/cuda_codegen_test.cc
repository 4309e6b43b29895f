// The CUDA target of the emitter and compile_cuda. Source tests run wherever NVRTC loads (no GPU
// needed): every op sample's kernels compile for sm_90. Device tests compare compile_cuda with the
// reference interpreter on random inputs at odd sizes in f32/f16/bf16 and skip without a GPU.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "codegen/common/c_emitter.h"
#include "codegen/cuda/cuda_emitter.h"
#include "common/op_samples.h"
#include "kiln/cuda.h"
#include "kiln/demo.h"
#include "kiln/trace.h"
#include "kiln/interp.h"
#include "runtime/cuda/cuda_executable.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/executable.h"
#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

// Samples whose lowering needs only generated kernels and float matmuls: what the CUDA backend runs.
bool runs_on_cuda(const runtime::CompiledExecutable& low) {
  for (const auto& step : low.steps) {
    if (!step.library || step.node->op == Op::ShapeOf) continue;
    if (step.node->op != Op::MatMul) return false;
    if (!cuda::cuda_matmul_batch_supported(step.node->inputs[0]->type.static_shape(),
                                           step.node->inputs[1]->type.static_shape()))
      return false;
    DType t = step.node->outputs[0]->type.dtype;
    if (t != DType::F32 && t != DType::F16 && t != DType::BF16) return false;
  }
  return true;
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
  std::string source = codegen::cuda::cuda_translation_unit(to_compile);
  EXPECT_NO_THROW(cuda::nvrtc_compile(source, "op_samples.cu", "sm_90", {"--std=c++17", "-diag-suppress=550,177"}));
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
  EXPECT_NE(k.source.find("kiln_block_reduce"), std::string::npos) << k.source;
  EXPECT_EQ(k.source.find(" std::"), std::string::npos) << "NVRTC has no std: " << k.source;
  EXPECT_EQ(k.source.find("(std::"), std::string::npos) << "NVRTC has no std: " << k.source;
}

// Row staging: softmax's row is copied into shared memory once (16-byte vectors where aligned)
// and its output written over it; layer_norm's weights are staged once per block; a row larger
// than the budget is not staged. The staged kernels compile with NVRTC.
TEST(CudaCodegen, RowsAreStagedInSharedMemoryWithinTheBudget) {
  auto kernel_of = [](Op op, DType t, int64_t rows, int64_t cols, int64_t budget) {
    Graph g("rows");
    Value* x = g.add_input("x", TensorType{t, {SymInt(rows), SymInt(cols)}, Device::CPU});
    Value* y;
    if (op == Op::LayerNorm) {
      Value* w = g.add_input("w", TensorType{t, {SymInt(cols)}, Device::CPU});
      y = g.add(Op::LayerNorm, {x, w, w});
    } else {
      y = g.add(op, {x});
    }
    g.set_outputs({y});
    auto low = runtime::lower_for_target(g, CompileOptions{}, str("kiln_", op_name(op), "_", cols, "_"));
    EXPECT_EQ(low->kernels.size(), 1u);
    codegen::cuda::CudaEmitOptions o;
    o.shared_budget_bytes = budget;
    return codegen::cuda::emit_cuda_kernel(low->kernels[0].kernel, o);
  };
  auto softmax = kernel_of(Op::Softmax, DType::BF16, 64, 4096, 48 * 1024);
  EXPECT_EQ(softmax.shared_bytes, 4096 * 2) << softmax.source;  // the output shares the input's row
  EXPECT_NE(softmax.source.find("kiln_copy_row<kiln_block, 4096>(p1000, p0 + "), std::string::npos) << softmax.source;
  EXPECT_NE(softmax.source.find("kiln_copy_row<kiln_block, 4096>(p1 + "), std::string::npos) << softmax.source;
  EXPECT_EQ(softmax.source.find("p0[4096*i0 + i1]"), std::string::npos) << "every row read is on chip: " << softmax.source;
  auto norm = kernel_of(Op::LayerNorm, DType::F32, 5, 1000, 48 * 1024);
  EXPECT_EQ(norm.shared_bytes, 2 * 1000 * 4) << norm.source;
  EXPECT_NE(norm.source.find("the same for every row"), std::string::npos) << norm.source;
  auto too_long = kernel_of(Op::Softmax, DType::F32, 2, 70001, 48 * 1024);
  EXPECT_EQ(too_long.shared_bytes, 0);
  EXPECT_EQ(too_long.source.find("kiln_smem"), std::string::npos) << too_long.source;
  auto opt_in = kernel_of(Op::Softmax, DType::F32, 2, 40000, 200 * 1024);
  EXPECT_EQ(opt_in.shared_bytes, 160000);
  if (!cuda::nvrtc_status().loaded) GTEST_SKIP() << cuda::nvrtc_status().message;
  std::string source = codegen::cuda::cuda_translation_unit({softmax, norm, too_long, opt_in});
  EXPECT_NO_THROW(cuda::nvrtc_compile(source, "staged.cu", "sm_90", {"--std=c++17", "-diag-suppress=550,177"}));
}

// The built-in GPT block needs nothing but generated kernels and matmuls on the GPU.
TEST(CudaCodegen, TheDemoBlockLowersToKernelsAndMatmulsOnly) {
  demo::BlockConfig cfg{64, 4, 256};
  demo::BlockParams params = demo::make_block_params(cfg, 5, DType::BF16);
  Tensor example = Tensor::from_host(HostTensor::random(DType::BF16, {2, 7, 64}, 9));
  TracedFunction f = trace([&](const Tensor& x) { return demo::transformer_block(x, params); }, example);
  std::unique_ptr<Graph> g = f.graph().clone();
  cuda::prepare_graph_for_cuda(*g);
  auto low = runtime::lower_for_target(*g, CompileOptions{}, "kiln_");
  std::string library_ops;
  for (const auto& step : low->steps)
    if (step.library && step.node->op != Op::MatMul) library_ops += step.node->describe() + " ";
  EXPECT_EQ(library_ops, "");
  EXPECT_TRUE(runs_on_cuda(*low));
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

std::string skip_reason() { return cuda_unavailable_reason(); }

CudaCompileOptions cuda_options() {
  CudaCompileOptions o;
  o.base.cache_dir = test_cache_dir();
  return o;
}

void expect_cuda_matches(const Graph& g, const std::vector<std::vector<HostTensor>>& runs, const std::string& label) {
  auto exe = compile_cuda(g, cuda_options());
  for (size_t r = 0; r < runs.size(); ++r) {
    std::vector<HostTensor> want = interp::run(g, runs[r]);
    std::vector<HostTensor> got = exe->run(runs[r]);
    ASSERT_EQ(got.size(), want.size()) << label;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(compare_tensors(got[i], want[i]), "") << label << " run " << r << " output " << i << "\n"
                                                      << exe->explain().substr(0, 4000);
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
    if (!runs_on_cuda(*runtime::lower_for_target(*one, CompileOptions{}, "kiln_"))) {
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
        if (run == 0) EXPECT_EQ(sb.kernels().size(), form == "bias+broadcast" ? 2u : 1u) << dtype_name(t) << " " << form;
      }
    }
  }
}

// A sliced view's rows start at any element: the staged copy falls back to element loads there.
TEST(CudaCompiled, StagedRowsOfAMisalignedSliceMatchTheInterpreter) {
  if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  for (DType t : {DType::F32, DType::BF16}) {
    Graph g("sliced_softmax");
    Value* x = g.add_input("x", TensorType{t, {SymInt(9), SymInt(1025)}, Device::CPU});
    Value* v = g.add(Op::Slice, {x}, {{"starts", std::vector<int64_t>{1}}, {"ends", std::vector<int64_t>{1025}},
                                      {"axes", std::vector<int64_t>{1}}});
    g.set_outputs({g.add(Op::Softmax, {v})});
    std::vector<std::vector<HostTensor>> runs;
    for (uint64_t r = 0; r < 3; ++r) runs.push_back({HostTensor::random(t, {9, 1025}, 40 + r, -4, 4)});
    expect_cuda_matches(g, runs, str("sliced softmax ", dtype_name(t)));
  }
}

}  // namespace
}  // namespace kiln::testing
