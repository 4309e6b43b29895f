// onnx_conformance --compile: every test the interpreter passes also runs through kiln::optimize +
// kiln::compile and is compared with ONNX's reference outputs at the same tolerances. Why: the
// issue's bar is "what the interpreter gets right, the compiled path gets right too"; the suite
// covers op/attribute corners our own samples miss.
//
// Tests run in forked children, `batch` tests per child, all of a child's graphs in one
// translation unit (kiln::compile_batch: one compiler start-up per batch). A child that crashes
// or times out has its tests rerun one per child, so one bad test costs only its own verdict.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "conformance.h"
#include "kiln/compile.h"
#include "kiln/interp.h"
#include "kiln/onnx.h"
#include "kiln/passes.h"
#include "kiln/target.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace conformance {

namespace {

// One verdict: "pass", "fail" (interpreter passes, compiled does not), "not-run" (the
// interpreter does not pass, so there is nothing to hold the compiler to).
struct Verdict {
  std::string status, message;
};

struct Item {
  fs::path dir;
  std::vector<DataSet> sets;
  std::vector<std::shared_ptr<Executable>> exes;
  bool done = false;
};

void emit(std::ostream& out, const fs::path& dir, const std::string& status, std::string message) {
  // A compiler failure's message starts with the command line: keep the compiler's first error.
  size_t err = message.find(" error: ");
  if (err != std::string::npos) message = "C++ compiler:" + message.substr(err);
  out << dir.filename().string() << '\t' << status << '\t' << one_line(message) << '\n' << std::flush;
}

CompileOptions compile_options() {
  CompileOptions co;
  co.num_threads = 2;
  co.parallel_threshold = 64;  // the suite's tensors are tiny: still exercise the parallel loops
  return co;
}

// Runs a batch in this process and writes one verdict line per test to `out`.
void run_batch(const std::vector<fs::path>& dirs, std::ostream& out) {
  std::vector<Item> items;
  for (const auto& dir : dirs) {
    Item it;
    it.dir = dir;
    std::string verdict = "PASS";
    try {
      std::string problem;
      it.sets = load_test(dir, &problem);
      if (!problem.empty()) verdict = "FAIL: " + problem;
      for (size_t i = 0; verdict == "PASS" && i < it.sets.size(); ++i) {
        std::string diff = compare_outputs(interp::run(*it.sets[i].graph, it.sets[i].feed), it.sets[i]);
        if (!diff.empty()) verdict = "FAIL: " + diff;
      }
    } catch (const UnsupportedError& e) {
      verdict = std::string("UNSUPPORTED: ") + e.what();
    } catch (const std::exception& e) {
      verdict = std::string("FAIL: ") + e.what();
    }
    if (verdict != "PASS") {
      emit(out, dir, "not-run", "interpreter: " + verdict);
      continue;
    }
    try {
      for (auto& ds : it.sets) optimize(*ds.graph, cpu_target().optimize_options());  // the CPU target's pipeline
    } catch (const std::exception& e) {
      emit(out, dir, "fail", std::string("optimize: ") + e.what());
      continue;
    }
    items.push_back(std::move(it));
  }
  std::vector<const Graph*> graphs;
  for (auto& it : items)
    for (auto& ds : it.sets) graphs.push_back(ds.graph.get());
  std::vector<std::shared_ptr<Executable>> exes;
  try {
    exes = compile_batch(graphs, compile_options());
  } catch (const std::exception&) {
    exes.clear();  // find the culprit: compile each test on its own
  }
  size_t next = 0;
  for (auto& it : items) {
    try {
      for (auto& ds : it.sets) it.exes.push_back(exes.empty() ? compile(*ds.graph, compile_options()) : exes[next++]);
    } catch (const std::exception& e) {
      emit(out, it.dir, "fail", std::string("compile: ") + e.what());
      continue;
    }
    std::string diff;
    int kernels = 0, library = 0;
    try {
      for (size_t i = 0; diff.empty() && i < it.sets.size(); ++i) {
        diff = compare_outputs(it.exes[i]->run(it.sets[i].feed), it.sets[i]);
        kernels += it.exes[i]->stats().kernels_generated;
        library += it.exes[i]->stats().library_calls;
      }
    } catch (const std::exception& e) {
      diff = std::string("run: ") + e.what();
    }
    if (diff.empty()) emit(out, it.dir, "pass", str(kernels, " generated kernels, ", library, " library calls"));
    else emit(out, it.dir, "fail", diff);
  }
}

// Forks one child per batch (at most `jobs` at once); returns verdicts by test name. Tests of a
// batch whose child died without a verdict are returned in `orphans`.
std::map<std::string, Verdict> run_batches(const std::vector<std::vector<fs::path>>& batches,
                                           const CompiledOptions& opts, std::vector<fs::path>* orphans,
                                           std::map<std::string, std::string>* deaths) {
  struct Child { pid_t pid; size_t index; std::string file; };
  std::map<std::string, Verdict> verdicts;
  std::vector<Child> running;
  size_t next = 0;
  while (next < batches.size() || !running.empty()) {
    while (next < batches.size() && int(running.size()) < opts.jobs) {
      std::string file = str((fs::temp_directory_path() / "kiln-conformance-").string(), getpid(), "-", next, ".tsv");
      pid_t pid = fork();
      if (pid == 0) {
        alarm(unsigned(opts.timeout_s * int(batches[next].size()) + 120));  // + the compiler run
        std::ofstream out(file);
        run_batch(batches[next], out);
        out.close();
        _exit(0);
      }
      running.push_back({pid, next++, file});
    }
    int status;
    pid_t done = waitpid(-1, &status, 0);
    for (size_t i = 0; i < running.size(); ++i) {
      if (running[i].pid != done) continue;
      Child ch = running[i];
      running.erase(running.begin() + long(i));
      std::set<std::string> seen;
      std::ifstream in(ch.file);
      std::string line;
      while (std::getline(in, line)) {
        size_t a = line.find('\t'), b = line.find('\t', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        std::string name = line.substr(0, a);
        verdicts[name] = {line.substr(a + 1, b - a - 1), line.substr(b + 1)};
        seen.insert(name);
        if (opts.verbose) std::cerr << verdicts[name].status << "  " << name << "  " << verdicts[name].message << "\n";
      }
      fs::remove(ch.file);
      std::string death = WIFSIGNALED(status)
                              ? (WTERMSIG(status) == SIGALRM ? std::string("timed out") : str("crashed with signal ", WTERMSIG(status)))
                              : str("exited with status ", WEXITSTATUS(status), " before its verdict");
      for (const auto& t : batches[ch.index])
        if (!seen.count(t.filename().string())) {
          orphans->push_back(t);
          (*deaths)[t.filename().string()] = death;
        }
      break;
    }
  }
  return verdicts;
}

}  // namespace

int run_compiled_mode(const std::vector<fs::path>& tests, const CompiledOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<fs::path>> batches;
  for (size_t i = 0; i < tests.size(); i += size_t(opts.batch))
    batches.emplace_back(tests.begin() + long(i), tests.begin() + long(std::min(tests.size(), i + size_t(opts.batch))));
  std::vector<fs::path> orphans, still_orphans;
  std::map<std::string, std::string> deaths;
  std::map<std::string, Verdict> verdicts = run_batches(batches, opts, &orphans, &deaths);
  if (!orphans.empty()) {
    std::vector<std::vector<fs::path>> singles;
    for (const auto& t : orphans) singles.push_back({t});
    for (auto& [name, v] : run_batches(singles, opts, &still_orphans, &deaths)) verdicts[name] = v;
    for (const auto& t : still_orphans)
      verdicts[t.filename().string()] = {"fail", "the test's process " + deaths[t.filename().string()]};
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  int pass = 0, fail = 0, not_run = 0;
  for (const auto& [name, v] : verdicts) (v.status == "pass" ? pass : v.status == "fail" ? fail : not_run)++;
  int with_kernels = 0;
  for (const auto& [name, v] : verdicts) with_kernels += v.status == "pass" && v.message.rfind("0 generated", 0) != 0;
  if (!opts.report.empty()) {
    std::ofstream md(opts.report);
    md << "# ONNX backend node tests, compiled\n\n"
       << "Generated by `onnx_conformance --compile` (tools/onnx_conformance/compiled.cc): every backend node "
          "test that the reference interpreter passes is also run through `kiln::optimize` + `kiln::compile` "
          "(generated C++ kernels and library calls, 2 threads) and compared with ONNX's reference outputs at the "
          "same tolerances (rtol=1e-3, atol=1e-7). Tests the interpreter does not pass are not run here (see "
          "onnx-coverage.md). Regenerate: `build/onnx_conformance --compile --report docs/onnx-coverage-compiled.md`.\n\n"
       << "| interpreter passes | compiled pass | compiled fail | passes that ran generated kernels |\n"
       << "|---|---|---|---|\n"
       << "| " << pass + fail << " | " << pass << " | " << fail << " | " << with_kernels << " |\n\n"
       << "The rest ran only library calls (eager kernels: gemm, conv, gather, ...) or folded to constants.\n\n";
    md << "## Compiled failures (exceptions)\n\n";
    if (fail == 0) md << "None: every test the interpreter passes also passes compiled.\n\n";
    else {
      md << "| test | reason |\n|---|---|\n";
      for (const auto& [name, v] : verdicts)
        if (v.status == "fail") md << "| " << name << " | " << v.message << " |\n";
      md << "\n";
    }
    md << "## Passing tests\n\n| test | steps |\n|---|---|\n";
    for (const auto& [name, v] : verdicts)
      if (v.status == "pass") md << "| " << name << " | " << v.message << " |\n";
  }
  std::cout << "onnx_conformance --compile: " << tests.size() << " tests, " << pass + fail
            << " pass the interpreter; compiled: " << pass << " pass, " << fail << " fail (" << not_run
            << " not run) in " << std::fixed << std::setprecision(1) << secs << " s\n";
  for (const auto& [name, v] : verdicts)
    if (v.status == "fail") std::cout << "  compiled FAIL " << name << ": " << v.message << "\n";
  // The exceptions file lists allowed compiled failures: "test_name  reason" per line.
  std::set<std::string> allowed;
  if (!opts.exceptions_file.empty()) {
    std::ifstream f(opts.exceptions_file);
    std::string line;
    while (std::getline(f, line))
      if (!line.empty() && line[0] != '#') allowed.insert(line.substr(0, line.find_first_of(" \t")));
  }
  int unexpected = 0;
  for (const auto& [name, v] : verdicts) unexpected += v.status == "fail" && !allowed.count(name);
  if (unexpected) {
    std::cout << "onnx_conformance --compile: FAILED: " << unexpected << " compiled failures not listed in "
              << (opts.exceptions_file.empty() ? std::string("an exceptions file") : opts.exceptions_file) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace conformance
