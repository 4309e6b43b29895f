// Shared pieces of kiln-gpu-probe: the JSON report and the check/measurement entry points.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/elementwise_chain.h"

namespace kiln::gpu_probe {

struct ProbeOptions {
  int repeats = 30;          // timed runs per variant; the median is reported
  int warmups = 3;
  int64_t gap_elements = int64_t(8) * 2048 * 4096;  // 134 MB of bf16
  bool quick = false;        // fewer sizes and repeats, for a smoke run
};

// Runs the correctness checks; records each under report["checks"]; returns the failures.
int run_checks(const ProbeOptions& options, nlohmann::json& report);
// Runs the gap-meter measurement; fills report["gap_meter"] and prints the table.
void run_gap_meter(const ProbeOptions& options, nlohmann::json& report);

// The chain of the first `n` gap-meter steps (cheap ops that keep values bounded).
std::vector<cuda::ChainStep> gap_chain(int n);

// Median of event-timed runs of `work` on `stream`, in microseconds.
double median_us(const cuda::Stream& stream, int warmups, int repeats, const std::function<void()>& work);

}  // namespace kiln::gpu_probe
