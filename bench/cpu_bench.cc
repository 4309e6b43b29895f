// CPU benchmark driver: Kiln eager vs Kiln compiled on the gap-meter workloads (elementwise chains
// of length 1/2/4/8 on 32M floats, softmax and layer_norm on 4096x4096, gelu(x@W+b)), with the copy
// bandwidth measured in the same run. Prints one markdown table row per workload: medians over
// repeats, bytes moved, kernels launched, cold/warm compile times.
// Usage: kiln_cpu_bench [--threads N] [--repeats R] [--only name]
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

#include "kernels/cpu/eager.h"
#include "kiln/compile.h"
#include "kiln/interp.h"

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

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, repeats = 7;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--threads") threads = std::atoi(argv[i + 1]);
    if (a == "--repeats") repeats = std::atoi(argv[i + 1]);
    if (a == "--only") only = argv[i + 1];
  }
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
            << " repeats; copy bandwidth " << copy_gbs << " GB/s (" << copy_ms << " ms for 2x128 MiB)\n\n";
  std::cout << "| workload | eager ms | compiled ms | speedup | eager kernels | compiled kernels | eager MB moved | compiled MB moved | compiled GB/s (% of copy) | kernel-only GB/s (% of copy) | cold compile ms | warm compile ms |\n";
  std::cout << "|---|---|---|---|---|---|---|---|---|---|---|---|\n";

  std::vector<Workload> ws;
  for (int c : {1, 2, 4, 8}) ws.push_back(chain(c));
  ws.push_back(norm(Op::Softmax));
  ws.push_back(norm(Op::LayerNorm));
  ws.push_back(gelu_mlp());
  std::string cold_dir = (std::filesystem::temp_directory_path() / str("kiln-bench-cold-", getpid())).string();
  for (auto& w : ws) {
    if (!only.empty() && w.name.find(only) == std::string::npos) continue;
    CompileOptions opt;
    opt.num_threads = threads;
    opt.cache_dir = cold_dir;
    std::filesystem::remove_all(cold_dir);
    auto t0 = Clock::now();
    auto exe = compile(*w.graph, opt);
    double cold = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    t0 = Clock::now();
    exe = compile(*w.graph, opt);
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
    std::sort(kt.begin(), kt.end());
    double kernel_gbs = double(sc.bytes_moved()) / (kt[kt.size() / 2] * 1e6);
    std::printf("| %s | %.2f | %.2f | %.2fx | %lld | %lld | %.0f | %.0f | %.1f (%.0f%%) | %.1f (%.0f%%) | %.0f | %.1f |\n",
                w.name.c_str(), eager_ms, comp_ms, eager_ms / comp_ms, (long long)se.kernels_launched(),
                (long long)sc.kernels_launched(), se.bytes_moved() / 1e6, sc.bytes_moved() / 1e6, gbs,
                100 * gbs / copy_gbs, kernel_gbs, 100 * kernel_gbs / copy_gbs, cold, warm);
    std::fflush(stdout);
  }
  std::filesystem::remove_all(cold_dir);
  return 0;
}
