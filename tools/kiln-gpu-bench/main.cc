// kiln-gpu-bench: the issue-#7 workloads through kiln::compile_cuda on the GPU — softmax and
// layer_norm rows, gelu(x@W+b) against the bare cuBLASLt GEMM, a GPT-2-medium-sized block at
// B=1/T=1 and B=8/T=1024 with CUDA graphs, and the host cost of one unfused launch (the eager
// dispatch figure). Medians of event-timed repeats; JSON for bench/results. Why: one binary in the
// GPU bundle measures everything in the same call as the PyTorch peers (bench/gpu_peers.py).
//   usage: kiln-gpu-bench [--json FILE] [--quick] [--only SECTION] [--cols N (rows: only that width)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_emitter.h"
#include "kiln/cuda.h"
#include "kiln/demo.h"
#include "kiln/error.h"
#include "kiln/onnx.h"
#include "kiln/passes.h"
#include "kiln/scoreboard.h"
#include "kiln/target.h"
#include "kiln/tensor.h"
#include "kiln/trace.h"
#include "runtime/cuda/cublaslt_matmul.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_executable.h"
#include "runtime/cuda/cuda_module.h"
#include "runtime/cuda/device_tensor.h"
#include "runtime/cuda/nvrtc_compiler.h"

using namespace kiln;

