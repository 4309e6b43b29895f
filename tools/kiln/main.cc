// Entry point of the `kiln` CLI: parses the command line and runs one subcommand. Why: keep this
// file thin; each subcommand lives in its own cmd_*.cc.
#include <iostream>
#include <vector>

#include "commands.h"
#include "kernels/cpu/eager.h"
#include "kiln/error.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln: an ML compiler and runtime (capture, optimise, lower, generate kernels)"};
  app.fallthrough();  // global options may also follow the subcommand: `kiln run --threads 4`
  app.require_subcommand(1);
  kiln::cli::GlobalOptions global;
  app.add_option("--threads", global.threads, "CPU threads for kernels (0: the OpenMP default)")
      ->check(CLI::NonNegativeNumber);

  std::vector<kiln::cli::Command> commands = {kiln::cli::add_run_command(app)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    kiln::eager::set_num_threads(global.threads);
    for (const auto& command : commands)
      if (command.app->parsed()) return command.run(global);
  } catch (const kiln::Error& e) {
    std::cerr << "kiln: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
