// The scoreboard's totals, its table for people and its JSON for tools (fields documented in
// docs/scoreboard.md). Why: every executor reports the same numbers in the same two forms.
#include "kiln/scoreboard.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "kiln/error.h"

namespace kiln {

int64_t Scoreboard::bytes_read() const {
  int64_t total = 0;
  for (const KernelRecord& r : kernels_) total += r.bytes_read;
  return total;
}

int64_t Scoreboard::bytes_written() const {
  int64_t total = 0;
  for (const KernelRecord& r : kernels_) total += r.bytes_written;
  return total;
}

double Scoreboard::flops() const {
  double total = 0;
  for (const KernelRecord& r : kernels_) total += r.flops;
  return total;
}

double Scoreboard::kernel_us() const {
  double total = 0;
  for (const KernelRecord& r : kernels_) total += r.time_us;
  return total;
}

namespace {

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// FLOPs are whole numbers in practice but doubles in the record; print them without exponent.
std::string whole(double v) { return fixed(v, 0); }

}  // namespace

std::string Scoreboard::table(const std::string& title) const {
  const std::vector<std::string> header = {"#", "kernel", "source ops", "bytes read",
                                           "bytes written", "FLOPs", "time us"};
  const std::vector<bool> right_aligned = {true, false, false, true, true, true, true};
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < kernels_.size(); ++i) {
    const KernelRecord& r = kernels_[i];
    rows.push_back({std::to_string(i), r.name, join(r.source_ops, ","), std::to_string(r.bytes_read),
                    std::to_string(r.bytes_written), whole(r.flops), fixed(r.time_us, 1)});
  }
  rows.push_back({"", "total", str(kernels_launched(), " kernels"), std::to_string(bytes_read()),
                  std::to_string(bytes_written()), whole(flops()), fixed(kernel_us(), 1)});

  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  auto format_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      std::string pad(width[c] - row[c].size(), ' ');
      line += (c ? "  " : "") + (right_aligned[c] ? pad + row[c] : row[c] + pad);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line + "\n";
  };
  size_t total_width = 0;
  for (size_t w : width) total_width += w + 2;
  const std::string rule(total_width - 2, '-');

  std::string out;
  if (!title.empty()) out += title + "\n";
  out += format_row(header) + rule + "\n";
  for (size_t i = 0; i + 1 < rows.size(); ++i) out += format_row(rows[i]);
  out += rule + "\n" + format_row(rows.back());
  out += str("kernels launched: ", kernels_launched(), "  bytes moved: ", bytes_moved(),
             "  FLOPs: ", whole(flops()), "\n");
  out += str("time: kernel ", fixed(kernel_us(), 1), " us + dispatch ", fixed(dispatch_us(), 1),
             " us = ", fixed(kernel_us() + dispatch_us(), 1), " us\n");
  return out;
}

std::string Scoreboard::to_json() const {
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelRecord& r : kernels_)
    kernels.push_back({{"name", r.name},
                       {"source_ops", r.source_ops},
                       {"bytes_read", r.bytes_read},
                       {"bytes_written", r.bytes_written},
                       {"flops", r.flops},
                       {"time_us", r.time_us}});
  nlohmann::json totals = {{"kernels_launched", kernels_launched()},
                           {"bytes_read", bytes_read()},
                           {"bytes_written", bytes_written()},
                           {"bytes_moved", bytes_moved()},
                           {"flops", flops()},
                           {"kernel_us", kernel_us()},
                           {"dispatch_us", dispatch_us()}};
  return nlohmann::json{{"kernels", kernels}, {"totals", totals}}.dump(2);
}

}  // namespace kiln
