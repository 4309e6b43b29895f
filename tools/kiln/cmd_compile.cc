// `kiln compile [MODEL] -o OUT`: ahead-of-time compilation into an artefact directory that
// `kiln run OUT` and kiln::load_compiled (include/kiln/aot.h) load without a C++ compiler.
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.h"
#include "kiln/aot.h"
#include "kiln/error.h"
#include "model_source.h"
#include "run_compiled.h"

namespace kiln::cli {

Command add_compile_command(CLI::App& parent) {
  struct Options {
    std::string model, out;
    std::vector<std::string> dims;
    bool no_optimize = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* app = parent.add_subcommand(
      "compile", "Compile a model ahead of time into a directory (kernels.so, graph.kir, weights.bin, "
                 "manifest.json) that `kiln run DIR` loads without a C++ compiler");
  app->add_option("model", o->model, "An ONNX model (.onnx); none: the built-in transformer block");
  app->add_option("-o,--output", o->out, "The artefact directory to write")->required();
  app->add_option("--dim", o->dims, "NAME=VALUE: fix a symbolic dim at import (others stay symbolic)");
  app->add_flag("--no-optimize", o->no_optimize, "Skip the graph optimizer before compiling");
  return Command{app, [o](const GlobalOptions& global) {
                   KILN_CHECK(!std::filesystem::exists(o->out) || std::filesystem::is_directory(o->out),
                              "-o ", o->out, ": exists and is not a directory");
                   ModelSource m = load_model_source(o->model, parse_dims(o->dims), 0);
                   ExecOptions exec;
                   exec.optimize = !o->no_optimize;
                   exec.threads = global.threads;
                   CompiledGraph c = optimize_and_compile(*m.graph, exec);
                   save_compiled(*c.optimized, *c.executable, o->out, CompileOptions{});
                   const CompileStats& s = c.executable->stats();
                   std::cout << "kiln compile: " << m.label << " -> " << o->out << "\n  "
                             << s.kernels_generated << " generated kernels, " << s.library_calls
                             << " library calls; cache key " << s.cache_key << "\n  inputs:";
                   for (const Value* v : c.optimized->inputs()) std::cout << " " << v->name << ":" << v->type.to_string();
                   std::cout << "\n  files:";
                   for (const char* f : {"manifest.json", "kernels.so", "graph.kir", "weights.bin", "kernels.cc"})
                     if (std::filesystem::exists(std::filesystem::path(o->out) / f))
                       std::cout << " " << f << " (" << std::filesystem::file_size(std::filesystem::path(o->out) / f)
                                 << " B)";
                   std::cout << "\n  run it with: kiln run " << o->out << "\n";
                   return 0;
                 }};
}

}  // namespace kiln::cli
