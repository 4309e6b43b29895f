// The scoreboard: per kernel launched, what it moved and computed and how long it took. Why: bytes
// moved and kernels launched are the numbers every Kiln executor (eager, compiled, GPU) reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct KernelRecord {
  std::string name;                      // "add", "fused_exp_mul_add", "matmul(openblas)"
  std::vector<std::string> source_ops;   // the graph ops it came from
  int64_t bytes_read = 0;                // operand bytes read from main memory (each once)
  int64_t bytes_written = 0;             // result bytes written
  double flops = 0;                      // arithmetic operations
  double time_us = 0;                    // kernel wall time
};

class Scoreboard {
 public:
  void add(KernelRecord r) { kernels_.push_back(std::move(r)); }
  void add_dispatch_us(double us) { dispatch_us_ += us; }
  void clear() { kernels_.clear(); dispatch_us_ = 0; }

  const std::vector<KernelRecord>& kernels() const { return kernels_; }
  int64_t kernels_launched() const { return int64_t(kernels_.size()); }
  int64_t bytes_read() const;
  int64_t bytes_written() const;
  int64_t bytes_moved() const { return bytes_read() + bytes_written(); }
  double flops() const;
  double kernel_us() const;
  double dispatch_us() const { return dispatch_us_; }  // host time outside kernels

  std::string table(const std::string& title = "") const;  // human-readable
  std::string to_json() const;                              // for tools

 private:
  std::vector<KernelRecord> kernels_;
  double dispatch_us_ = 0;
};

}  // namespace kiln
