// Chrome trace-event output for `--profile FILE`: one slice per host phase (import, optimize,
// lower, compile, load, run) and one per kernel from the scoreboard. Why: opens in Perfetto or
// chrome://tracing, so a run's time can be seen rather than summed.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "kiln/scoreboard.h"

namespace kiln::cli {

class TraceRecorder {
 public:
  TraceRecorder();
  double now_us() const;  // since the recorder was made
  // A host phase slice on the "host" track.
  void phase(const std::string& name, double start_us, double dur_us);
  // The scoreboard's kernels laid end to end from start_us on the "kernels" track; the host time
  // between kernels (dispatch_us) is spread evenly between them, since records hold durations only.
  void kernels(const Scoreboard& sb, double start_us, const std::string& label);
  // Writes {"traceEvents": [...], "displayTimeUnit": "ms"}; throws kiln::Error when it cannot.
  void write(const std::string& path) const;
  size_t size() const { return events_.size(); }

 private:
  std::chrono::steady_clock::time_point origin_;
  std::vector<std::string> events_;  // serialised events
};

// The recorder of this process's --profile, or nullptr when none was asked for.
TraceRecorder* active_trace();
void set_active_trace(TraceRecorder* recorder);

// Records a host phase from construction to destruction when a trace is active.
class PhaseScope {
 public:
  explicit PhaseScope(std::string name);
  ~PhaseScope();

 private:
  std::string name_;
  double start_ = 0;
};

}  // namespace kiln::cli
