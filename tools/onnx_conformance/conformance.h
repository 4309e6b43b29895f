// Shared pieces of onnx_conformance: loading one ONNX backend test (model + data sets) and
// comparing at ONNX's tolerances. Why: the interpreter mode and the --compile mode must load and
// judge tests identically, so a difference between them is the compiler's, not the harness's.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kiln/graph.h"
#include "kiln/host_tensor.h"

namespace conformance {

// One test_data_set_N: the graph imported with its data inputs as graph inputs, the feed in
// graph-input order, and the expected outputs with their names. Inputs whose values the importer
// needs (they reach a shape operand: a Reshape's shape, Slice's starts, TopK's k...) are frozen
// into constants and named in `frozen_inputs`.
struct DataSet {
  std::unique_ptr<kiln::Graph> graph;
  std::vector<std::string> frozen_inputs;
  std::vector<kiln::HostTensor> feed;
  std::vector<kiln::HostTensor> expected;
  std::vector<std::string> output_names;
};

// Loads every data set of the test in `dir`. Throws kiln::Error / UnsupportedError like the
// importer; returns a non-empty `problem` (a FAIL message) for malformed test folders.
std::vector<DataSet> load_test(const std::filesystem::path& dir, std::string* problem);

// ONNX's default check: |actual - expected| <= atol + rtol * |expected|, NaNs must match.
// Empty when equal; else a message naming the output and the first bad element.
std::string compare(const kiln::HostTensor& got, const kiln::HostTensor& want, const std::string& name);

// Compares all outputs of one data set; empty when all match.
std::string compare_outputs(const std::vector<kiln::HostTensor>& got, const DataSet& ds);

// Verdict lines: "PASS", "FAIL: msg", "UNSUPPORTED: msg".
std::string run_interpreted(const std::filesystem::path& dir);

// --compile mode: each test the interpreter passes goes through the target's optimizer and
// compiler (on the CPU batched into one translation unit per `batch` tests) and is compared at
// the same tolerances; each pass says what it ran (compiled_verdicts.h).
struct CompiledOptions {
  int jobs = 2, timeout_s = 20, batch = 64;
  bool verbose = false;
  std::string target = "cpu";  // "cpu" or "cuda"
  std::string report;
  // Allowed compiled failures ("test_name reason" lines); when set, any other failure fails the run.
  std::string exceptions_file;
  // The per-test floor: tests that must stay generated-kernel passes (check_passing_list).
  std::string passing_file, write_passing_file;
  bool filtered = false;  // a --filter run: only the listed tests it ran are checked
};
int run_compiled_mode(const std::vector<std::filesystem::path>& tests, const CompiledOptions& opts);

std::string one_line(std::string s);

// Checks that every test named in the list at `path` (one name a line, # comments) is in
// `passing`; 1 naming the tests that left it, 0 otherwise (new passes are reported, not failed).
// With `ran` non-null (a --filter run), only the listed tests among those are checked. With
// `write_path`, first writes `passing` there. An empty `path` checks nothing.
int check_passing_list(const std::string& path, const std::vector<std::string>& passing,
                       const std::vector<std::string>* ran, const std::string& write_path);

}  // namespace conformance
