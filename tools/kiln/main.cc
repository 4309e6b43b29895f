// Entry point of the `kiln` CLI: parses the command line and runs one subcommand. Why: keep this
// file thin; each subcommand lives in its own cmd_*.cc.
#include <iostream>
#include <string>
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

  std::vector<kiln::cli::Command> commands = {
      kiln::cli::add_run_command(app),       kiln::cli::add_compile_command(app),
      kiln::cli::add_explain_command(app),   kiln::cli::add_gap_command(app),
      kiln::cli::add_calibrate_command(app), kiln::cli::add_dump_command(app),
      kiln::cli::add_ops_command(app)};

  // CLI11 would only say "a subcommand is required"; name the word it did not know.
  std::string names;
  bool known = false;
  for (const auto& command : commands) {
    names += (names.empty() ? "" : ", ") + command.app->get_name();
    known |= argc > 1 && command.app->get_name() == argv[1];
  }
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::cerr << "kiln: error: unknown command '" << argv[1] << "' (commands: " << names << "; see kiln --help)\n";
    return 2;
  }
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
  } catch (const std::exception& e) {  // filesystem and JSON errors carry their own detail
    std::cerr << "kiln: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
