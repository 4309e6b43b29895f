// `kiln calibrate`: measures this machine's ceilings and caches them (see calibrate.h).
#include <iostream>
#include <memory>

#include "kiln/ceilings.h"
#include "commands.h"
#include "progress.h"

namespace kiln::cli {

Command add_calibrate_command(CLI::App& parent) {
  struct Options {
    bool force = false, quick = false, json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* app = parent.add_subcommand(
      "calibrate", "Measure this machine's ceilings (copy bandwidth, peak sgemm rate, launch overhead of a "
                   "compiled kernel) and cache them; explain and gap read the cache");
  app->add_flag("--force", o->force, "Re-measure even when the cache has ceilings for this thread count");
  app->add_flag("--quick", o->quick, "Small sizes (what other commands do on demand)");
  app->add_flag("--json", o->json, "Print the ceilings as JSON");
  return Command{app, [o](const GlobalOptions&) {
                   bool had = cached_ceilings().has_value();
                   Ceilings c = had && !o->force ? *cached_ceilings() : load_or_measure_ceilings(true, !o->quick, progress);
                   progress_done();
                   if (o->json) {
                     std::cout << c.to_json();
                     return 0;
                   }
                   std::printf("machine ceilings (%s, %s, %d threads) in %s\n",
                               had && !o->force ? "cached; --force re-measures" : "measured now",
                               c.quick ? "quick" : "full", c.threads, ceilings_path().c_str());
                   std::printf("  copy bandwidth   %10.2f GB/s  (memcpy of %.0f MB, read + write)\n", c.copy_gbps,
                               double(c.copy_bytes) / 1e6);
                   std::printf("  sgemm rate       %10.2f GFLOP/s (OpenBLAS, n = %d)\n", c.gemm_gflops, c.gemm_n);
                   std::printf("  kernel launch    %10.2f us  (one-element generated kernel)\n", c.launch_us);
                   std::printf("  run overhead     %10.2f us  (whole Executable::run of that kernel)\n",
                               c.run_overhead_us);
                   return 0;
                 }};
}

}  // namespace kiln::cli
