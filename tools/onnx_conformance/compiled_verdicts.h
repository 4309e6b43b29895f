// onnx_conformance --compile's verdicts and the pieces its files share: what a batch child writes
// per test, and what the parent reports and checks. Why: a compiled run that matches the
// reference proves something about the compiler only when generated code computed the result;
// the verdict says which code did (docs/testing.md).
#pragma once

#include <filesystem>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "conformance.h"

namespace conformance {

// The verdict words, one per test (the status column of the batch files and the report).
inline constexpr const char* kCompiled = "compiled";          // passed; ran at least one generated kernel
inline constexpr const char* kLibraryOnly = "library-only";   // passed; no generated kernel, some fast library kernel
inline constexpr const char* kReferenceOnly = "reference-only";  // passed; every step ran the reference kernel
inline constexpr const char* kFolded = "folded";              // passed; no kernel and no library call ran
inline constexpr const char* kUnsupportedOnTarget = "unsupported-on-target";  // the target refuses the graph
inline constexpr const char* kFail = "fail";                  // the interpreter passes, the compiled run does not
inline constexpr const char* kNotRun = "not-run";             // the interpreter does not pass: nothing to hold to

struct Verdict {
  std::string status, message;
  std::string frozen_inputs;  // data inputs frozen into constants (they reach a shape operand)
};

// The verdict of a compiled run that matched: by what its steps were, summed over the data sets.
// `library_steps` counts library and host steps; `fallbacks` of those ran no fast kernel.
std::string passing_verdict(int generated_kernels, int library_steps, int fallbacks);
bool is_compiled_pass(const std::string& status);  // any of the four passing verdicts

// Child side (compiled_batch.cc): runs one batch of tests in this process and writes one line per
// test, "name<TAB>status<TAB>message<TAB>frozen inputs", to `out`.
void run_batch(const std::vector<std::filesystem::path>& dirs, const CompiledOptions& opts, std::ostream& out);

// Parent side (compiled_report.cc): writes the report and the console summary, checks the
// exceptions and the per-test floor; the process exit code.
int report_compiled(const std::map<std::string, Verdict>& verdicts, const std::vector<std::filesystem::path>& tests,
                    const CompiledOptions& opts, double seconds);

}  // namespace conformance
