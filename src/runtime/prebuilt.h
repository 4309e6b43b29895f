// Lowering a graph onto an already-built shared object. Why: ahead-of-time artefacts
// (src/runtime/aot.cc) re-run the deterministic lowering at load time but must never invoke the
// system compiler; the generated source is handed to a check (its hash against the manifest)
// before the shared object is loaded.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "kiln/compile.h"

namespace kiln::runtime {

// Lowers `g` exactly as kiln::compile does, calls check_source(generated source) (which throws to
// refuse), then dlopens so_path and binds the kernels. CompileStats::compile_ms stays 0.
std::shared_ptr<Executable> link_prebuilt(const Graph& g, const CompileOptions& options, const std::string& so_path,
                                          const std::function<void(const std::string&)>& check_source);

}  // namespace kiln::runtime
