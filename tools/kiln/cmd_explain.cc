// `kiln explain [MODEL]`: what the compiler did and how close each kernel is to this machine's
// ceilings (see explain_report.h); text, --json or --html.
#include <fstream>
#include <iostream>
#include <memory>

#include "commands.h"
#include "explain_report.h"
#include "kiln/ceilings.h"
#include "kiln/aot.h"
#include "kiln/error.h"
#include "model_source.h"
#include "progress.h"
#include "run_compiled.h"

namespace kiln::cli {

Command add_explain_command(CLI::App& parent) {
  struct Options {
    std::string model, html;
    std::vector<std::string> dims;
    bool json = false, no_optimize = false;
    int repeats = 5;
    uint64_t seed = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* app = parent.add_subcommand(
      "explain", "Per kernel: source ops, bytes, FLOPs, arithmetic intensity, measured time, roofline bound and "
                 "binding regime; every fusion decision and refusal; where the time goes");
  app->add_option("model", o->model, "An ONNX model or a `kiln compile` artefact; none: the built-in transformer block");
  app->add_flag("--json", o->json, "Print the report as JSON (fields: docs/cli.md)");
  app->add_option("--html", o->html, "Also write a self-contained HTML page (graph + per-kernel bars) to FILE");
  app->add_option("--repeats", o->repeats, "Measured runs; times are medians")->check(CLI::PositiveNumber);
  app->add_option("--dim", o->dims, "NAME=VALUE: size of a symbolic dim for the random inputs (default 1)");
  app->add_option("--seed", o->seed, "Seed of the random inputs");
  app->add_flag("--no-optimize", o->no_optimize, "Skip the graph optimizer before compiling");
  return Command{app, [o](const GlobalOptions& global) {
                   std::map<std::string, int64_t> dims = parse_dims(o->dims);
                   std::shared_ptr<Executable> exe;
                   std::vector<HostTensor> inputs;
                   std::string label;
                   if (!o->model.empty() && is_compiled_artefact(o->model)) {
                     CompiledArtefact a = load_compiled_artefact(o->model, global.threads);
                     exe = a.executable;
                     inputs = random_inputs(*a.graph, dims, o->seed);
                     label = o->model + " (artefact)";
                   } else {
                     ModelSource m = load_model_source(o->model, dims, o->seed);
                     ExecOptions exec;
                     exec.optimize = !o->no_optimize;
                     exec.threads = global.threads;
                     exe = optimize_and_compile(*m.graph, exec).executable;
                     inputs = std::move(m.inputs);
                     label = m.label;
                   }
                   Ceilings ceilings = load_or_measure_ceilings(false, false, progress);  // as cpu_target().ceilings(), with progress
                   progress_done();
                   progress("measuring kernels");
                   ExplainReport report = explain_executable(label, *exe, inputs, ceilings, o->repeats);
                   progress_done();
                   if (!o->html.empty()) {
                     std::ofstream out(o->html, std::ios::trunc);
                     out << report.to_html();
                     out.close();
                     KILN_CHECK(out.good(), "--html: cannot write ", o->html);
                   }
                   std::cout << (o->json ? report.to_json() : report.to_text());
                   return 0;
                 }};
}

}  // namespace kiln::cli