namespace {

struct Results {
  std::vector<std::pair<std::string, std::string>> json;  // key -> JSON value text
  void add(const std::string& key, const std::string& value) {
    json.push_back({key, value});
    std::cout << key << ": " << value << std::endl;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median over `reps` of the event-timed duration of `fn` (ms); `warm` untimed calls first.
template <typename F>
double time_ms(const cuda::Stream& stream, F fn, int warm = 3, int reps = 20) {
  for (int i = 0; i < warm; ++i) fn();
  stream.synchronize();
  std::vector<double> ts;
  for (int i = 0; i < reps; ++i) {
    cuda::Event a, b;
    a.record(stream);
    fn();
    b.record(stream);
    b.synchronize();
    ts.push_back(b.elapsed_ms_since(a));
  }
  return median(ts);
}

Shape static_shape(const std::vector<int64_t>& d) {
  Shape s;
  for (int64_t x : d) s.push_back(SymInt(x));
  return s;
}

cuda::CudaExecutable& as_cuda(const std::shared_ptr<Executable>& e) { return dynamic_cast<cuda::CudaExecutable&>(*e); }

// Through the Target interface, as `kiln run --device cuda` compiles; `optimize` off: the graph as
// built (compile_cuda decomposes what its kernels do not run whole itself).
std::shared_ptr<Executable> compile_gpu(const Graph& g, const CudaCompileOptions& o = {}, bool optimize = false) {
  CompileForOptions how;
  how.optimize = optimize;
  return compile_for(g, *cuda_target(o), o.base, how);
}

std::string fixed(double v, int digits = 4) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// The row forms of docs/cuda.md on the same rows: the default (register rows, split over a cluster
// when a row is longer than one block holds), smaller blocks, and rows staged in shared memory.
struct RowVariant {
  const char* suffix;  // "" for the default, the headline figure
  bool registers = true;
  int preferred_threads = 256;
  int max_cluster = 16;
  bool prefetch = true;
  int register_words = 48;  // 16: the row arrays only (no kept values, weights from L1)
  bool fuse = true;         // false: softmax's / layer norm's two reductions reduced one by one
  int max_per_thread = 32;
  int occupancy_threads = 1024;  // 768: 80 registers a thread
  bool persistent = true;        // false: clusters launched in waves
  bool chunks = true;            // false: weights an element at a time, outputs stored after the loops
  int bulk_stages = 3;           // 0: the register prefetch for long rows too
  int bulk_min_per_thread = 32;  // 16: bulk rows for [32768x4096] as well
  int fuse_norm_max_per_thread = 16;  // 32: layer norm's mean and variance fused at 32 elements too
  int max_threads = 1024;             // 256: bulk rows split over a cluster of 256-thread blocks
  bool mail = true;                   // false: fused reductions across a cluster by a cluster barrier
  bool weights_in_shared = true;      // false: chunked weights from L1/L2 every row
};
const RowVariant kRowVariants[] = {
    {""},
    {"@unfused", true, 256, 16, true, 48, false},
    {"@noprefetch", true, 256, 16, false},
    {"@unchunked", true, 256, 16, true, 48, true, 32, 1024, true, false},
    {"@waves", true, 256, 16, true, 48, true, 32, 1024, false},
    {"@occ768", true, 256, 16, true, 48, true, 32, 768},
    {"@threads512", true, 512, 16, true},
    {"@threads1024", true, 1024, 16, true},
    {"@cluster8", true, 256, 8, true},
    {"@words16", true, 256, 16, true, 16},
    {"@shared", false},
    {"@nobulk", true, 256, 16, true, 48, true, 32, 1024, true, true, 0},
    {"@bulk2", true, 256, 16, true, 48, true, 32, 1024, true, true, 2},
    {"@bulk16", true, 256, 16, true, 48, true, 32, 1024, true, true, 3, 16},
    {"@bulkfusednorm", true, 256, 16, true, 48, true, 32, 1024, true, true, 3, 32, 32},
    {"@bulk256", true, 256, 16, true, 48, true, 32, 1024, true, true, 3, 32, 16, 256},
    {"@mailnobulk", true, 256, 16, true, 48, true, 32, 1024, true, true, 0, 32, 16, 1024, true},
    {"@barrier", true, 256, 16, true, 48, true, 32, 1024, true, true, 3, 32, 16, 1024, false},
    {"@weightsl1", true, 256, 16, true, 48, true, 32, 1024, true, true, 3, 32, 16, 1024, true, false},
};

void rows(Results& r, bool quick, int64_t only_cols) {
  std::vector<std::pair<int64_t, int64_t>> shapes = {{32768, 4096}, {4096, 32768}, {512, 262144}};
  if (quick) shapes = {{1024, 4096}};
  if (only_cols > 0)
    shapes.erase(std::remove_if(shapes.begin(), shapes.end(), [&](const auto& s) { return s.second != only_cols; }),
                 shapes.end());
  for (auto [rows, cols] : shapes) {
    for (const char* which : {"softmax", "layernorm"}) {
      Graph g(which);
      Value* x = g.add_input("x", TensorType{DType::BF16, static_shape({rows, cols}), Device::CPU});
      Value* y;
      if (std::string(which) == "softmax") {
        y = g.add(Op::Softmax, {x});
      } else {
        Value* w = g.add_input("w", TensorType{DType::BF16, static_shape({cols}), Device::CPU});
        y = g.add(Op::LayerNorm, {x, w, w});
      }
      g.set_outputs({y});
      std::vector<HostTensor> in = {HostTensor::random(DType::BF16, {rows, cols}, 1)};
      if (g.inputs().size() == 2) in.push_back(HostTensor::random(DType::BF16, {cols}, 2, 0.5, 1.5));
      for (const RowVariant& v : kRowVariants) {
        CudaCompileOptions o;
        if (!v.registers) o.row_form = "staged_rows";
        codegen::cuda::RowFormOptions f;  // each form's knobs (src/codegen/cuda/rows/)
        f.registers.preferred_threads = v.preferred_threads;
        f.registers.max_cluster = v.max_cluster;
        f.registers.prefetch = v.prefetch;
        f.registers.register_words = v.register_words;
        f.fused.enabled = v.fuse;
        f.registers.max_per_thread = v.max_per_thread;
        f.registers.occupancy_threads = v.occupancy_threads;
        f.registers.persistent_clusters = v.persistent;
        f.registers.chunks = v.chunks;
        f.bulk.stages = v.bulk_stages;
        f.bulk.min_per_thread = v.bulk_min_per_thread;
        f.fused.norm_max_per_thread = v.fuse_norm_max_per_thread;
        f.registers.max_threads = v.max_threads;
        f.mail.enabled = v.mail;
        f.registers.weights_in_shared = v.weights_in_shared;
        auto exe = cuda::compile_cuda_with_row_forms(g, o, f);
        auto& cx = as_cuda(exe);
        cx.bind(in);
        double ms = time_ms(*cx.stream_, [&] { cx.launch(); });
        double bytes = 2.0 * double(rows) * double(cols) * 2;
        const auto& ks = cx.kernel_sources.at(0);
        r.add(str(which, "_", rows, "x", cols, v.suffix),
              str("{\"ms\": ", fixed(ms), ", \"TBps\": ", fixed(bytes / ms / 1e9, 3), ", \"kernels\": ", cx.launches_per_run(),
                  ", \"threads\": ", ks.block_threads, ", \"cluster\": ", ks.cluster, ", \"shared_bytes\": ", ks.shared_bytes, "}"));
      }
    }
  }
}

// gelu(x@W+b) against the bare cuBLASLt GEMM on the same random operands (a GEMM on constant
// operands draws less power and ran ~8% faster on the H200, which flattered the bare time), and the
// gelu pass alone (gelu(z+b) on a [m, n] input), to tell its cost from the GEMM's.
void gelu_linear(Results& r, bool quick, bool tanh_form) {
  int64_t m = quick ? 2048 : 16384, k = 4096, n = 4096;
  Graph g("gelu_linear");
  Value* x = g.add_input("x", TensorType{DType::BF16, static_shape({m, k}), Device::CPU});
  Value* w = g.add_input("w", TensorType{DType::BF16, static_shape({k, n}), Device::CPU});
  Value* b = g.add_input("b", TensorType{DType::BF16, static_shape({n}), Device::CPU});
  const Attrs form{{"approximate", std::string(tanh_form ? "tanh" : "none")}};
  Value* y = g.add(Op::Gelu, {g.add(Op::Add, {g.add(Op::MatMul, {x, w}), b})}, form);
  g.set_outputs({y});
  const std::vector<HostTensor> in = {HostTensor::random(DType::BF16, {m, k}, 1),
                                      HostTensor::random(DType::BF16, {k, n}, 2, -0.02, 0.02),
                                      HostTensor::random(DType::BF16, {n}, 3)};
  // The gelu kernel in scalar form too (one point per thread), for the vector points' effect.
  double scalar_ms = 0;
  if (!tanh_form) {
    CudaCompileOptions o;
    o.vector_points = false;
    auto sx = compile_gpu(g, o);
    auto& scx = as_cuda(sx);
    scx.bind(in);
    scalar_ms = time_ms(*scx.stream_, [&] { scx.launch(); });
  }
  auto exe = compile_gpu(g);
  auto& cx = as_cuda(exe);
  cx.bind(in);
  double kiln_ms = time_ms(*cx.stream_, [&] { cx.launch(); });
  // The gelu pass alone: gelu(z + b) with z the size of the product.
  double pass_ms = 0;
  if (!tanh_form) {
    Graph p("gelu_pass");
    Value* z = p.add_input("z", TensorType{DType::BF16, static_shape({m, n}), Device::CPU});
    Value* pb = p.add_input("b", TensorType{DType::BF16, static_shape({n}), Device::CPU});
    p.set_outputs({p.add(Op::Gelu, {p.add(Op::Add, {z, pb})}, form)});
    auto px = compile_gpu(p);
    auto& pcx = as_cuda(px);
    pcx.bind({HostTensor::random(DType::BF16, {m, n}, 4, -3, 3), in[2]});
    pass_ms = time_ms(*pcx.stream_, [&] { pcx.launch(); });
  }
  // The bare GEMM and cuBLASLt's own fused GELU+bias epilogue, on the same operands, and the bare
  // GEMM on constant operands for comparison with earlier reports.
  cuda::Stream& s = *cx.stream_;
  auto dx = cuda::DeviceTensor::upload(in[0], s), dw = cuda::DeviceTensor::upload(in[1], s);
  auto db = cuda::DeviceTensor::upload(in[2], s), dy = cuda::DeviceTensor::empty(DType::BF16, {m, n}, s);
  auto ws = cuda::DeviceTensor::empty(DType::U8, {int64_t(cuda::LtMatmul::kWorkspaceBytes)}, s);
  cuda::LtMatmul bare(m, n, k, DType::BF16, cuda::MatmulEpilogue::None);
  cuda::LtMatmul fused(m, n, k, DType::BF16, cuda::MatmulEpilogue::GeluBias);
  double bare_ms = time_ms(s, [&] { bare.run(dx.data(), dw.data(), 0, dy.data(), ws.data(), s); });
  double fused_ms = time_ms(s, [&] { fused.run(dx.data(), dw.data(), db.data(), dy.data(), ws.data(), s); });
  dx.fill_bytes(0x3c, s), dw.fill_bytes(0x3c, s);
  double constant_ms = time_ms(s, [&] { bare.run(dx.data(), dw.data(), 0, dy.data(), ws.data(), s); });
  r.add(tanh_form ? "gelu_tanh_linear" : "gelu_linear",
        str("{\"m\": ", m, ", \"kiln_ms\": ", fixed(kiln_ms), ", \"bare_gemm_ms\": ", fixed(bare_ms),
            ", \"bare_gemm_constant_operands_ms\": ", fixed(constant_ms), ", \"lt_gelu_bias_epilogue_ms\": ", fixed(fused_ms),
            ", \"kiln_over_bare\": ", fixed(kiln_ms / bare_ms, 3), ", \"kernels\": ", cx.launches_per_run(),
            ", \"kiln_scalar_points_ms\": ", fixed(scalar_ms), ", \"gelu_pass_ms\": ", fixed(pass_ms),
            ", \"gelu_pass_TBps\": ", fixed(pass_ms > 0 ? 2.0 * 2 * double(m) * double(n) / pass_ms / 1e9 : 0.0, 3), "}"));
}

void block(Results& r, int64_t batch, int64_t seq, bool graphs, bool fused_attention = true) {
  demo::BlockConfig cfg{1024, 16, 4096};
  demo::BlockParams params = demo::make_block_params(cfg, 5, DType::BF16);
  Tensor example = Tensor::from_host(HostTensor::random(DType::BF16, {batch, seq, 1024}, 9));
  TracedFunction f = trace([&](const Tensor& x) { return demo::transformer_block(x, params); }, example);
  CudaCompileOptions opt;
  opt.use_graphs = graphs;
  opt.fused_attention = fused_attention;
  auto t0 = std::chrono::steady_clock::now();
  // As `kiln run --device cuda` does: the target's optimizer pipeline first (at these static shapes
  // it folds the causal mask's index arithmetic into a constant; attention stays whole for its
  // kernel when that is on), then the GPU compile.
  auto exe = compile_gpu(f.graph(), opt, /*optimize=*/true);
  double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto& cx = as_cuda(exe);
  cx.bind({HostTensor::random(DType::BF16, {batch, seq, 1024}, 9)});
  double ms = time_ms(*cx.stream_, [&] { cx.launch(); }, 3, batch * seq == 1 ? 100 : 20);
  // Where the time goes: each step timed with its own events (direct launches, no graph).
  std::string steps = "[";
  if (!graphs || batch * seq > 1) {
    Scoreboard sb;
    std::vector<HostTensor> in = {HostTensor::random(DType::BF16, {batch, seq, 1024}, 9)};
    for (int rep = 0; rep < 3; ++rep) {
      sb.clear();
      cx.run(in, &sb);
    }
    std::vector<KernelRecord> recs = sb.kernels();
    std::sort(recs.begin(), recs.end(), [](const auto& a, const auto& b) { return a.time_us > b.time_us; });
    for (size_t i = 0; i < recs.size(); ++i) {
      std::string ops;
      for (const auto& o : recs[i].source_ops) ops += (ops.empty() ? "" : " ") + o;
      steps += str(i ? ", " : "", "{\"step\": \"", recs[i].name, "\", \"ops\": \"", ops.substr(0, 80), "\", \"us\": ",
                   fixed(recs[i].time_us, 1), ", \"MB\": ", fixed((recs[i].bytes_read + recs[i].bytes_written) / 1e6, 1), "}");
    }
  }
  steps += "]";
  // Device memory of the intermediates: one arena laid out by the memory planner, against one
  // buffer each (what the executable allocated before the planner ran on the device).
  const lower::MemoryPlan memory = cx.device_memory_plan({}).plan;
  r.add(str("block_B", batch, "_T", seq, graphs ? "_graphs" : "_nographs", fused_attention ? "" : "_decomposed_attention"),
        str("{\"ms\": ", fixed(ms), ", \"us\": ", fixed(ms * 1000, 1), ", \"arena_MB\": ", fixed(memory.arena_bytes / 1e6, 1),
            ", \"one_buffer_each_MB\": ", fixed(memory.naive_bytes / 1e6, 1), ", \"kernels\": ", cx.stats().kernels_generated,
            ", \"library_calls\": ", cx.stats().library_calls, ", \"launches\": ", cx.launches_per_run(),
            ", \"compile_s\": ", fixed(compile_s, 2), ", \"steps\": ", steps, "}"));
}

// Median over 50 repeats of the host time `queue` takes, per launch it queues (`launches`); the
// device is drained after each repeat, so every repeat starts with an empty queue. Two untimed
// repeats first.
template <typename Queue, typename Drain>
double host_us_per_launch(double launches, Queue queue, Drain drain) {
  for (int i = 0; i < 2; ++i) queue();
  drain();
  std::vector<double> per;
  for (int rep = 0; rep < 50; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    queue();
    per.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / launches);
    drain();
  }
  return median(per);
}

// The driver's own cost on this host: cuLaunchKernel of empty kernels taking an 8-byte argument and
// one the size of the generated kernels' KilnArgs, 64 launches back to back.
void launch_floor(Results& r) {
  constexpr int kArgWords = codegen::cuda::kMaxKernelBuffers + codegen::cuda::kMaxKernelSymbols + 1;
  const std::string src = str("struct Big { void* w[", kArgWords, "]; };\n",
                              "extern \"C\" __global__ void kiln_empty8(const long long a) { (void)a; }\n",
                              "extern \"C\" __global__ void kiln_empty_args(const Big a) { (void)a; }\n");
  cuda::CudaModule module(cuda::nvrtc_compile(src, "launch_floor", cuda::CudaDevice::get().info().arch()));
  cuda::Stream stream;
  auto measure = [&](const char* name, void* arg) {
    CUfunction fn = module.function(name);
    void* params[] = {arg};
    cuda::LaunchShape shape;
    shape.block_x = 32;
    return host_us_per_launch(
        64, [&] { for (int i = 0; i < 64; ++i) cuda::launch_kernel(fn, shape, stream, params); },
        [&] { stream.synchronize(); });
  };
  long long small = 0;
  void* big[kArgWords] = {};
  const double us8 = measure("kiln_empty8", &small);
  const double us_args = measure("kiln_empty_args", big);
  r.add("launch_floor", str("{\"host_us_8B_arg\": ", fixed(us8, 2), ", \"host_us_520B_arg\": ", fixed(us_args, 2),
                            ", \"args_bytes\": ", kArgWords * 8, "}"));
}

// Host time to queue one unfused kernel (no CUDA graph): the eager-dispatch figure.
void dispatch(Results& r) {
  const int n = 64;
  Graph g("tiny_chain");
  Value* v = g.add_input("x", TensorType{DType::F32, static_shape({16}), Device::CPU});
  for (int i = 0; i < n; ++i) v = g.add(Op::Add, {v, g.scalar(DType::F32, 1.0)});
  g.set_outputs({v});
  CudaCompileOptions opt;
  opt.base.fuse = false;
  opt.use_graphs = false;
  auto exe = compile_gpu(g, opt);
  auto& cx = as_cuda(exe);
  cx.bind({HostTensor::random(DType::F32, {16}, 1)});
  const double host_us = host_us_per_launch(cx.launches_per_run(), [&] { cx.launch(); }, [&] { cx.synchronize(); });
  const double gpu_ms = time_ms(*cx.stream_, [&] { cx.launch(); });
  // The same through the Tensor API's GPU eager mode (gpu_eager.cc): each `y = y + one` looks up
  // the compiled op, allocates its result from the caching allocator and launches.
  {
    ScoreboardScope quiet(nullptr);  // no recording: the dispatch cost itself
    Tensor y = Tensor::from_host(HostTensor::random(DType::F32, {16}, 1)).to(Device::CUDA);
    Tensor one = Tensor::from_host(HostTensor::random(DType::F32, {16}, 2)).to(Device::CUDA);
    const double api_us = host_us_per_launch(
        n, [&] { for (int i = 0; i < n; ++i) y = y + one; }, [&] { (void)y.host(); });
    r.add("eager_api_dispatch", str("{\"host_us_per_op\": ", fixed(api_us, 2), ", \"ops\": ", n, "}"));
  }
  // The same executable through run_device (what the Tensor API calls per op: fresh output buffer
  // from the caching allocator, the caller's input read in place), without the API's op lookup.
  {
    std::vector<cuda::DeviceTensor> ins{cuda::DeviceTensor::upload(HostTensor::random(DType::F32, {16}, 3), *cx.stream_)};
    const double run_device_us = host_us_per_launch(
        8.0 * cx.launches_per_run(), [&] { for (int i = 0; i < 8; ++i) (void)cx.run_device(ins, nullptr); },
        [&] { cx.synchronize(); });
    r.add("eager_run_device", str("{\"host_us_per_launch\": ", fixed(run_device_us, 2), "}"));
  }
  launch_floor(r);
  r.add("eager_dispatch", str("{\"host_us_per_op\": ", fixed(host_us, 2), ", \"gpu_us_per_op\": ", fixed(gpu_ms * 1000 / cx.launches_per_run(), 2),
                              ", \"ops\": ", cx.launches_per_run(), "}"));
}

// A real model (an ONNX file, scripts/real_models.py) as `kiln run --device cuda [--dtype]` compiles
// it: compile time cold (no cache) and warm (cache hit), the median of event-timed graph replays,
// and kernels launched and bytes moved per run; the slowest steps say where the time goes.
// conv: "cudnn" (the default, as compile_cuda's: cuDNN wherever it plans, depthwise convs too;
// "cudnn-all" is the same), "depthwise" (depthwise convs on Kiln's register-tiled kernels, channels-
// last where the cuda-channels-last pass finds it pays: CudaCompileOptions::depthwise_kernel),
// "timed" (cuDNN or the direct kernel, whichever a first-run timing finds faster per conv) or
// "direct" (the direct kernel everywhere).
void model(Results& r, const std::string& path, const std::string& dtype, const std::string& conv,
           const std::string& steps_path) {
  std::unique_ptr<Graph> g = import_onnx(path);
  if (!dtype.empty() && dtype != "f32") g = to_float_precision(*g, *parse_dtype(dtype));
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < g->inputs().size(); ++i) {
    const Value* v = g->inputs()[i];
    KILN_CHECK(v->type.is_static(), path, ": input '", v->name, "' has symbolic dims; export at fixed shapes");
    const std::vector<int64_t> shape = v->type.static_shape();
    const bool mask = v->name.find("mask") != std::string::npos;
    inputs.push_back(mask ? HostTensor::from_doubles(v->type.dtype, shape, std::vector<double>(size_t(numel_of(shape)), 1.0))
                          : is_integer(v->type.dtype) ? HostTensor::random(v->type.dtype, shape, 7 + i, 0, 999)
                                                      : HostTensor::random(v->type.dtype, shape, 7 + i));
  }
  CudaCompileOptions warm;
  KILN_CHECK(conv == "timed" || conv == "cudnn" || conv == "direct" || conv == "cudnn-all" || conv == "depthwise",
             "--conv: '", conv, "' (cudnn, cudnn-all, depthwise, timed or direct)");
  warm.use_cudnn = conv != "direct";
  warm.time_conv_forms = conv == "timed";
  warm.depthwise_kernel = conv == "depthwise";
  CudaCompileOptions cold = warm;
  cold.base.use_cache = false;
  auto t0 = std::chrono::steady_clock::now();
  compile_gpu(*g, cold, /*optimize=*/true);
  auto t1 = std::chrono::steady_clock::now();
  compile_gpu(*g, warm, true);  // fills the cache
  auto t2 = std::chrono::steady_clock::now();
  auto exe = compile_gpu(*g, warm, true);
  auto t3 = std::chrono::steady_clock::now();
  auto& cx = as_cuda(exe);
  cx.bind(inputs);
  const double ms = time_ms(*cx.stream_, [&] { cx.launch(); }, 3, 20);
  Scoreboard sb;
  cx.run(inputs, &sb);
  std::vector<KernelRecord> recs = sb.kernels();
  if (!steps_path.empty()) {  // every step in run order: where a model's time goes
    std::ofstream steps(steps_path, std::ios::app);
    steps << "== " << path << " " << dtype << " conv " << conv << ": " << fixed(ms) << " ms a replay\n";
    for (const KernelRecord& k : recs) {
      steps << fixed(k.time_us, 1) << " us  " << fixed(double(k.bytes_read + k.bytes_written) / 1e6, 2) << " MB  "
            << fixed(k.flops / 1e9, 2) << " GF  " << k.name << "  (";
      for (const std::string& op : k.source_ops) steps << op << " ";
      steps << ")\n";
    }
  }
  std::sort(recs.begin(), recs.end(), [](const auto& a, const auto& b) { return a.time_us > b.time_us; });
  std::string slowest = "[";
  for (size_t i = 0; i < recs.size() && i < 6; ++i)
    slowest += str(i ? ", " : "", "{\"step\": \"", recs[i].name.substr(0, 60), "\", \"us\": ", fixed(recs[i].time_us, 1), "}");
  slowest += "]";
  std::string name = path;
  if (size_t slash = name.rfind("/model.onnx"); slash != std::string::npos) name = name.substr(0, slash);
  if (size_t slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
  r.add(str("model_", name, dtype.empty() ? "" : "_" + dtype, conv == "cudnn" ? "" : "_conv_" + conv),
        str("{\"ms\": ", fixed(ms), ", \"compile_cold_s\": ", fixed(std::chrono::duration<double>(t1 - t0).count(), 2),
            ", \"compile_warm_s\": ", fixed(std::chrono::duration<double>(t3 - t2).count(), 3),
            ", \"kernels\": ", sb.kernels_launched(), ", \"MB_moved\": ", fixed(double(sb.bytes_moved()) / 1e6, 1),
            ", \"slowest\": ", slowest, "}"));
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  bool quick = false;
  std::string only;
  int64_t only_cols = 0;  // rows section: only the shape with this many columns
  std::vector<std::string> models;  // --model FILE.onnx (repeatable): only the model section
  std::string dtype;                // --dtype f16|bf16 for the models
  std::string conv = "cudnn";       // --conv cudnn|cudnn-all|depthwise|timed|direct for the models
  std::string steps_path;           // --steps FILE: every model's steps appended there
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--quick") quick = true;
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--cols" && i + 1 < argc) only_cols = std::stoll(argv[++i]);
    else if (a == "--model" && i + 1 < argc) models.push_back(argv[++i]), only = "model";
    else if (a == "--dtype" && i + 1 < argc) dtype = argv[++i];
    else if (a == "--conv" && i + 1 < argc) conv = argv[++i];
    else if (a == "--steps" && i + 1 < argc) steps_path = argv[++i];
    else {
      std::cerr << "usage: kiln-gpu-bench [--json FILE] [--quick] [--only rows|gelu|block|dispatch] [--cols N]\n"
                   "                      [--model FILE.onnx ... [--dtype f16|bf16] [--conv cudnn|cudnn-all|depthwise|timed|direct] [--steps FILE]]\n";
      return 2;
    }
  }
  if (std::string why = cuda_unavailable_reason(); !why.empty()) {
    std::cerr << "kiln-gpu-bench: no GPU: " << why << "\n";
    return 77;
  }
  Results r;
  r.add("device", str("\"", cuda::CudaDevice::get().info().name, "\""));
  auto section = [&](const std::string& name, auto fn) {
    if (!only.empty() && only != name) return;
    try {
      fn();
    } catch (const std::exception& e) {
      r.add(name + "_error", str("\"", std::string(e.what()).substr(0, 300), "\""));
    }
  };
  for (const std::string& m : models) section("model", [&] { model(r, m, dtype, conv, steps_path); });
  section("dispatch", [&] { dispatch(r); });
  section("rows", [&] { rows(r, quick, only_cols); });
  section("gelu", [&] {
    gelu_linear(r, quick, false);
    gelu_linear(r, quick, true);
  });
  section("block", [&] {
    block(r, 1, 1, true);
    block(r, 1, 1, false);
    if (!quick) block(r, 8, 1024, true), block(r, 8, 1024, true, /*fused_attention=*/false);
  });
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << "{\n";
    for (size_t i = 0; i < r.json.size(); ++i)
      out << "  \"" << r.json[i].first << "\": " << r.json[i].second << (i + 1 < r.json.size() ? ",\n" : "\n");
    out << "}\n";
  }
  return 0;
}
