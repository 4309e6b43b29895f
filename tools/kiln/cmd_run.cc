// `kiln run`: with no model, runs the built-in demo (an MLP and a transformer block) eagerly, through
// trace + interpreter, and optimised + compiled; reports how well they agree and the scoreboards.
// With an ONNX model, hands over to run_model (cmd_run_model.cc).
#include <iostream>
#include <memory>
#include <tuple>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "run_compiled.h"
#include "run_model.h"
#include "kiln/cuda.h"
#include "kiln/target.h"
#include "trace_events.h"
#include "kernels/cpu/eager.h"
#include "kiln/demo.h"
#include "kiln/error.h"

namespace kiln::cli {

namespace {
struct RunOptions {
  std::string model;
  bool eager_only = false;
  bool no_optimize = false;
  ModelRunOptions model_options;
  bool json = false;
  uint64_t seed = 0;
  double atol = -1;  // < 0: demo::default_tolerances of the output's dtype (demo::tolerances_for)
  double rtol = -1;
  std::string device = "cpu";
  bool cuda_depthwise = false;  // --cuda-depthwise
  std::string profile;  // Chrome trace-event file
  const Target* target = &cpu_target();  // from --device
};

// The compiled side of one demo model: optimise + compile the traced graph, run it on the first
// input, and compare with the interpreter's output.
struct CompiledDemo {
  Scoreboard scoreboard;
  demo::Agreement agreement;
  PassStats pass_stats;
  CompileStats compile_stats;
};

CompiledDemo compile_demo(const demo::DemoResult& r, const RunOptions& options, const GlobalOptions& global) {
  ExecOptions exec;
  exec.optimize = !options.no_optimize;
  exec.threads = global.threads;
  exec.target = options.target;
  CompiledGraph compiled = optimize_and_compile(*r.graph, exec);
  CompiledDemo out;
  std::vector<HostTensor> outs = run_measured(*compiled.executable, {r.first_input}, out.scoreboard);
  const auto [atol, rtol] = demo::tolerances_for(outs.at(0).dtype(), options.atol, options.rtol);
  out.agreement = demo::compare(r.reference_output, outs.at(0), atol, rtol);
  out.pass_stats = compiled.pass_stats;
  out.compile_stats = compiled.executable->stats();
  return out;
}

int print_text(const std::vector<demo::DemoResult>& results, const std::vector<CompiledDemo>& compiled,
               const GlobalOptions& global) {
  std::cout << "kiln run: built-in demo (no model given); eager threads: " << eager::num_threads()
            << (global.threads == 0 ? " (default)" : "") << "\n\n";
  bool all_ok = true;
  for (const demo::DemoResult& r : results) {
    std::string shapes;
    for (const std::string& s : r.input_shapes) shapes += (shapes.empty() ? "" : ", ") + s;
    std::cout << r.model << ": eager vs traced+interpreter on " << shapes << "\n"
              << "  " << r.agreement.to_string() << "\n"
              << "  traces: " << r.num_traces << " (" << r.graph_summary << ")"
              << (r.num_traces == 1 ? "" : "  <- expected 1: the dynamic dims should not re-trace")
              << "\n\n"
              << r.eager_scoreboard.table(str(r.model, ": eager scoreboard at ", r.input_shapes.at(0)))
              << "\n";
    all_ok = all_ok && r.ok();
    if (&r - results.data() < std::ptrdiff_t(compiled.size())) {
      const CompiledDemo& c = compiled[size_t(&r - results.data())];
      std::cout << r.model << ": optimised (" << c.pass_stats.nodes_before << " -> "
                << c.pass_stats.nodes_after << " nodes) + compiled ("
                << c.compile_stats.kernels_generated << " generated kernels, "
                << c.compile_stats.library_calls << " library calls, "
                << (c.compile_stats.cache_hit ? "cache hit" : str(c.compile_stats.compile_ms, " ms in the C++ compiler"))
                << ") vs interpreter on " << r.input_shapes.at(0) << "\n  " << c.agreement.to_string() << "\n\n"
                << c.scoreboard.table(str(r.model, ": compiled scoreboard at ", r.input_shapes.at(0))) << "\n"
                << r.model << ": " << versus_line(r.eager_scoreboard, c.scoreboard) << "\n\n";
      all_ok = all_ok && c.agreement.within_tolerance;
    }
  }
  std::cout << (all_ok ? "OK: eager, traced and compiled results agree for every demo model\n"
                       : "MISMATCH: results differ (see above)\n");
  return all_ok ? 0 : 1;
}

int print_json(const std::vector<demo::DemoResult>& results, const std::vector<CompiledDemo>& compiled) {
  nlohmann::json out;
  out["threads"] = eager::num_threads();
  out["models"] = nlohmann::json::array();
  bool all_ok = true;
  for (const demo::DemoResult& r : results) {
    out["models"].push_back({{"model", r.model},
                             {"input_shapes", r.input_shapes},
                             {"max_abs_error", r.agreement.max_abs_error},
                             {"max_rel_error", r.agreement.max_rel_error},
                             {"within_tolerance", r.agreement.within_tolerance},
                             {"num_traces", r.num_traces},
                             {"ok", r.ok()},
                             {"eager_scoreboard", nlohmann::json::parse(r.eager_scoreboard.to_json())}});
    all_ok = all_ok && r.ok();
    size_t i = size_t(&r - results.data());
    if (i < compiled.size()) {
      const CompiledDemo& c = compiled[i];
      auto& m = out["models"].back();
      m["compiled_max_abs_error"] = c.agreement.max_abs_error;
      m["compiled_within_tolerance"] = c.agreement.within_tolerance;
      m["compiled_scoreboard"] = nlohmann::json::parse(c.scoreboard.to_json());
      all_ok = all_ok && c.agreement.within_tolerance;
    }
  }
  out["ok"] = all_ok;
  std::cout << out.dump(2) << "\n";
  return all_ok ? 0 : 1;
}
int run_command(const RunOptions& options, const GlobalOptions& global);
}  // namespace

Command add_run_command(CLI::App& parent) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* app = parent.add_subcommand(
      "run", "Run a model (an .onnx file) optimised and compiled, or eagerly, and print its outputs "
             "and the scoreboard. With no model: the built-in demo (an MLP and a transformer block) "
             "run eagerly, traced + interpreted and compiled, checked to agree.");
  app->add_option("model", options->model, "An ONNX model (.onnx) or a `kiln compile` artefact directory; none: the built-in demo");
  app->add_flag("--eager", options->eager_only, "One kernel per op (the baseline); no compilation");
  app->add_flag("--compile", [options](int64_t) { options->eager_only = false; },
                "Optimise and compile (the default)");
  app->add_flag("--no-optimize", options->no_optimize, "Skip the graph optimizer before compiling");
  add_model_options(*app, options->model_options);
  app->add_flag("--json", options->json, "Print the results and scoreboards as JSON");
  app->add_option("--seed", options->seed, "Seed of the demo's weights and inputs");
  app->add_option("--atol", options->atol,
                  "Absolute tolerance of the comparisons (default by the output's dtype: 1e-4 for f32/f64, 1e-2 f16, "
                  "3e-2 bf16)");
  app->add_option("--rtol", options->rtol,
                  "Relative tolerance of the comparisons (default by the output's dtype: 1e-3 for f32/f64, 1e-2 f16, "
                  "3e-2 bf16)");
  app->add_option("--device", options->device, "Where to run: cpu (default) or cuda (when this build has it)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app->add_flag("--cuda-depthwise", options->cuda_depthwise,
                "With --device cuda: depthwise convs on Kiln's register-tiled kernels, channels-last where that "
                "removes permutes (CudaCompileOptions::depthwise_kernel; not yet the default: docs/cuda.md)");
  app->add_option("--profile", options->profile,
                  "Write a Chrome trace-event file (Perfetto, chrome://tracing): host phases and kernels");
  return Command{app, [options](const GlobalOptions& global) {
                   options->target = &target_named(options->device);
                   static std::unique_ptr<Target> own_depthwise;
                   if (options->cuda_depthwise) {
                     KILN_CHECK(options->device == "cuda", "--cuda-depthwise needs --device cuda");
                     CudaCompileOptions cuda;
                     cuda.depthwise_kernel = true;
                     own_depthwise = cuda_target(cuda);
                     options->target = own_depthwise.get();
                   }
                   TraceRecorder recorder;
                   if (!options->profile.empty()) set_active_trace(&recorder);
                   int rc = run_command(*options, global);
                   set_active_trace(nullptr);
                   if (!options->profile.empty()) recorder.write(options->profile);
                   return rc;
                 }};
}

namespace {
// The run itself, between --device/--profile set-up and writing the trace.
int run_command(const RunOptions& options, const GlobalOptions& global) {
  if (!options.model.empty()) {
    ExecOptions exec;
    exec.compile = !options.eager_only;
    exec.optimize = !options.no_optimize;
    exec.threads = global.threads;
    exec.target = options.target;
    ModelRunOptions model_options = options.model_options;
    model_options.atol = options.atol, model_options.rtol = options.rtol;
    return run_model(options.model, model_options, exec, options.json);
  }
  demo::DemoOptions demo_options;
  demo_options.seed = options.seed;
  // The demo's models are f32.
  std::tie(demo_options.atol, demo_options.rtol) = demo::tolerances_for(DType::F32, options.atol, options.rtol);
  std::vector<demo::DemoResult> results;
  {
    PhaseScope phase("capture (trace + eager demo)");
    results = demo::run_demo(demo_options);
  }
  std::vector<CompiledDemo> compiled;
  if (!options.eager_only)
    for (const auto& r : results) compiled.push_back(compile_demo(r, options, global));
  return options.json ? print_json(results, compiled) : print_text(results, compiled, global);
}
}  // namespace

}  // namespace kiln::cli
