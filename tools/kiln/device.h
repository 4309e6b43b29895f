// Which device a command runs on, and the hook through which the CUDA backend plugs in. Why: the
// CLI's commands stay device-agnostic; a CUDA build registers its backend once (see
// register_cuda_backend) and `--device cuda` starts working in `kiln run` and `kiln gap`.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kiln/compile.h"
#include "kiln/graph.h"
#include "kiln/scoreboard.h"

namespace kiln::cli {

enum class DeviceKind { Cpu, Cuda };

// "cpu" or "cuda"; throws kiln::Error naming anything else.
DeviceKind parse_device(const std::string& name);

// What the CUDA backend provides to the CLI. Inputs and outputs are host tensors; the backend
// uploads/downloads and records device kernel times (events) in the scoreboard.
struct DeviceBackend {
  std::string name;  // "cuda: NVIDIA H200 (sm_90)"
  // Compiles a graph for the device (the fused path).
  std::function<std::shared_ptr<Executable>(const Graph&, const CompileOptions&)> compile;
  // Runs a graph one kernel per op (the eager baseline); records into sb when non-null.
  std::function<std::vector<HostTensor>(const Graph&, const std::vector<HostTensor>&, Scoreboard*)> run_eager;
  // Device-to-device copy bandwidth of `bytes`, GB/s (read + write counted), for the gap meter.
  std::function<double(int64_t bytes)> copy_gbps;
  // High-level ops the optimizer keeps whole for `compile` (its own kernels run them).
  std::set<Op> native_ops;
};

// Called once by the CUDA backend (e.g. from a static registrar in a file compiled only with
// -DKILN_CUDA). Later calls replace the earlier one.
void register_cuda_backend(DeviceBackend backend);

// The backend for `kind`; nullptr for the CPU (commands use the CPU path directly). Throws
// kiln::Error with a clear message when CUDA was asked for but no backend is registered.
const DeviceBackend* backend_for(DeviceKind kind);

}  // namespace kiln::cli
