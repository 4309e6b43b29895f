// The `kiln` CLI's subcommands. Why: main.cc only wires them together, so each later command
// (compile, gap, explain, dump) is one new file with one add_*_command function.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace kiln::cli {

// Options every subcommand sees (set on the top-level app).
struct GlobalOptions {
  int threads = 0;  // 0: the OpenMP default
};

// A registered subcommand: its CLI11 app, and what to run when it was chosen. Returns the exit code.
struct Command {
  CLI::App* app = nullptr;
  std::function<int(const GlobalOptions&)> run;
};

// `kiln run`: runs a model eagerly and traced, checks they agree, prints the scoreboard.
Command add_run_command(CLI::App& parent);
// `kiln compile`: ahead-of-time artefact (cmd_compile.cc).
Command add_compile_command(CLI::App& parent);
// `kiln gap`: the gap meter (cmd_gap.cc).
Command add_gap_command(CLI::App& parent);
// `kiln calibrate`: this machine's ceilings (cmd_calibrate.cc).
Command add_calibrate_command(CLI::App& parent);
// `kiln explain`: per-kernel roofline report and fusion decisions (cmd_explain.cc).
Command add_explain_command(CLI::App& parent);
// `kiln dump`: the IR after every stage (cmd_dump.cc).
Command add_dump_command(CLI::App& parent);
// `kiln ops`: each target's decision for every op (cmd_ops.cc).
Command add_ops_command(CLI::App& parent);

}  // namespace kiln::cli
