// The gap meter (see gap_meter.h).
#include "gap_meter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "kiln/ceilings.h"
#include "kernels/cpu/eager.h"
#include "kiln/error.h"
#include "progress.h"
#include "trace_events.h"

namespace kiln::cli {

namespace {
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// x -> op_1 -> ... -> op_n, cycling mul(0.5), add(0.25), relu, mul(2), add(-0.25), max(-1), mul(0.75), add(0.125).
std::unique_ptr<Graph> chain_graph(int n, int64_t elements) {
  auto g = std::make_unique<Graph>(str("chain", n));
  Value* y = g->add_input("x", TensorType{DType::F32, {elements}, Device::CPU});
  for (int i = 0; i < n; ++i) {
    switch (i % 8) {
      case 0: y = g->add(Op::Mul, {y, g->scalar(DType::F32, 0.5)}); break;
      case 1: y = g->add(Op::Add, {y, g->scalar(DType::F32, 0.25)}); break;
      case 2: y = g->add(Op::Relu, {y}); break;
      case 3: y = g->add(Op::Mul, {y, g->scalar(DType::F32, 2.0)}); break;
      case 4: y = g->add(Op::Add, {y, g->scalar(DType::F32, -0.25)}); break;
      case 5: y = g->add(Op::Maximum, {y, g->scalar(DType::F32, -1.0)}); break;
      case 6: y = g->add(Op::Mul, {y, g->scalar(DType::F32, 0.75)}); break;
      default: y = g->add(Op::Add, {y, g->scalar(DType::F32, 0.125)}); break;
    }
  }
  g->set_outputs({y});
  return g;
}

// Median wall time of run(sb) over repeats after one warm-up; the last run's scoreboard in *last.
// With device_time, the time of a run is the sum of its kernels' device times (CUDA events) from
// the scoreboard: host<->device copies of the inputs and outputs are not the chain's work.
template <typename Fn>
double time_runs(int repeats, Scoreboard* last, const std::string& label, Fn run, bool device_time = false) {
  run(nullptr);
  std::vector<double> us;
  TraceRecorder* trace = active_trace();
  for (int i = 0; i < repeats; ++i) {
    last->clear();
    double t_trace = trace ? trace->now_us() : 0;
    const auto t0 = Clock::now();
    run(last);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    if (device_time) {
      double kernels_us = 0;
      for (const KernelRecord& k : last->kernels()) kernels_us += k.time_us;
      us.back() = kernels_us;
    }
    if (trace) {
      trace->phase(label, t_trace, us.back());
      trace->kernels(*last, t_trace, label);
    }
  }
  return median(us);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
}  // namespace

int64_t parse_size(const std::string& text) {
  double value = 0;
  char unit[16] = {0};
  int n = std::sscanf(text.c_str(), "%lf%15s", &value, unit);
  KILN_CHECK(n >= 1 && value > 0 && std::isfinite(value), "--size: '", text, "' is not a size (e.g. 134MB, 1MiB, 4096)");
  std::string u = unit;
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  double scale = 0;
  if (u.empty() || u == "b") scale = 1;
  else if (u == "kb") scale = 1e3;
  else if (u == "mb") scale = 1e6;
  else if (u == "gb") scale = 1e9;
  else if (u == "kib") scale = 1024.0;
  else if (u == "mib") scale = 1024.0 * 1024;
  else if (u == "gib") scale = 1024.0 * 1024 * 1024;
  KILN_CHECK(scale > 0, "--size: unknown unit '", unit, "' in '", text, "' (B, KB, MB, GB, KiB, MiB, GiB)");
  int64_t bytes = int64_t(value * scale);
  KILN_CHECK(bytes >= 64 && bytes <= (int64_t(64) << 30), "--size ", text, ": must be between 64 B and 64 GiB");
  return bytes;
}

std::vector<int> parse_chain(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      int v = std::stoi(item, &used);
      KILN_CHECK(used == item.size() && v >= 1 && v <= 64, "");
      out.push_back(v);
    } catch (const std::exception&) {
      throw Error(str("--chain: '", item, "' is not a chain length between 1 and 64 (e.g. --chain 1,2,4,8)"));
    }
  }
  KILN_CHECK(!out.empty(), "--chain: empty list (e.g. --chain 1,2,4,8)");
  return out;
}

