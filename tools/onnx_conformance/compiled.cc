// onnx_conformance --compile: every test the interpreter passes also runs through the target's
// optimizer and compiler and is compared with ONNX's reference outputs at the same tolerances.
// Why: the bar is "what the interpreter gets right, the compiled path gets right too";
// the suite covers op/attribute corners our own samples miss.
//
// This file is the parent: tests run in forked children, `batch` tests per child
// (compiled_batch.cc). A child that crashes or times out has its tests rerun one per child, so one
// bad test costs only its own verdict. The parent never touches CUDA: a CUDA context does not
// survive fork, so each child initialises its own.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include "compiled_verdicts.h"
#include "kiln/target.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace conformance {

namespace {

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
        run_batch(batches[next], opts, out);
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
        size_t a = line.find('\t'), b = line.find('\t', a + 1), c = line.find('\t', b + 1);
        if (a == std::string::npos || b == std::string::npos || c == std::string::npos) continue;
        std::string name = line.substr(0, a);
        verdicts[name] = {line.substr(a + 1, b - a - 1), line.substr(b + 1, c - b - 1), line.substr(c + 1)};
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

// Why CUDA cannot run here (empty: it can), asked in a forked child so that this process never
// initialises CUDA before it forks the batches.
std::string cuda_unavailable_in_child() {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string why = cuda_target()->unavailable_reason();
    ssize_t unused = write(fds[1], why.data(), why.size());
    (void)unused;
    _exit(0);
  }
  close(fds[1]);
  std::string why;
  char buf[1024];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) why.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return str("the CUDA probe process died (status ", status, ")");
  return why;
}

}  // namespace

int run_compiled_mode(const std::vector<fs::path>& tests, const CompiledOptions& opts) {
  if (opts.target != "cpu" && opts.target != "cuda") {
    std::cerr << "onnx_conformance: --target " << opts.target << ": expected cpu or cuda\n";
    return 2;
  }
  if (opts.target == "cuda") {
    std::string why = cuda_unavailable_in_child();
    if (!why.empty()) {
      std::cout << "onnx_conformance --compile --target cuda: FAILED: " << why << "\n";
      return 1;
    }
  }
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
      verdicts[t.filename().string()] = {kFail, "the test's process " + deaths[t.filename().string()], ""};
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report_compiled(verdicts, tests, opts, secs);
}

}  // namespace conformance
