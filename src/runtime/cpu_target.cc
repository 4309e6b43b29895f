// The CPU target: generated C++ (kiln::compile), the eager CPU kernels as its baseline, and a
// threaded memcpy as its copy ceiling. Why: the CPU behind the Target interface, like any other.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "kernels/cpu/eager.h"
#include "kiln/error.h"
#include "kiln/target.h"
#include "lower/split_views.h"

namespace kiln {

namespace {

class CpuTarget final : public Target {
 public:
  TargetKind kind() const override { return TargetKind::Cpu; }
  std::string description() const override { return str("cpu: ", eager::num_threads(), " threads"); }
  std::shared_ptr<Executable> compile(const Graph& optimized, const CompileOptions& options) const override {
    return kiln::compile(optimized, options);
  }
  std::vector<HostTensor> run_eager(const Graph& g, const std::vector<HostTensor>& inputs, Scoreboard* sb) const override {
    return eager::run_graph(g, inputs, sb);
  }
  // split becomes slices (views the generated kernels read through, lower/split_views.h).
  OptimizeOptions optimize_options() const override {
    OptimizeOptions o = Target::optimize_options();
    o.target_passes.push_back({"cpu-split-to-slices", "split into slices (views): pieces read by generated kernels are not copied",
                               [](Graph& g) { return lower::split_into_slices(g); }});
    return o;
  }
  double copy_gbps(int64_t bytes, int repeats) const override;
  Ceilings ceilings() const override {
    return load_or_measure_ceilings();
  }

};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double CpuTarget::copy_gbps(int64_t bytes, int repeats) const {
  KILN_CHECK(bytes >= 64, "copy bandwidth: size ", bytes, " bytes is too small");
  KILN_CHECK(repeats >= 1, "copy bandwidth: repeats must be at least 1");
  std::vector<char> src(size_t(bytes), 1), dst(size_t(bytes), 0);  // touched: no page faults timed
  const int64_t chunk = std::max<int64_t>(int64_t(1) << 16, bytes / 64);
  const int64_t chunks = (bytes + chunk - 1) / chunk;
  std::vector<double> seconds;
  for (int r = 0; r < repeats + 1; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      int64_t begin = c * chunk, n = std::min(chunk, bytes - begin);
      std::memcpy(dst.data() + begin, src.data() + begin, size_t(n));
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) seconds.push_back(s);  // the first run warms caches and threads
  }
  return 2.0 * double(bytes) / median(seconds) / 1e9;
}

}  // namespace

const Target& cpu_target() {
  static const CpuTarget target;
  return target;
}

}  // namespace kiln