GapResult run_gap_meter(const std::vector<int>& chains, int64_t tensor_bytes, int repeats, const Target& target) {
  KILN_CHECK(repeats >= 1, "--repeats must be at least 1");
  GapResult r;
  r.device = std::string(target.name());
  const bool on_device = target.kind() != TargetKind::Cpu;  // times from device events
  const int64_t elements = tensor_bytes / 4;
  r.tensor_bytes = elements * 4;
  r.repeats = repeats;
  progress("measuring copy bandwidth");
  r.copy_gbps = target.copy_gbps(r.tensor_bytes, repeats);
  std::vector<HostTensor> in = {HostTensor::random(DType::F32, {elements}, 7, -2, 2)};
  for (int n : chains) {
    auto g = chain_graph(n, elements);
    GapRow row;
    row.chain = n;
    Scoreboard eager_sb, compiled_sb;
    progress(str("chain ", n, ": eager"));
    row.eager_us = time_runs(repeats, &eager_sb, str("eager chain ", n), [&](Scoreboard* sb) {
      return target.run_eager(*g, in, sb);
    }, on_device);
    progress(str("chain ", n, ": compiling"));
    std::shared_ptr<Executable> exe;
    {
      PhaseScope phase(str("compile chain ", n));
      exe = target.compile(*g, CompileOptions{});
    }
    progress(str("chain ", n, ": compiled"));
    row.compiled_us = time_runs(repeats, &compiled_sb, str("compiled chain ", n), [&](Scoreboard* sb) {
      return exe->run(in, sb);
    }, on_device);
    // Eager also records the scalar constants it materialises; they are not launches over the data.
    for (const KernelRecord& k : eager_sb.kernels()) {
      if (k.source_ops.size() == 1 && k.source_ops[0] == op_name(Op::Constant)) continue;
      ++row.eager_kernels;
      row.eager_bytes += k.bytes_read + k.bytes_written;
    }
    row.compiled_kernels = compiled_sb.kernels_launched();
    row.compiled_bytes = compiled_sb.bytes_moved();
    row.speedup = row.eager_us / row.compiled_us;
    row.eager_gbps = double(row.eager_bytes) / (row.eager_us * 1e3);
    row.compiled_gbps = double(row.compiled_bytes) / (row.compiled_us * 1e3);
    row.eager_pct_copy = 100 * row.eager_gbps / r.copy_gbps;
    row.compiled_pct_copy = 100 * row.compiled_gbps / r.copy_gbps;
    r.rows.push_back(row);
  }
  progress_done();
  return r;
}

std::string GapResult::to_text() const {
  std::ostringstream os;
  os << "kiln gap (" << device << "): elementwise chains on f32[" << tensor_bytes / 4 << "] ("
     << fmt("%.1f", double(tensor_bytes) / 1e6) << " MB), median of " << repeats << " runs; copy bandwidth "
     << fmt("%.1f", copy_gbps) << " GB/s measured now\n";
  char line[256];
  std::snprintf(line, sizeof line, "%5s | %7s %10s %10s %6s | %7s %10s %10s %6s | %7s\n", "chain", "kernels", "MB moved",
                "ms", "%copy", "kernels", "MB moved", "ms", "%copy", "speedup");
  os << "      |               eager                 |              compiled               |\n" << line;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%5d | %7lld %10.1f %10.3f %5.0f%% | %7lld %10.1f %10.3f %5.0f%% | %6.2fx\n",
                  r.chain, static_cast<long long>(r.eager_kernels), double(r.eager_bytes) / 1e6, r.eager_us / 1e3,
                  r.eager_pct_copy, static_cast<long long>(r.compiled_kernels), double(r.compiled_bytes) / 1e6,
                  r.compiled_us / 1e3, r.compiled_pct_copy, r.speedup);
    os << line;
  }
  return os.str();
}

std::string GapResult::to_json() const {
  nlohmann::json j;
  j["device"] = device;
  j["tensor_bytes"] = tensor_bytes;
  j["repeats"] = repeats;
  j["copy_gbps"] = copy_gbps;
  j["rows"] = nlohmann::json::array();
  for (const auto& r : rows)
    j["rows"].push_back({{"chain", r.chain},
                         {"eager", {{"kernels", r.eager_kernels}, {"bytes_moved", r.eager_bytes}, {"time_us", r.eager_us},
                                    {"gbps", r.eager_gbps}, {"percent_of_copy", r.eager_pct_copy}}},
                         {"compiled", {{"kernels", r.compiled_kernels}, {"bytes_moved", r.compiled_bytes},
                                       {"time_us", r.compiled_us}, {"gbps", r.compiled_gbps},
                                       {"percent_of_copy", r.compiled_pct_copy}}},
                         {"speedup", r.speedup}});
  return j.dump(2) + "\n";
}

