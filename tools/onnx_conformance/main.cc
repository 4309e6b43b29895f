// onnx_conformance: runs ONNX's own backend node tests (onnx/backend/test/data/node/*) through the
// importer and the reference interpreter, compares with the reference outputs at ONNX's
// tolerances, writes a coverage report and fails when the pass count drops below a floor. Why:
// the suite is the ONNX spec made executable; it tells us, op by op, where Kiln disagrees.
//
// Each test runs in a forked child with a time limit, so a crash or a hang in one test is a
// failure of that test, not of the run.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iomanip>
#include <map>
#include <sstream>

#include "conformance.h"
#include "kiln/error.h"

namespace fs = std::filesystem;
using namespace kiln;
using conformance::one_line;

namespace {

struct Options {
  std::string data_dir, report, floor_file, filter, exceptions_file, passing_file, write_passing_file;
  std::string suite = "node";  // --suite: folders under onnx/backend/test/data
  std::string target = "cpu";  // --target: what --compile compiles for
  int jobs = 2;
  int timeout_s = 20;
  bool verbose = false;
  bool compile = false;  // --compile: interpreter-passing tests also run optimized + compiled
  int batch = 64;        // --batch: tests per compiled translation unit
};

struct Result {
  std::string name, status, message;
};

// Forks a child per test (at most opts.jobs at once) and collects its one-line verdict.
std::vector<Result> run_all(const std::vector<fs::path>& tests, const Options& opts) {
  struct Child { pid_t pid; int fd; size_t index; };
  std::vector<Result> results(tests.size());
  std::vector<Child> running;
  size_t next = 0;
  while (next < tests.size() || !running.empty()) {
    while (next < tests.size() && int(running.size()) < opts.jobs) {
      int fds[2];
      if (pipe(fds) != 0) { perror("pipe"); exit(2); }
      pid_t pid = fork();
      if (pid == 0) {
        close(fds[0]);
        alarm(unsigned(opts.timeout_s));
        std::string verdict = conformance::run_interpreted(tests[next]);
        ssize_t unused = write(fds[1], verdict.data(), verdict.size());
        (void)unused;
        _exit(0);
      }
      close(fds[1]);
      running.push_back({pid, fds[0], next++});
    }
    // Wait for any child, then reap it (its pipe is drained after exit; verdicts are small).
    int status;
    pid_t done = waitpid(-1, &status, WNOHANG);
    if (done == 0) {
      // Drain pipes while waiting so a child never blocks on a full pipe.
      usleep(2000);
      continue;
    }
    for (size_t i = 0; i < running.size(); ++i)
      if (running[i].pid == done) {
        Child ch = running[i];
        running.erase(running.begin() + long(i));
        std::string out;
        char buf[4096];
        ssize_t n;
        while ((n = read(ch.fd, buf, sizeof buf)) > 0) out.append(buf, size_t(n));
        close(ch.fd);
        Result& r = results[ch.index];
        r.name = tests[ch.index].filename().string();
        if (WIFSIGNALED(status)) {
          int sig = WTERMSIG(status);
          r.status = "fail";
          r.message = sig == SIGALRM ? str("timed out after ", opts.timeout_s, " s") : str("crashed with signal ", sig);
        } else if (out.rfind("PASS", 0) == 0) {
          r.status = "pass";
        } else if (out.rfind("UNSUPPORTED: ", 0) == 0) {
          r.status = "unsupported";
          r.message = out.substr(13);
        } else {
          r.status = "fail";
          r.message = out.rfind("FAIL: ", 0) == 0 ? out.substr(6) : "no verdict";
        }
        if (opts.verbose) std::cerr << r.status << "  " << r.name << "  " << one_line(r.message) << "\n";
        break;
      }
  }
  return results;
}

// The onnx package's backend test data folders for `suite` (comma-separated names under
// onnx/backend/test/data: "node", or "pytorch-converted,pytorch-operator,simple" for the small
// real-model tests), comma-joined.
std::string find_data_dir(const std::string& suite) {
  for (fs::path p = fs::current_path(); !p.empty(); p = p.parent_path()) {
    fs::path py = p / ".venv/bin/python";
    if (fs::exists(py)) {
      std::string cmd = py.string() + " -c \"import onnx,os;print(os.path.dirname(onnx.__file__))\" 2>/dev/null";
      FILE* f = popen(cmd.c_str(), "r");
      if (!f) return "";
      char buf[4096] = {0};
      std::string out = fgets(buf, sizeof buf, f) ? buf : "";
      pclose(f);
      while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
      if (out.empty()) return "";
      std::string dirs;
      std::stringstream names(suite);
      for (std::string name; std::getline(names, name, ',');)
        dirs += (dirs.empty() ? "" : ",") + out + "/backend/test/data/" + name;
      return dirs;
    }
    if (p == p.parent_path()) break;
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) { std::cerr << a << " needs a value\n"; exit(2); }
      return argv[++i];
    };
    if (a == "--data-dir") opts.data_dir = value();
    else if (a == "--suite") opts.suite = value();
    else if (a == "--report") opts.report = value();
    else if (a == "--floor") opts.floor_file = value();
    else if (a == "--passing") opts.passing_file = value();
    else if (a == "--write-passing") opts.write_passing_file = value();
    else if (a == "--filter") opts.filter = value();
    else if (a == "--jobs") opts.jobs = std::max(1, std::stoi(value()));
    else if (a == "--timeout") opts.timeout_s = std::max(1, std::stoi(value()));
    else if (a == "-v" || a == "--verbose") opts.verbose = true;
    else if (a == "--compile") opts.compile = true;
    else if (a == "--exceptions") opts.exceptions_file = value();
    else if (a == "--batch") opts.batch = std::max(1, std::stoi(value()));
    else if (a == "--target") opts.target = value();
    else {
      std::cerr << "usage: onnx_conformance [--data-dir DIR] [--report FILE.md] [--floor FILE] [--filter SUBSTR]\n"
                   "                        [--passing FILE] [--write-passing FILE] [--jobs N] [--timeout S] [-v]\n"
                   "                        [--compile [--target cpu|cuda] [--batch N] [--exceptions FILE]]\n"
                   "--compile runs every test the interpreter passes through the target's optimizer and compiler\n"
                   "(on the CPU N tests per translation unit) with the data inputs fed at run time, and compares at\n"
                   "the same tolerances. Each pass is compiled (ran generated kernels), library-only, reference-only\n"
                   "or folded (docs/testing.md); --passing/--write-passing then list the compiled ones. With\n"
                   "--exceptions, a compiled failure not listed in FILE (lines: test_name reason) fails the run.\n"
                   "--target cuda compiles for the GPU (each forked child initialises CUDA itself); graphs the CUDA\n"
                   "target refuses are reported as unsupported on cuda, not as failures.\n"
                   "DIR (comma-separated folders allowed) defaults to onnx/backend/test/data/SUITE of the onnx\n"
                   "package in the nearest .venv; --suite SUITE[,SUITE...] picks the folders (default: node;\n"
                   "models: pytorch-converted,pytorch-operator,simple).\n";
      return 2;
    }
  }
  if (opts.suite == "models") opts.suite = "pytorch-converted,pytorch-operator,simple";
  if (opts.data_dir.empty()) opts.data_dir = find_data_dir(opts.suite);
  std::vector<std::string> data_dirs;
  std::stringstream dir_list(opts.data_dir);
  for (std::string d; std::getline(dir_list, d, ',');) data_dirs.push_back(d);
  bool all_found = !data_dirs.empty();
  for (const auto& d : data_dirs) all_found = all_found && fs::is_directory(d);
  if (!all_found) {
    // scripts/test (and so CI) installs the data: there, missing data is a failure, not a skip.
    const char* required = std::getenv("KILN_REQUIRE_CONFORMANCE_DATA");
    const bool must = required && std::string(required) == "1";
    std::cout << "onnx_conformance: " << (must ? "FAILED" : "SKIPPED") << ": ONNX backend test data not found in "
              << opts.data_dir << " (need .venv with the pinned onnx package: scripts/install-deps)\n";
    return must ? 1 : 77;
  }
  std::vector<fs::path> tests;
  for (const auto& dir : data_dirs)
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && fs::exists(e.path() / "model.onnx") &&
          (opts.filter.empty() || e.path().filename().string().find(opts.filter) != std::string::npos))
        tests.push_back(e.path());
  std::sort(tests.begin(), tests.end());
  if (opts.compile) {
    conformance::CompiledOptions co;
    co.jobs = opts.jobs;
    co.timeout_s = opts.timeout_s;
    co.batch = opts.batch;
    co.verbose = opts.verbose;
    co.report = opts.report;
    co.exceptions_file = opts.exceptions_file;
    co.target = opts.target;
    co.passing_file = opts.passing_file;
    co.write_passing_file = opts.write_passing_file;
    co.filtered = !opts.filter.empty();
    return conformance::run_compiled_mode(tests, co);
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<Result> results = run_all(tests, opts);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int pass = 0, fail = 0, unsupported = 0;
  for (const auto& r : results) (r.status == "pass" ? pass : r.status == "fail" ? fail : unsupported)++;
  int total = int(results.size());
  double pct = total ? 100.0 * pass / total : 0;
  if (!opts.report.empty()) {
    std::ofstream md(opts.report);
    md << "# ONNX backend " << (opts.suite == "node" ? std::string("node") : opts.suite) << "-test coverage\n\n"
       << "Generated by `onnx_conformance --suite " << opts.suite
       << "` (tools/onnx_conformance) from the pinned `onnx` package's backend tests, run through Kiln's ONNX importer and the reference interpreter, compared at rtol=1e-3, atol=1e-7. "
          "Regenerate: `build/onnx_conformance "
       << (opts.suite == "node" ? "--report docs/onnx-coverage.md" : "--suite models --report docs/onnx-model-coverage.md")
       << "`.\n\n"
       << "| total | pass | fail | unsupported | pass rate |\n|---|---|---|---|---|\n"
       << "| " << total << " | " << pass << " | " << fail << " | " << unsupported << " | "
       << std::fixed << std::setprecision(1) << pct << "% |\n\n"
       << "| test | result | detail |\n|---|---|---|\n";
    for (const auto& r : results) {
      std::string msg = r.message;
      size_t cut = msg.find(": node '");
      if (cut != std::string::npos) msg = msg.substr(msg.find(": ", cut + 2) == std::string::npos ? cut : cut + 2);
      md << "| " << r.name << " | " << r.status << " | " << one_line(msg) << " |\n";
    }
  }
  std::cout << "onnx_conformance: " << total << " tests, " << pass << " pass, " << fail << " fail, " << unsupported
            << " unsupported (" << std::fixed << std::setprecision(1) << pct << "% pass) in " << secs << " s\n";
  if (!opts.floor_file.empty()) {
    std::ifstream f(opts.floor_file);
    int floor = 0;
    if (!(f >> floor)) {
      std::cerr << opts.floor_file << ": cannot read the pass floor\n";
      return 2;
    }
    if (pass < floor) {
      std::cout << "onnx_conformance: FAILED: " << pass << " passing tests is below the floor of " << floor << " ("
                << opts.floor_file << ")\n";
      return 1;
    }
    std::cout << "onnx_conformance: pass count " << pass << " >= floor " << floor << "\n";
  }
  std::vector<std::string> passing, ran;
  for (const auto& r : results) {
    ran.push_back(r.name);
    if (r.status == "pass") passing.push_back(r.name);
  }
  return conformance::check_passing_list(opts.passing_file, passing, opts.filter.empty() ? nullptr : &ran,
                                         opts.write_passing_file);
}
