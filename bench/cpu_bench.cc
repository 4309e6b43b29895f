// CPU benchmark driver: Kiln eager vs Kiln compiled on the gap-meter workloads (elementwise chains
// of length 1/2/4/8 on 32M floats, softmax and layer_norm on 4096x4096, gelu(x@W+b), a GPT-style
// block at B=1 and 8, ResNet-18 and MiniLM-L6 from ONNX), with the copy bandwidth measured in the
// same run. Prints one markdown table row per workload (medians over repeats, bytes moved, kernels
// launched, cold/warm compile times) and, with --json, one JSON object per line for
// bench/cpu_report.py. Usage:
//   kiln_cpu_bench [--threads N] [--repeats R] [--only name] [--models DIR] [--json FILE] [--portable]
//                  [--steps] [--onnx FILE --label NAME [--dim name=value]...]
// --onnx times one ONNX model (bench/cpu_models.py's real models) instead of the built-in workloads.
// --steps also prints each compiled and eager step's median time (to stderr), slowest first: where
// the time of a workload goes, without a trace viewer.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <iostream>
#include <string>
#include <vector>

#include <cstdio>
#include <fstream>

#include "kernels/cpu/eager.h"
#include "kiln/compile.h"
#include "kiln/demo.h"
#include "kiln/interp.h"
#include "kiln/onnx.h"
#include "kiln/passes.h"
#include "kiln/trace.h"
#include "kiln/target.h"

extern "C" char* openblas_get_corename(void);

using namespace kiln;
using Clock = std::chrono::steady_clock;

