// Measuring and caching the CPU's ceilings (see kiln/ceilings.h).
#include "kiln/ceilings.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "kernels/cpu/eager.h"
#include "kiln/compile.h"
#include "kiln/error.h"
#include "kiln/target.h"

namespace kiln {

namespace {
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

double gemm_gflops(int n, int repeats) {
  HostTensor a = HostTensor::random(DType::F32, {n, n}, 1), b = HostTensor::random(DType::F32, {n, n}, 2);
  eager::run_op(Op::MatMul, {}, {a, b});  // warm up BLAS buffers and threads
  std::vector<double> us;
  for (int i = 0; i < repeats; ++i) {
    Scoreboard sb;
    eager::run_op(Op::MatMul, {}, {a, b}, &sb);
    us.push_back(sb.kernels().at(0).time_us);
  }
  return 2.0 * double(n) * n * n / (median(us) * 1e3);
}

void launch_overhead(int repeats, double* kernel_us, double* run_us) {
  Graph g("calibrate_launch");
  Value* x = g.add_input("x", TensorType{DType::F32, {1}, Device::CPU});
  g.set_outputs({g.add(Op::Neg, {x})});
  auto exe = compile(g);
  std::vector<HostTensor> in = {HostTensor::random(DType::F32, {1}, 3)};
  exe->run(in);
  std::vector<double> k, r;
  for (int i = 0; i < repeats; ++i) {
    Scoreboard sb;
    const auto t0 = Clock::now();
    exe->run(in, &sb);
    r.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    k.push_back(sb.kernels().at(0).time_us);
  }
  *kernel_us = median(k);
  *run_us = median(r);
}
}  // namespace

Ceilings measure_ceilings(bool quick, const CalibrationProgress& progress) {
  Ceilings c;
  c.quick = quick;
  c.threads = eager::num_threads();
  c.copy_bytes = quick ? int64_t(64) << 20 : int64_t(256) << 20;
  c.gemm_n = quick ? 384 : 1024;
  auto say = [&](const char* what) {
    if (progress) progress(what);
  };
  say("calibrating: copy bandwidth");
  c.copy_gbps = cpu_target().copy_gbps(c.copy_bytes, quick ? 3 : 7);
  say("calibrating: sgemm rate");
  c.gemm_gflops = gemm_gflops(c.gemm_n, quick ? 3 : 5);
  say("calibrating: launch overhead");
  launch_overhead(quick ? 50 : 500, &c.launch_us, &c.run_overhead_us);
  c.measured_at = utc_now();
  return c;
}

std::string Ceilings::to_json() const {
  nlohmann::json j = {{"format_version", 1},     {"copy_gbps", copy_gbps},   {"gemm_gflops", gemm_gflops},
                      {"launch_us", launch_us},   {"run_overhead_us", run_overhead_us},
                      {"threads", threads},       {"copy_bytes", copy_bytes}, {"gemm_n", gemm_n},
                      {"quick", quick},           {"measured_at", measured_at}};
  return j.dump(2) + "\n";
}

Ceilings Ceilings::from_json(const std::string& text) {
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    Ceilings c;
    c.copy_gbps = j.at("copy_gbps");
    c.gemm_gflops = j.at("gemm_gflops");
    c.launch_us = j.at("launch_us");
    c.run_overhead_us = j.at("run_overhead_us");
    c.threads = j.at("threads");
    c.copy_bytes = j.at("copy_bytes");
    c.gemm_n = j.at("gemm_n");
    c.quick = j.at("quick");
    c.measured_at = j.at("measured_at");
    KILN_CHECK(c.copy_gbps > 0 && c.gemm_gflops > 0 && c.launch_us >= 0, "non-positive ceiling");
    return c;
  } catch (const std::exception& e) {
    throw Error(str("malformed ceilings file: ", e.what()));
  }
}

std::string ceilings_path() { return compile_cache_dir() + "/ceilings.json"; }

std::optional<Ceilings> cached_ceilings() {
  std::ifstream in(ceilings_path());
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    Ceilings c = Ceilings::from_json(ss.str());
    if (c.threads != eager::num_threads()) return std::nullopt;
    return c;
  } catch (const Error&) {
    return std::nullopt;  // re-measured and overwritten
  }
}

Ceilings load_or_measure_ceilings(bool force, bool full, const CalibrationProgress& progress) {
  if (!force) {
    if (auto c = cached_ceilings()) return *c;
  }
  Ceilings c = measure_ceilings(!full, progress);
  std::filesystem::create_directories(compile_cache_dir());
  std::string tmp = ceilings_path() + ".tmp." + std::to_string(getpid());  // concurrent runs
  std::ofstream(tmp) << c.to_json();
  std::filesystem::rename(tmp, ceilings_path());
  return c;
}

}  // namespace kiln
