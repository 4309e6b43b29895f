// Compiling a graph for a target and running it from Python, plus the ahead-of-time artefact
// (kiln compile's format). Why: every Python entry point (kiln.load, the torch backend,
// compile_exported) ends in one compiled Executable; this is its one binding.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <string>

#include "kiln/compile.h"
#include "kiln/graph.h"

namespace kiln::py {

namespace nb = nanobind;

struct PyExecutable {
  std::shared_ptr<Executable> exe;
  std::shared_ptr<const Graph> graph;  // the graph it runs (optimised): names and types of its inputs
  std::string device;                  // "cpu" or "cuda"
};

void bind_executable(nb::module_& m);

}  // namespace kiln::py
