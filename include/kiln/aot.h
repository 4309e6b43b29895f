// Ahead-of-time compiled artefacts: a directory holding the compiled shared object, the optimised
// graph (text IR with its weights in a binary file) and a JSON manifest. Why: a deployed model
// must load and run without a C++ compiler on the machine (`kiln compile` / `kiln run DIR`).
#pragma once

#include <memory>
#include <string>

#include "kiln/compile.h"
#include "kiln/graph.h"

namespace kiln {

// The manifest's format version; load_compiled refuses other versions.
constexpr int kArtefactFormatVersion = 1;

// Writes `dir` (created if missing; existing artefact files are replaced): kernels.so, kernels.cc
// (the generated source, for reading), graph.kir, weights.bin and manifest.json. `exe` must be
// kiln::compile(graph, options). Loads the written artefact once to prove it round-trips; throws
// kiln::Error naming the file on any failure.
void save_compiled(const Graph& graph, const Executable& exe, const std::string& dir,
                   const CompileOptions& options = {});

// A loaded artefact: the executable, the graph it runs (for input names and types) and the
// manifest text.
struct CompiledArtefact {
  std::shared_ptr<Executable> executable;
  std::shared_ptr<const Graph> graph;
  std::string manifest_json;
};

// Loads an artefact without running the system compiler: parses the graph, re-runs the
// deterministic lowering, checks the generated source's hash and the shared object's checksum
// against the manifest, then dlopens the artefact's kernels.so. Throws kiln::Error naming the
// file and the mismatch for missing, corrupt or mismatched artefacts. num_threads: as in
// CompileOptions (a run-time setting, not part of the artefact).
CompiledArtefact load_compiled_artefact(const std::string& dir, int num_threads = 0);
std::shared_ptr<Executable> load_compiled(const std::string& dir, int num_threads = 0);

// True when `path` is a directory with a manifest.json (what `kiln run PATH` treats as an artefact).
bool is_compiled_artefact(const std::string& path);

}  // namespace kiln
