// `kiln run`: with no model, runs the built-in demo (an MLP and a transformer block) eagerly and
// through trace + interpreter, reports how well they agree, and prints the eager scoreboard.
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "kernels/cpu/eager.h"
#include "kiln/demo.h"
#include "kiln/error.h"

namespace kiln::cli {

namespace {
struct RunOptions {
  bool json = false;
  uint64_t seed = 0;
  double atol = 1e-4;
  double rtol = 1e-3;
};

int print_text(const std::vector<demo::DemoResult>& results, const GlobalOptions& global) {
  std::cout << "kiln run: built-in demo (no model given), " << eager::num_threads()
            << " threads" << (global.threads == 0 ? " (default)" : "") << "\n\n";
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
  }
  std::cout << (all_ok ? "OK: eager and traced results agree for every demo model\n"
                       : "MISMATCH: eager and traced results differ (see above)\n");
  return all_ok ? 0 : 1;
}

int print_json(const std::vector<demo::DemoResult>& results) {
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
  }
  out["ok"] = all_ok;
  std::cout << out.dump(2) << "\n";
  return all_ok ? 0 : 1;
}
}  // namespace

Command add_run_command(CLI::App& parent) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* app = parent.add_subcommand(
      "run", "Run a model eagerly and traced, check they agree, print the scoreboard. With no "
             "model: the built-in demo (an MLP and a transformer block).");
  app->add_flag("--json", options->json, "Print the results and scoreboards as JSON");
  app->add_option("--seed", options->seed, "Seed of the demo's weights and inputs");
  app->add_option("--atol", options->atol, "Absolute tolerance of the eager/traced comparison");
  app->add_option("--rtol", options->rtol, "Relative tolerance of the eager/traced comparison");
  return Command{app, [options](const GlobalOptions& global) {
                   demo::DemoOptions demo_options;
                   demo_options.seed = options->seed;
                   demo_options.atol = options->atol;
                   demo_options.rtol = options->rtol;
                   std::vector<demo::DemoResult> results = demo::run_demo(demo_options);
                   return options->json ? print_json(results) : print_text(results, global);
                 }};
}

}  // namespace kiln::cli