std::string GapResult::to_svg() const {
  // Two panels: time per chain (eager vs compiled bars, speed-up above) and % of copy bandwidth.
  const int pw = 380, ph = 240, top = 60, left = 60, gapx = 90;
  const int width = left + 2 * pw + gapx + 30, height = top + ph + 70;
  double tmax = 0;
  for (const auto& r : rows) tmax = std::max({tmax, r.eager_us, r.compiled_us});
  tmax = tmax > 0 ? tmax * 1.15 : 1;
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<text x=\"" << left << "\" y=\"22\" font-size=\"15\" font-weight=\"bold\">kiln gap meter (" << device
     << "): elementwise chains on " << fmt("%.0f", double(tensor_bytes) / 1e6) << " MB of f32</text>\n"
     << "<text x=\"" << left << "\" y=\"40\" fill=\"#555\">median of " << repeats << " runs; copy bandwidth "
     << fmt("%.1f", copy_gbps) << " GB/s measured in the same run</text>\n";
  auto panel = [&](int x0, const std::string& title, const std::string& unit, double vmax, auto eager_v, auto comp_v,
                   auto label) {
    os << "<text x=\"" << x0 << "\" y=\"" << top - 6 << "\" font-weight=\"bold\">" << title << "</text>\n";
    os << "<line x1=\"" << x0 << "\" y1=\"" << top + ph << "\" x2=\"" << x0 + pw << "\" y2=\"" << top + ph
       << "\" stroke=\"#333\"/>\n<line x1=\"" << x0 << "\" y1=\"" << top << "\" x2=\"" << x0 << "\" y2=\"" << top + ph
       << "\" stroke=\"#333\"/>\n";
    for (int t = 0; t <= 4; ++t) {
      double v = vmax * t / 4;
      int y = top + ph - int(ph * t / 4);
      os << "<line x1=\"" << x0 << "\" y1=\"" << y << "\" x2=\"" << x0 + pw << "\" y2=\"" << y
         << "\" stroke=\"#eee\"/><text x=\"" << x0 - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\" fill=\"#555\">"
         << fmt(vmax >= 10 ? "%.0f" : "%.2f", v) << "</text>\n";
    }
    os << "<text x=\"" << x0 - 45 << "\" y=\"" << top + ph / 2 << "\" transform=\"rotate(-90 " << x0 - 45 << " "
       << top + ph / 2 << ")\" text-anchor=\"middle\" fill=\"#555\">" << unit << "</text>\n";
    const double slot = double(pw) / double(std::max<size_t>(rows.size(), 1));
    const double bw = slot * 0.32;
    for (size_t i = 0; i < rows.size(); ++i) {
      double cx = x0 + slot * (double(i) + 0.5);
      double he = ph * std::min(1.0, eager_v(rows[i]) / vmax), hc = ph * std::min(1.0, comp_v(rows[i]) / vmax);
      os << "<rect x=\"" << cx - bw << "\" y=\"" << top + ph - he << "\" width=\"" << bw << "\" height=\"" << he
         << "\" fill=\"#9e9e9e\"><title>eager: " << fmt("%.2f", eager_v(rows[i])) << "</title></rect>\n"
         << "<rect x=\"" << cx << "\" y=\"" << top + ph - hc << "\" width=\"" << bw << "\" height=\"" << hc
         << "\" fill=\"#1f77b4\"><title>compiled: " << fmt("%.2f", comp_v(rows[i])) << "</title></rect>\n"
         << "<text x=\"" << cx << "\" y=\"" << top + ph + 16 << "\" text-anchor=\"middle\">" << rows[i].chain
         << "</text>\n<text x=\"" << cx << "\" y=\"" << top + ph - std::max(he, hc) - 5
         << "\" text-anchor=\"middle\" fill=\"#333\">" << label(rows[i]) << "</text>\n";
    }
    os << "<text x=\"" << x0 + pw / 2 << "\" y=\"" << top + ph + 34 << "\" text-anchor=\"middle\" fill=\"#555\">"
       << "ops in the chain</text>\n";
  };
  panel(left, "time per run", "ms", tmax / 1e3, [](const GapRow& r) { return r.eager_us / 1e3; },
        [](const GapRow& r) { return r.compiled_us / 1e3; }, [](const GapRow& r) { return fmt("%.1fx", r.speedup); });
  panel(left + pw + gapx, "% of copy bandwidth reached", "%", 100.0, [](const GapRow& r) { return r.eager_pct_copy; },
        [](const GapRow& r) { return r.compiled_pct_copy; },
        [](const GapRow& r) { return fmt("%.0f%%", r.compiled_pct_copy); });
  int ly = height - 14;
  os << "<rect x=\"" << left << "\" y=\"" << ly - 10 << "\" width=\"12\" height=\"12\" fill=\"#9e9e9e\"/><text x=\""
     << left + 16 << "\" y=\"" << ly << "\">eager (one kernel per op)</text>\n<rect x=\"" << left + 200 << "\" y=\""
     << ly - 10 << "\" width=\"12\" height=\"12\" fill=\"#1f77b4\"/><text x=\"" << left + 216 << "\" y=\"" << ly
     << "\">compiled (fused)</text>\n</svg>\n";
  return os.str();
}

}  // namespace kiln::cli
