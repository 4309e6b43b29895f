// The CPU (or registered device) gap meter: for elementwise chains of n ops, eager (n kernels,
// n round trips through memory) against compiled (one fused kernel), next to the copy bandwidth
// measured in the same run. Why: the gap fusion closes, in kernels, bytes and time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/target.h"

namespace kiln::cli {

struct GapRow {
  int chain = 0;
  int64_t eager_kernels = 0, compiled_kernels = 0;
  int64_t eager_bytes = 0, compiled_bytes = 0;
  double eager_us = 0, compiled_us = 0;       // medians of whole runs
  double speedup = 0;                          // eager_us / compiled_us
  double eager_gbps = 0, compiled_gbps = 0;    // bytes moved / time
  double eager_pct_copy = 0, compiled_pct_copy = 0;  // of the copy bandwidth
};

struct GapResult {
  std::string device = "cpu";
  int64_t tensor_bytes = 0;
  int repeats = 0;
  double copy_gbps = 0;
  std::vector<GapRow> rows;
  std::string to_text() const;
  std::string to_json() const;
  std::string to_svg() const;  // self-contained chart
};

// "134MB", "1.5GiB", "4096" (bytes); throws kiln::Error on anything else.
int64_t parse_size(const std::string& text);
// "1,2,4,8"; throws on a non-positive or malformed entry.
std::vector<int> parse_chain(const std::string& text);

// backend: null for the CPU.
GapResult run_gap_meter(const std::vector<int>& chains, int64_t tensor_bytes, int repeats, const Target& target);

}  // namespace kiln::cli
