// kiln-gpu-probe: what GPU is here, does Kiln's CUDA runtime compute correctly on it, and how far
// are eager, fused and graph-replayed elementwise chains from the copy bandwidth (the gap meter).
// Without a GPU it says why and exits 0 with "skipped", so it is safe to run anywhere.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/error.h"
#include "probe.h"
#include "runtime/cuda/cublaslt_matmul.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/driver_api.h"
#include "runtime/cuda/nvrtc_compiler.h"

namespace {

void usage() {
  std::puts(
      "usage: kiln-gpu-probe [--json PATH] [--quick] [--repeats N] [--skip-gap-meter]\n"
      "  Prints the GPU, checks Kiln's CUDA runtime against float64 references, and measures\n"
      "  eager vs fused vs CUDA-graph elementwise chains against the copy bandwidth.");
}

void write_json(const std::string& path, const nlohmann::json& report) {
  if (path.empty()) return;
  std::ofstream out(path);
  if (!out) throw kiln::Error("cannot write the JSON report to " + path);
  out << report.dump(2) << "\n";
  std::printf("wrote %s\n", path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kiln;
  std::string json_path;
  bool skip_gap_meter = false;
  gpu_probe::ProbeOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--quick") {
      options.quick = true;
      options.repeats = 5;
    } else if (arg == "--repeats" && i + 1 < argc) {
      options.repeats = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--skip-gap-meter") {
      skip_gap_meter = true;
    } else {
      usage();
      return arg == "--help" || arg == "-h" ? 0 : 2;
    }
  }
  nlohmann::json report;
  const cuda::DriverStatus& status = cuda::driver_status();
  report["driver"] = status.message;
  if (!status.has_device()) {
    std::printf("kiln-gpu-probe: %s\nskipped: no GPU\n", status.message.c_str());
    report["skipped"] = true;
    write_json(json_path, report);
    return 0;
  }
  try {
    cuda::CudaDevice& device = cuda::CudaDevice::get();
    const cuda::DeviceInfo& info = device.info();
    std::printf("device 0: %s, compute capability %d.%d (%s), %.1f GiB, %d SMs, L2 %.0f MiB\n",
                info.name.c_str(), info.compute_major, info.compute_minor, info.arch().c_str(),
                double(info.total_memory) / (1 << 30), info.multiprocessors,
                double(info.l2_cache_bytes) / (1 << 20));
    std::printf("driver: %s; %s; %s\n", status.message.c_str(), cuda::nvrtc_status().message.c_str(),
                cuda::cublaslt_status().message.c_str());
    report["device"] = {{"name", info.name},
                        {"compute_capability", std::to_string(info.compute_major) + "." +
                                                   std::to_string(info.compute_minor)},
                        {"arch", info.arch()},
                        {"total_memory_bytes", info.total_memory},
                        {"multiprocessors", info.multiprocessors},
                        {"l2_cache_bytes", info.l2_cache_bytes},
                        {"theoretical_bandwidth_gbps", info.theoretical_bandwidth_gbps()},
                        {"nvrtc", cuda::nvrtc_status().message},
                        {"cublaslt", cuda::cublaslt_status().message}};
    int failures = gpu_probe::run_checks(options, report);
    if (!skip_gap_meter) gpu_probe::run_gap_meter(options, report);
    report["allocator"] = nlohmann::json::parse(device.allocator().snapshot_json())["stats"];
    report["failures"] = failures;
    write_json(json_path, report);
    std::printf("%s: %d check(s) failed\n", failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::printf("kiln-gpu-probe: error: %s\n", e.what());
    report["error"] = e.what();
    write_json(json_path, report);
    return 1;
  }
}