namespace {

double median_ms(int repeats, const std::function<void()>& fn) {
  fn();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    auto a = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Workload {
  std::string name;
  std::unique_ptr<Graph> graph;
  std::vector<HostTensor> inputs;
  bool optimize = false;  // traced / imported graphs: kiln::optimize before kiln::compile
};

TensorType f32(std::vector<int64_t> d) { return TensorType{DType::F32, to_shape(d), Device::CPU}; }

Workload chain(int n) {
  Workload w{str("chain", n, " 32M f32"), std::make_unique<Graph>(str("chain", n)), {}};
  Value* x = w.graph->add_input("x", f32({int64_t(32) << 20}));
  Value* y = x;
  // Cheap ops the compiler vectorises: the chain is memory-bound, as in the gap meter.
  for (int i = 0; i < n; ++i)
    y = i % 2 == 0 ? w.graph->add(Op::Mul, {y, w.graph->scalar(DType::F32, 1.0001)})
                   : w.graph->add(Op::Add, {y, w.graph->scalar(DType::F32, 0.5)});
  w.graph->set_outputs({y});
  w.inputs = {HostTensor::random(DType::F32, {int64_t(32) << 20}, 1)};
  return w;
}

Workload norm(Op op) {
  Workload w{str(op_name(op), " 4096x4096"), std::make_unique<Graph>(std::string(op_name(op))), {}};
  Value* x = w.graph->add_input("x", f32({4096, 4096}));
  if (op == Op::LayerNorm) {
    Value* g = w.graph->add_input("w", f32({4096}));
    Value* b = w.graph->add_input("b", f32({4096}));
    w.graph->set_outputs({w.graph->add(op, {x, g, b})});
    w.inputs = {HostTensor::random(DType::F32, {4096, 4096}, 2), HostTensor::random(DType::F32, {4096}, 3),
                HostTensor::random(DType::F32, {4096}, 4)};
  } else {
    w.graph->set_outputs({w.graph->add(op, {x})});
    w.inputs = {HostTensor::random(DType::F32, {4096, 4096}, 2)};
  }
  return w;
}

Workload gelu_mlp() {
  Workload w{"gelu(x@W+b) 1024x1024x4096", std::make_unique<Graph>("mlp"), {}};
  Value* x = w.graph->add_input("x", f32({1024, 1024}));
  Value* W = w.graph->add_input("W", f32({1024, 4096}));
  Value* b = w.graph->add_input("b", f32({4096}));
  w.graph->set_outputs({w.graph->add(Op::Gelu, {w.graph->add(Op::Add, {w.graph->add(Op::MatMul, {x, W}), b})})});
  w.inputs = {HostTensor::random(DType::F32, {1024, 1024}, 5), HostTensor::random(DType::F32, {1024, 4096}, 6),
              HostTensor::random(DType::F32, {4096}, 7)};
  return w;
}

// The demo GPT block (pre-norm, causal attention, gelu MLP), d=512, 8 heads, d_ff=2048, T=128.
Workload gpt_block(int64_t batch) {
  demo::BlockParams params = demo::make_block_params(demo::BlockConfig{512, 8, 2048}, 11);
  HostTensor x = HostTensor::random(DType::F32, {batch, 128, 512}, 12);
  TraceOptions options;
  options.name = "gpt_block";
  TracedFunction traced = trace([&](const Tensor& t) { return demo::transformer_block(t, params); },
                                Tensor::from_host(x), options);
  traced(Tensor::from_host(x));
  return {str("gpt_block d512 T128 B", batch), traced.graph().clone(), {x}, true};
}

// An ONNX model from scripts/gen_models.py; symbolic dims bound by `dims`. Index inputs get small
// ids, attention masks ones.
Workload onnx_model(const std::string& label, const std::string& path, const std::map<std::string, int64_t>& dims) {
  ImportOptions io;
  io.dim_values = dims;
#ifdef KILN_HAVE_ONNX
  Workload w{label, import_onnx(path, io), {}, true};
#else
  throw Error(str(label, ": this build has no ONNX importer (", path, ")"));
  Workload w{label, nullptr, {}, true};
#endif
  for (size_t i = 0; i < w.graph->inputs().size(); ++i) {
    const Value* v = w.graph->inputs()[i];
    std::vector<int64_t> shape;
    for (const SymInt& d : v->type.shape) shape.push_back(d.evaluate({}));
    if (!is_integer(v->type.dtype)) w.inputs.push_back(HostTensor::random(v->type.dtype, shape, 20 + i));
    else if (v->name.find("mask") != std::string::npos) w.inputs.push_back(HostTensor::random(v->type.dtype, shape, 1, 1, 1));
    else w.inputs.push_back(HostTensor::random(v->type.dtype, shape, 20 + i, 0, 1000));
  }
  return w;
}

// Eager: one eager kernel per node, in graph order (what kiln::Tensor's eager mode does).
std::vector<HostTensor> run_eager(const Graph& g, const std::vector<HostTensor>& inputs, Scoreboard* sb) {
  std::map<const Value*, HostTensor> vals;
  for (size_t i = 0; i < inputs.size(); ++i) vals[g.inputs()[i]] = inputs[i];
  for (const auto& n : g.nodes()) {
    std::vector<HostTensor> in;
    for (const Value* v : n->inputs) in.push_back(vals.at(v));
    auto out = eager::run_op(n->op, n->attrs, in, n->op == Op::Constant ? nullptr : sb);
    for (size_t i = 0; i < out.size(); ++i) vals[n->outputs[i]] = out[i];
  }
  std::vector<HostTensor> outs;
  for (const Value* v : g.outputs()) outs.push_back(vals.at(v));
  return outs;
}

// Median time of each step over `repeats` runs of `run_once` (which fills a scoreboard), slowest
// first, with its share of the sum.
void print_steps(const std::string& title, int repeats, const std::function<void(Scoreboard*)>& run_once) {
  std::vector<std::vector<double>> times;
  std::vector<std::string> names;
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    Scoreboard s;
    run_once(&s);
    times.resize(s.kernels().size());
    names.resize(s.kernels().size());
    for (size_t k = 0; k < s.kernels().size(); ++k) {
      times[k].push_back(s.kernels()[k].time_us);
      names[k] = s.kernels()[k].name;
    }
  }
  std::vector<std::pair<double, size_t>> med;
  double total = 0;
  for (size_t k = 0; k < times.size(); ++k) {
    std::sort(times[k].begin(), times[k].end());
    med.push_back({times[k][times[k].size() / 2], k});
    total += med.back().first;
  }
  std::sort(med.rbegin(), med.rend());
  std::fprintf(stderr, "steps of %s (median us of %d runs; sum %.0f us):\n", title.c_str(), repeats, total);
  for (auto [us, k] : med)
    std::fprintf(stderr, "  %3zu %-44s %10.1f  %5.1f%%\n", k, names[k].c_str(), us, 100 * us / std::max(total, 1e-9));
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, repeats = 7;
  std::string only, models_dir = ".cache/models", json_path, onnx_path, label;
  std::map<std::string, int64_t> onnx_dims;
  bool portable = false, steps = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--blas-core") {  // for bench/run_cpu.sh: which OpenBLAS kernels this CPU got
      std::printf("%s\n", openblas_get_corename());
      return 0;
    }
    if (a == "--portable") {
      portable = true;
      continue;
    }
    if (a == "--steps") {
      steps = true;
      continue;
    }
    const bool has_value = i + 1 < argc;
    if (a == "--threads" && has_value) threads = std::atoi(argv[++i]);
    else if (a == "--repeats" && has_value) repeats = std::atoi(argv[++i]);
    else if (a == "--only" && has_value) only = argv[++i];
    else if (a == "--models" && has_value) models_dir = argv[++i];
    else if (a == "--json" && has_value) json_path = argv[++i];
    else if (a == "--onnx" && has_value) onnx_path = argv[++i];
    else if (a == "--label" && has_value) label = argv[++i];
    else if (a == "--dim" && has_value && std::strchr(argv[i + 1], '=')) {
      std::string kv = argv[++i];
      onnx_dims[kv.substr(0, kv.find('='))] = std::atoll(kv.c_str() + kv.find('=') + 1);
    }
    else {
      std::fprintf(stderr, "kiln_cpu_bench: unknown or incomplete option '%s'\nusage: kiln_cpu_bench [--threads N] "
                   "[--repeats R] [--only name] [--models DIR] [--json FILE] [--portable] [--steps] "
                   "[--onnx FILE --label NAME [--dim name=value]...]\n", a.c_str());
      return 2;
    }
  }
  std::ofstream json;
  if (!json_path.empty()) json.open(json_path);
  omp_set_num_threads(threads);
  eager::set_num_threads(threads);

  // Copy bandwidth in this run: read 128 MiB + write 128 MiB.
  size_t n = size_t(32) << 20;
  std::vector<float> src(n, 1.0f), dst(n);
  double copy_ms = median_ms(repeats, [&] {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < n; ++i) dst[i] = src[i];
  });
  double copy_gbs = 2.0 * double(n) * 4 / (copy_ms * 1e6);
  std::cout << "# Kiln CPU bench: " << threads << " threads, median of " << repeats
            << " repeats; copy bandwidth " << copy_gbs << " GB/s (" << copy_ms << " ms for 2x128 MiB); OpenBLAS core "
            << openblas_get_corename() << "; generated code " << (portable ? "this CPU's x86-64 level" : "-march=native")
            << "\n\n";
  if (json.is_open())
    json << "{\"copy_gbs\": " << copy_gbs << ", \"blas_core\": \"" << openblas_get_corename() << "\"}\n";
  std::cout << "| workload | eager ms | compiled ms | speedup | eager kernels | compiled kernels | eager MB moved | compiled MB moved | compiled GB/s (% of copy) | kernel-only GB/s (% of copy) | cold compile ms | warm compile ms |\n";
  std::cout << "|---|---|---|---|---|---|---|---|---|---|---|---|\n";

  std::vector<Workload> ws;
  auto wanted = [&](const std::string& name) { return only.empty() || name.find(only) != std::string::npos; };
  // Only the wanted workloads are built: the chains alone allocate half a gigabyte of inputs.
  if (!onnx_path.empty()) {
    ws.push_back(onnx_model(label.empty() ? onnx_path : label, onnx_path, onnx_dims));
    only = ws.back().name;
  }
  for (int c : {1, 2, 4, 8})
    if (onnx_path.empty() && wanted(str("chain", c, " 32M f32"))) ws.push_back(chain(c));
  if (wanted("softmax 4096x4096")) ws.push_back(norm(Op::Softmax));
  if (wanted("layer_norm 4096x4096")) ws.push_back(norm(Op::LayerNorm));
  if (wanted("gelu(x@W+b) 1024x1024x4096")) ws.push_back(gelu_mlp());
  for (int64_t b : {1, 8})
    if (wanted(str("gpt_block d512 T128 B", b))) ws.push_back(gpt_block(b));
  namespace fs = std::filesystem;
  for (auto [label, file, dims] : {std::tuple<std::string, std::string, std::map<std::string, int64_t>>{
                                       "resnet18 1x3x64x64 (onnx)", "resnet18/model.onnx", {}},
                                   {"minilm_l6 8x128 (onnx)", "minilm_l6/model.onnx", {{"batch", 8}, {"seq", 128}}}}) {
    if (!onnx_path.empty() || !wanted(label)) continue;
    if (!fs::exists(fs::path(models_dir) / file)) {
      std::cerr << "skipping " << label << ": no " << (fs::path(models_dir) / file).string()
                << " (make it with .venv/bin/python scripts/gen_models.py)\n";
      continue;
    }
    ws.push_back(onnx_model(label, (fs::path(models_dir) / file).string(), dims));
  }
  std::string cold_dir = (std::filesystem::temp_directory_path() / str("kiln-bench-cold-", getpid())).string();
  for (auto& w : ws) {
    if (!wanted(w.name)) continue;
    CompileOptions opt;
    opt.num_threads = threads;
    opt.cache_dir = cold_dir;
    // Like torch.compile's C++ backend, generate for this machine (-march=native); --portable
    // measures the default flags instead (this CPU's named x86-64 level, cpu_jit.h).
    opt.march_native = !portable;
    std::filesystem::remove_all(cold_dir);
    // Compile time includes kiln::optimize for traced and imported graphs.
    auto compile_it = [&] {
      CompileForOptions how;
      how.optimize = w.optimize;
      return compile_for(*w.graph, cpu_target(), opt, how);
    };
    auto t0 = Clock::now();
    auto exe = compile_it();
    double cold = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    t0 = Clock::now();
    exe = compile_it();
    double warm = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    Scoreboard se, sc;
    run_eager(*w.graph, w.inputs, &se);
    exe->run(w.inputs, &sc);
    double eager_ms = median_ms(repeats, [&] { run_eager(*w.graph, w.inputs, nullptr); });
    double comp_ms = median_ms(repeats, [&] { exe->run(w.inputs); });
    double gbs = double(sc.bytes_moved()) / (comp_ms * 1e6);
    // Kernel-only time (scoreboard), which excludes allocating and first-touching the outputs.
    std::vector<double> kt;
    for (int r = 0; r < repeats; ++r) {
      Scoreboard s;
      exe->run(w.inputs, &s);
      kt.push_back(s.kernel_us() / 1e3);
    }
    if (steps) {
      print_steps(w.name + ", compiled", repeats, [&](Scoreboard* s) { exe->run(w.inputs, s); });
      print_steps(w.name + ", eager", repeats, [&](Scoreboard* s) { run_eager(*w.graph, w.inputs, s); });
    }
    std::sort(kt.begin(), kt.end());
    double kernel_gbs = double(sc.bytes_moved()) / (kt[kt.size() / 2] * 1e6);
    std::printf("| %s | %.2f | %.2f | %.2fx | %lld | %lld | %.0f | %.0f | %.1f (%.0f%%) | %.1f (%.0f%%) | %.0f | %.1f |\n",
                w.name.c_str(), eager_ms, comp_ms, eager_ms / comp_ms, (long long)se.kernels_launched(),
                (long long)sc.kernels_launched(), se.bytes_moved() / 1e6, sc.bytes_moved() / 1e6, gbs,
                100 * gbs / copy_gbs, kernel_gbs, 100 * kernel_gbs / copy_gbs, cold, warm);
    std::fflush(stdout);
    if (json.is_open())
      json << "{\"workload\": \"" << w.name << "\", \"eager_ms\": " << eager_ms << ", \"compiled_ms\": " << comp_ms
           << ", \"eager_kernels\": " << se.kernels_launched() << ", \"compiled_kernels\": " << sc.kernels_launched()
           << ", \"eager_mb\": " << se.bytes_moved() / 1e6 << ", \"compiled_mb\": " << sc.bytes_moved() / 1e6
           << ", \"compiled_gbs\": " << gbs << ", \"cold_compile_ms\": " << cold << ", \"warm_compile_ms\": " << warm
           << "}" << std::endl;
  }
  std::filesystem::remove_all(cold_dir);
  return 0;
}
