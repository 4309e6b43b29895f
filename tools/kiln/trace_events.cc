// Chrome trace-event recording (see trace_events.h).
#include "trace_events.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "kiln/error.h"

namespace kiln::cli {

namespace {
TraceRecorder* g_active = nullptr;
constexpr int kHostTid = 1, kKernelTid = 2;
}  // namespace

TraceRecorder::TraceRecorder() : origin_(std::chrono::steady_clock::now()) {
  for (auto [tid, name] : {std::pair{kHostTid, "host phases"}, std::pair{kKernelTid, "kernels"}})
    events_.push_back(nlohmann::json{{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", tid},
                                     {"args", {{"name", name}}}}.dump());
}

double TraceRecorder::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin_).count();
}

void TraceRecorder::phase(const std::string& name, double start_us, double dur_us) {
  events_.push_back(nlohmann::json{{"name", name}, {"cat", "phase"}, {"ph", "X"}, {"pid", 1}, {"tid", kHostTid},
                                   {"ts", start_us}, {"dur", dur_us}}.dump());
}

void TraceRecorder::kernels(const Scoreboard& sb, double start_us, const std::string& label) {
  double gap = sb.kernels().empty() ? 0 : sb.dispatch_us() / double(sb.kernels().size());
  double t = start_us;
  for (const KernelRecord& k : sb.kernels()) {
    events_.push_back(nlohmann::json{{"name", k.name},
                                     {"cat", "kernel"},
                                     {"ph", "X"},
                                     {"pid", 1},
                                     {"tid", kKernelTid},
                                     {"ts", t},
                                     {"dur", k.time_us},
                                     {"args",
                                      {{"run", label},
                                       {"source_ops", k.source_ops},
                                       {"bytes_read", k.bytes_read},
                                       {"bytes_written", k.bytes_written},
                                       {"flops", k.flops}}}}.dump());
    t += k.time_us + gap;
  }
}

void TraceRecorder::write(const std::string& path) const {
  std::ofstream out(path, std::ios::trunc);
  KILN_CHECK(bool(out), "--profile: cannot write ", path);
  out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  for (size_t i = 0; i < events_.size(); ++i) out << events_[i] << (i + 1 < events_.size() ? ",\n" : "\n");
  out << "]}\n";
  out.close();
  KILN_CHECK(out.good(), "--profile: cannot write ", path);
}

TraceRecorder* active_trace() { return g_active; }
void set_active_trace(TraceRecorder* recorder) { g_active = recorder; }

PhaseScope::PhaseScope(std::string name) : name_(std::move(name)) {
  if (g_active) start_ = g_active->now_us();
}
PhaseScope::~PhaseScope() {
  if (g_active) g_active->phase(name_, start_, g_active->now_us() - start_);
}

}  // namespace kiln::cli
