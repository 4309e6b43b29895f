// The child side of onnx_conformance --compile: one batch of tests loaded, checked against the
// interpreter, optimised and compiled for the target, run and judged (compiled_verdicts.h). Why:
// kept apart from the forking parent so what one test goes through reads in one place.
//
// On the CPU all of a batch's graphs go into one translation unit (kiln::compile_batch: one
// compiler start-up per batch). On CUDA each graph is compiled on its own (NVRTC) after the
// target's refusal check; this process is a forked child, so it is the first to touch CUDA.
#include <memory>

#include "compiled_verdicts.h"
#include "kiln/compile.h"
#include "kiln/interp.h"
#include "kiln/onnx.h"
#include "kiln/passes.h"
#include "kiln/target.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace conformance {

namespace {

struct Item {
  fs::path dir;
  std::vector<DataSet> sets;
  std::vector<std::shared_ptr<Executable>> exes;
};

void emit(std::ostream& out, const fs::path& dir, const std::string& status, std::string message,
          const std::string& frozen = "") {
  // A compiler failure's message starts with the command line: keep the compiler's first error.
  size_t err = message.find(" error: ");
  if (err != std::string::npos) message = "C++ compiler:" + message.substr(err);
  out << dir.filename().string() << '\t' << status << '\t' << one_line(message) << '\t' << one_line(frozen) << '\n'
      << std::flush;
}

// The inputs the importer froze into constants, over all data sets ("" when none).
std::string frozen_inputs(const std::vector<DataSet>& sets) {
  std::string names;
  for (const DataSet& ds : sets)
    for (const std::string& n : ds.frozen_inputs)
      if ((" " + names + " ").find(" " + n + " ") == std::string::npos) names += (names.empty() ? "" : " ") + n;
  return names;
}

CompileOptions compile_options() {
  CompileOptions co;
  co.num_threads = 2;
  co.parallel_threshold = 64;  // the suite's tensors are tiny: still exercise the parallel loops
  return co;
}

// Empty when the interpreter passes every data set of the loaded test; else its verdict line.
std::string interpreter_verdict(Item& it) {
  try {
    std::string problem;
    it.sets = load_test(it.dir, &problem);
    if (!problem.empty()) return "FAIL: " + problem;
    for (const DataSet& ds : it.sets) {
      std::string diff = compare_outputs(interp::run(*ds.graph, ds.feed), ds);
      if (!diff.empty()) return "FAIL: " + diff;
    }
  } catch (const UnsupportedError& e) {
    return std::string("UNSUPPORTED: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("FAIL: ") + e.what();
  }
  return "";
}

// Compiles every data set's graph of `items`: the CPU batches them, CUDA compiles one by one.
// Tests that fail to compile (or that the target refuses) get their verdict and are dropped.
void compile_items(std::vector<Item>& items, const Target& target, std::ostream& out) {
  std::vector<std::shared_ptr<Executable>> batch;
  if (target.kind() == TargetKind::Cpu) {
    std::vector<const Graph*> graphs;
    for (auto& it : items)
      for (auto& ds : it.sets) graphs.push_back(ds.graph.get());
    try {
      batch = compile_batch(graphs, compile_options());
    } catch (const std::exception&) {
      batch.clear();  // find the culprit: compile each test on its own
    }
  }
  CompileForOptions as_given;
  as_given.optimize = false;  // optimised already, with the target's pipeline
  size_t next = 0;
  std::vector<Item> compiled;
  for (auto& it : items) {
    try {
      std::string refusal;
      for (auto& ds : it.sets) {
        if (!batch.empty()) {
          it.exes.push_back(batch[next++]);
          continue;
        }
        refusal = target.refusal(*ds.graph);
        if (!refusal.empty()) break;
        it.exes.push_back(compile_for(*ds.graph, target, compile_options(), as_given));
      }
      if (!refusal.empty()) {
        emit(out, it.dir, kUnsupportedOnTarget, refusal, frozen_inputs(it.sets));
        continue;
      }
    } catch (const std::exception& e) {
      emit(out, it.dir, kFail, std::string("compile: ") + e.what(), frozen_inputs(it.sets));
      continue;
    }
    compiled.push_back(std::move(it));
  }
  items = std::move(compiled);
}

// Runs a compiled test's data sets, compares, and writes its verdict.
void run_item(Item& it, std::ostream& out) {
  std::string diff;
  int kernels = 0, library = 0, library_steps = 0;
  std::vector<std::string> fallbacks;
  try {
    for (size_t i = 0; diff.empty() && i < it.sets.size(); ++i) {
      diff = compare_outputs(it.exes[i]->run(it.sets[i].feed), it.sets[i]);
      kernels += it.exes[i]->stats().kernels_generated;
      library += it.exes[i]->stats().library_calls;
      RunStats ran = it.exes[i]->last_run();
      library_steps += ran.library_steps;
      fallbacks.insert(fallbacks.end(), ran.reference_fallbacks.begin(), ran.reference_fallbacks.end());
    }
  } catch (const std::exception& e) {
    diff = std::string("run: ") + e.what();
  }
  if (!diff.empty()) {
    emit(out, it.dir, kFail, diff, frozen_inputs(it.sets));
    return;
  }
  std::string detail = str(kernels, " generated kernels, ", library, " library calls");
  if (!fallbacks.empty()) {
    detail += str(", ", fallbacks.size(), " on the reference kernel:");
    for (const std::string& op : fallbacks) detail += " " + op;
  }
  emit(out, it.dir, passing_verdict(kernels, library_steps, int(fallbacks.size())), detail, frozen_inputs(it.sets));
}

}  // namespace

void run_batch(const std::vector<fs::path>& dirs, const CompiledOptions& opts, std::ostream& out) {
  std::unique_ptr<Target> cuda;
  const Target* target = &cpu_target();
  if (opts.target == "cuda") target = (cuda = cuda_target()).get();
  std::vector<Item> items;
  for (const auto& dir : dirs) {
    Item it;
    it.dir = dir;
    std::string verdict = interpreter_verdict(it);
    if (!verdict.empty()) {
      emit(out, dir, kNotRun, "interpreter: " + verdict);
      continue;
    }
    try {
      for (auto& ds : it.sets) optimize(*ds.graph, target->optimize_options());  // the target's pipeline
    } catch (const std::exception& e) {
      emit(out, dir, kFail, std::string("optimize: ") + e.what(), frozen_inputs(it.sets));
      continue;
    }
    items.push_back(std::move(it));
  }
  compile_items(items, *target, out);
  for (auto& it : items) run_item(it, out);
}

}  // namespace conformance
