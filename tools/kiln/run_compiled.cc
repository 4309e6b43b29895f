// Optimise + compile + run helpers for `kiln run` (the demo and ONNX models share them).
#include "run_compiled.h"

#include <cstdio>

#include "kiln/error.h"
#include "progress.h"
#include "trace_events.h"

namespace kiln::cli {

CompiledGraph optimize_and_compile(const Graph& g, const ExecOptions& options) {
  CompiledGraph out;
  CompileOptions copts;
  copts.num_threads = options.threads;
  CompileForOptions how;
  how.optimize = options.optimize;
  OptimizeReport report;
  how.report = &report;
  progress("compiling");
  TraceRecorder* trace = active_trace();
  double t0 = trace ? trace->now_us() : 0;
  out.executable = compile_for(g, *options.target, copts, how);
  out.optimized = std::move(report.optimized);
  out.pass_stats = std::move(report.pass_stats);
  progress_done();
  if (trace) {  // the compile is one call: its stages laid out from its stats, after the optimizer's
    const CompileStats& s = out.executable->stats();
    if (options.optimize) trace->phase("optimize", t0, out.pass_stats.total_seconds * 1e6);
    t0 += out.pass_stats.total_seconds * 1e6;
    trace->phase("lower", t0, s.lower_ms * 1e3);
    trace->phase(s.cache_hit ? "compile (cache hit)" : "compile", t0 + s.lower_ms * 1e3, s.compile_ms * 1e3);
    trace->phase("load", t0 + (s.lower_ms + s.compile_ms) * 1e3, s.load_ms * 1e3);
  }
  return out;
}

std::vector<HostTensor> run_measured(Executable& exe, const std::vector<HostTensor>& inputs, Scoreboard& sb) {
  {
    PhaseScope phase("run (warm-up)");
    exe.run(inputs, nullptr);  // warm up: page faults, thread pools
  }
  TraceRecorder* trace = active_trace();
  double t0 = trace ? trace->now_us() : 0;
  std::vector<HostTensor> out = exe.run(inputs, &sb);
  if (trace) {
    trace->phase("run", t0, trace->now_us() - t0);
    trace->kernels(sb, t0, "run");
  }
  return out;
}

std::string versus_line(const Scoreboard& eager, const Scoreboard& compiled) {
  auto part = [](const char* label, const Scoreboard& sb) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s: %lld kernels, %.3f MB moved, %.3f ms", label,
                  static_cast<long long>(sb.kernels_launched()), double(sb.bytes_moved()) / 1e6,
                  (sb.kernel_us() + sb.dispatch_us()) / 1e3);
    return std::string(buf);
  };
  std::string line = part("eager", eager) + "  |  " + part("compiled", compiled);
  if (compiled.bytes_moved() > 0 && compiled.kernels_launched() > 0) {
    char buf[120];
    std::snprintf(buf, sizeof buf, "  |  %.2fx fewer kernels, %.2fx fewer bytes",
                  double(eager.kernels_launched()) / double(compiled.kernels_launched()),
                  double(eager.bytes_moved()) / double(compiled.bytes_moved()));
    line += buf;
  }
  return line;
}

}  // namespace kiln::cli
