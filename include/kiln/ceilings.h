// The CPU's ceilings (copy bandwidth, peak GEMM rate, launch overhead of a compiled kernel),
// measured once and cached as JSON next to the compile cache. Why: a roofline needs the machine's
// own numbers; `kiln explain` and `kiln gap` compare every kernel against them, and
// kiln::Target::ceilings() hands them out with the target.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace kiln {

struct Ceilings {
  double copy_gbps = 0;       // memcpy, bytes read + bytes written per second / 1e9
  double gemm_gflops = 0;     // OpenBLAS sgemm (eager matmul), 2*n^3 per call
  double launch_us = 0;       // one trivial generated kernel (1 element), kernel time
  double run_overhead_us = 0; // Executable::run of that one-kernel graph, whole call
  int threads = 0;            // kernel threads when measured
  int64_t copy_bytes = 0;     // buffer size of the copy measurement
  int gemm_n = 0;             // square sgemm size
  bool quick = false;         // measured on demand with small sizes (run `kiln calibrate` for full)
  std::string measured_at;    // UTC, ISO 8601
  std::string to_json() const;
  static Ceilings from_json(const std::string& text);  // throws kiln::Error on a malformed file
};

// `progress`, when set, hears each phase ("calibrating: copy bandwidth").
using CalibrationProgress = std::function<void(const std::string&)>;
Ceilings measure_ceilings(bool quick, const CalibrationProgress& progress = {});

// compile_cache_dir()/ceilings.json
std::string ceilings_path();
// The cached ceilings when present, readable and measured with the current thread count.
std::optional<Ceilings> cached_ceilings();
// Cached, or measured (quick unless full) and cached.
Ceilings load_or_measure_ceilings(bool force = false, bool full = false, const CalibrationProgress& progress = {});

}  // namespace kiln
