// `kiln gap`: the gap meter (see gap_meter.h): a table, optional --json, an SVG chart, a trace.
#include <fstream>
#include <iostream>
#include <memory>

#include "commands.h"
#include "gap_meter.h"
#include "kiln/error.h"
#include "trace_events.h"

namespace kiln::cli {

Command add_gap_command(CLI::App& parent) {
  struct Options {
    std::string chain = "1,2,4,8", size = "134MB", device = "cpu", svg, profile;
    bool json = false;
    int repeats = 5;
  };
  auto o = std::make_shared<Options>();
  CLI::App* app = parent.add_subcommand(
      "gap", "The gap meter: elementwise chains of n ops, eager (n kernels) vs compiled (one fused kernel): "
             "kernels, bytes moved, time, speed-up, and % of the copy bandwidth measured in the same run");
  app->add_option("--chain", o->chain, "Chain lengths, comma separated")->capture_default_str();
  app->add_option("--size", o->size, "Bytes per tensor (B, KB, MB, GB, KiB, MiB, GiB)")->capture_default_str();
  app->add_option("--repeats", o->repeats, "Timed runs per variant (the median is reported)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app->add_option("--device", o->device, "cpu or cuda (when this build has it)")->check(CLI::IsMember({"cpu", "cuda"}));
  app->add_option("--svg", o->svg, "Write the chart as a self-contained SVG to FILE");
  app->add_flag("--json", o->json, "Print the results as JSON instead of the table (fields: docs/cli.md)");
  app->add_option("--profile", o->profile, "Write a Chrome trace-event file with every timed run's kernels");
  return Command{app, [o](const GlobalOptions&) {
                   const Target& target = target_named(o->device);
                   std::vector<int> chains = parse_chain(o->chain);
                   int64_t bytes = parse_size(o->size);
                   TraceRecorder recorder;
                   if (!o->profile.empty()) set_active_trace(&recorder);
                   GapResult r = run_gap_meter(chains, bytes, o->repeats, target);
                   set_active_trace(nullptr);
                   if (!o->profile.empty()) recorder.write(o->profile);
                   if (!o->svg.empty()) {
                     std::ofstream out(o->svg, std::ios::trunc);
                     out << r.to_svg();
                     out.close();
                     KILN_CHECK(out.good(), "--svg: cannot write ", o->svg);
                   }
                   std::cout << (o->json ? r.to_json() : r.to_text());
                   return 0;
                 }};
}

}  // namespace kiln::cli
