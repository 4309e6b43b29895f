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
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iomanip>
#include <map>
#include <sstream>

#include "kiln/interp.h"
#include "kiln/onnx.h"
#include "kiln/tensor_io.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

struct Options {
  std::string data_dir, report, floor_file, filter;
  int jobs = 2;
  int timeout_s = 20;
  bool verbose = false;
};

std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, fs::path>> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) == 0 && e.path().extension() == ".pb")
      files.push_back({std::stoi(n.substr(prefix.size())), e.path()});
  }
  std::sort(files.begin(), files.end());
  std::vector<fs::path> out;
  for (auto& f : files) out.push_back(f.second);
  return out;
}

// ONNX's default check: |actual - expected| <= atol + rtol * |expected|, NaNs must match.
std::string compare(const HostTensor& got, const HostTensor& want, const std::string& name) {
  if (got.dtype() != want.dtype())
    return str("output '", name, "' has dtype ", dtype_name(got.dtype()), ", expected ", dtype_name(want.dtype()));
  if (got.shape() != want.shape())
    return str("output '", name, "' has shape ", dims_to_string(got.shape()), ", expected ", dims_to_string(want.shape()));
  const double rtol = 1e-3, atol = 1e-7;
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    bool ok;
    if (is_float(want.dtype())) {
      double a = got.get_f64(i), b = want.get_f64(i);
      if (std::isnan(b)) ok = std::isnan(a);
      else if (std::isinf(b)) ok = a == b;
      else ok = std::fabs(a - b) <= atol + rtol * std::fabs(b);
    } else {
      ok = got.get_i64(i) == want.get_i64(i);
    }
    if (!ok && bad++ == 0) first = i;
  }
  if (bad == 0) return "";
  return str("output '", name, "': ", bad, " of ", want.numel(), " elements differ; first at ", first, ": got ",
             got.get_f64(first), ", expected ", want.get_f64(first));
}

// Runs one test directory; returns "PASS", "FAIL: msg" or "UNSUPPORTED: msg".
std::string run_test(const fs::path& dir) {
  fs::path model = dir / "model.onnx";
  try {
    std::vector<std::string> names = onnx_input_names(model.string());
    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) return "FAIL: no test_data_set_* folder";
    for (const auto& set : sets) {
      std::map<std::string, HostTensor> given;
      auto in_files = numbered(set, "input_");
      if (in_files.size() > names.size()) return "FAIL: more input files than graph inputs";
      for (size_t i = 0; i < in_files.size(); ++i) {
        std::string n;
        try {
          given[names[i]] = read_tensor_pb(in_files[i].string(), &n);  // by position, as ONNX's runner
        } catch (const Error&) {
          import_onnx(model.string());  // sequence/optional inputs: let the importer say "unsupported"
          throw;
        }
      }
      ImportOptions opts;
      opts.static_input_values = given;
      auto g = import_onnx(model.string(), opts);
      std::vector<HostTensor> feed;
      for (const Value* in : g->inputs()) {
        auto it = given.find(in->name);
        if (it == given.end()) return str("FAIL: no data for graph input '", in->name, "'");
        feed.push_back(it->second);
      }
      auto outs = interp::run(*g, feed);
      auto out_files = numbered(set, "output_");
      if (out_files.size() != outs.size())
        return str("FAIL: graph has ", outs.size(), " outputs, test data has ", out_files.size());
      for (size_t i = 0; i < outs.size(); ++i) {
        std::string n;
        HostTensor want = read_tensor_pb(out_files[i].string(), &n);
        std::string diff = compare(outs[i], want, n.empty() ? str(i) : n);
        if (!diff.empty()) return "FAIL: " + diff;
      }
    }
    return "PASS";
  } catch (const UnsupportedError& e) {
    return std::string("UNSUPPORTED: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("FAIL: ") + e.what();
  }
}

struct Result {
  std::string name, status, message;
};

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '|') c = ' ';
  if (s.size() > 300) s = s.substr(0, 300) + "...";
  return s;
}

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
        std::string verdict = run_test(tests[next]);
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

std::string find_data_dir() {
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
      return out + "/backend/test/data/node";
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
    else if (a == "--report") opts.report = value();
    else if (a == "--floor") opts.floor_file = value();
    else if (a == "--filter") opts.filter = value();
    else if (a == "--jobs") opts.jobs = std::max(1, std::stoi(value()));
    else if (a == "--timeout") opts.timeout_s = std::max(1, std::stoi(value()));
    else if (a == "-v" || a == "--verbose") opts.verbose = true;
    else {
      std::cerr << "usage: onnx_conformance [--data-dir DIR] [--report FILE.md] [--floor FILE] [--filter SUBSTR]\n"
                   "                        [--jobs N] [--timeout S] [-v]\n"
                   "DIR defaults to onnx/backend/test/data/node of the onnx package in the nearest .venv.\n";
      return 2;
    }
  }
  if (opts.data_dir.empty()) opts.data_dir = find_data_dir();
  if (opts.data_dir.empty() || !fs::is_directory(opts.data_dir)) {
    std::cout << "onnx_conformance: SKIPPED: ONNX backend test data not found (need .venv with the pinned onnx "
                 "package: scripts/install-deps)\n";
    return 77;
  }
  std::vector<fs::path> tests;
  for (const auto& e : fs::directory_iterator(opts.data_dir))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx") &&
        (opts.filter.empty() || e.path().filename().string().find(opts.filter) != std::string::npos))
      tests.push_back(e.path());
  std::sort(tests.begin(), tests.end());
  auto t0 = std::chrono::steady_clock::now();
  std::vector<Result> results = run_all(tests, opts);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int pass = 0, fail = 0, unsupported = 0;
  for (const auto& r : results) (r.status == "pass" ? pass : r.status == "fail" ? fail : unsupported)++;
  int total = int(results.size());
  double pct = total ? 100.0 * pass / total : 0;
  if (!opts.report.empty()) {
    std::ofstream md(opts.report);
    md << "# ONNX backend node-test coverage\n\n"
       << "Generated by `onnx_conformance` (tools/onnx_conformance) from the pinned `onnx` package's backend node "
          "tests, run through Kiln's ONNX importer and the reference interpreter, compared at rtol=1e-3, atol=1e-7. "
          "Regenerate: `build/onnx_conformance --report docs/onnx-coverage.md`.\n\n"
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
  return 0;
}
