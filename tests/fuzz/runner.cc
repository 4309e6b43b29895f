// The fuzz driver (see runner.h). Workers are forked before any OpenMP or compiler work happens
// in the parent; each takes every jobs-th batch and writes its counts and failures to a file the
// parent merges, so a worker that crashes costs its own results only and is reported.
#include "fuzz/runner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "fuzz/shrink.h"
#include "kiln/error.h"

namespace kiln::fuzz {

namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

const Target& target_for(TargetKind kind) {
  if (kind == TargetKind::Cpu) return cpu_target();
  static std::unique_ptr<Target> cuda = cuda_target();
  return *cuda;
}

// Shrinks a failing case and saves it; returns the line that reports it.
std::string report_failure(const FuzzCase& c, uint64_t seed, const Verdict& v, const Checker& checker,
                           const RunOptions& opt) {
  std::string line = str("seed ", seed, ": ", outcome_name(v.outcome), ": ", v.detail.substr(0, 400));
  if (!opt.save_dir.empty()) {
    FuzzCase small = c.clone();
    try {
      if (opt.shrink)
        small = shrink(c, [&](const FuzzCase& k) { return checker.check_one(k).outcome == v.outcome; });
    } catch (const std::exception& e) {
      line += str("\n    shrinking failed (", e.what(), "); saved as generated");
      small = c.clone();
    }
    Verdict sv = checker.check_one(small);
    small.note = str(target_kind_name(opt.target), " seed ", seed, ": ", outcome_name(sv.outcome), ": ",
                     sv.detail.substr(0, 300));
    fs::create_directories(opt.save_dir);
    fs::path file = fs::path(opt.save_dir) / str(target_kind_name(opt.target), "-", seed, ".kir");
    std::ofstream(file) << to_kir(small);
    line += str("\n    shrunk to ", small.graph->num_nodes(), " nodes: ", file.string());
  }
  return line;
}

// One worker: batches b = first, first + jobs, ... Writes "batch" and "failure <line>" records,
// then "done" and its coverage.
void worker(int64_t first_batch, const RunOptions& opt, const fs::path& out_file) {
  std::ofstream out(out_file);
  const Checker checker(target_for(opt.target), fuzz_compile_options(opt));
  Coverage cov;
  const int64_t batches = (opt.count + opt.batch - 1) / opt.batch;
  for (int64_t b = first_batch; b < batches; b += opt.jobs) {
    const int64_t first = b * opt.batch, last = std::min(opt.count, first + opt.batch);
    out << "batch " << b << " " << opt.seed + uint64_t(first) << " " << opt.seed + uint64_t(last - 1) << std::endl;
    std::vector<FuzzCase> cases;
    std::vector<const FuzzCase*> ptrs;
    for (int64_t i = first; i < last; ++i) cases.push_back(generate_case(opt.seed + uint64_t(i), opt.gen));
    for (const auto& c : cases) ptrs.push_back(&c);
    std::vector<Verdict> verdicts = checker.check(ptrs);
    for (size_t k = 0; k < cases.size(); ++k) {
      cov.add(cases[k], verdicts[k].outcome);
      const uint64_t seed = opt.seed + uint64_t(first) + k;
      if (opt.verbose || is_failure(verdicts[k].outcome))
        std::cerr << "case " << seed << ": " << outcome_name(verdicts[k].outcome) << " "
                  << verdicts[k].detail.substr(0, 300) << "\n";
      if (is_failure(verdicts[k].outcome)) {
        std::string line = report_failure(cases[k], seed, verdicts[k], checker, opt);
        std::istringstream lines(line);
        for (std::string l; std::getline(lines, l);) out << "failure " << l << std::endl;
      }
    }
  }
  out << "done\n" << cov.serialize();
}

}  // namespace

CompileOptions fuzz_compile_options(const RunOptions& options) {
  CompileOptions o;
  o.num_threads = options.threads;
  o.parallel_threshold = 64;
  o.cache_dir = (fs::temp_directory_path() / str("kiln-fuzz-cache-", getpid())).string();
  return o;
}

RunResult run_fuzz(const RunOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path dir = fs::temp_directory_path() / str("kiln-fuzz-", getpid());
  fs::create_directories(dir);
  // One process per job; a job whose process dies (a crash in the compiler or a kernel) is
  // reported with its batch and restarted after that batch, so one crash costs one batch.
  auto start = [&](int job, int64_t first_batch, const fs::path& file) -> pid_t {
    pid_t pid = std::getenv("KILN_FUZZ_NO_FORK") ? 0 : fork();  // set: one job, in-process (debuggers)
    KILN_CHECK(pid >= 0, "fuzz-diff: fork failed");
    if (pid != 0) return pid;
    int rc = 0;
    try {
      worker(first_batch, opt, file);
    } catch (const std::exception& e) {
      std::cerr << "fuzz-diff: worker " << job << ": " << e.what() << "\n";
      rc = 2;
    }
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / str("kiln-fuzz-cache-", getpid()), ec);
    if (!std::getenv("KILN_FUZZ_NO_FORK")) _exit(rc);
    return getpid();
  };
  const int64_t batches = (opt.count + opt.batch - 1) / opt.batch;
  std::vector<pid_t> pids;
  for (int j = 0; j < opt.jobs; ++j) pids.push_back(start(j, j, dir / str("job", j, "-0")));
  RunResult r;
  for (int j = 0; j < opt.jobs; ++j)
    for (int attempt = 0;; ++attempt) {
      int status = 0;
      if (pids[size_t(j)] != getpid()) waitpid(pids[size_t(j)], &status, 0);
      std::istringstream lines(read_file(dir / str("job", j, "-", attempt)));
      std::string last_batch, rest;
      int64_t last_index = -1;
      bool done = false;
      for (std::string l; std::getline(lines, l);) {
        if (done) rest += l + "\n";
        else if (l.rfind("batch ", 0) == 0) {
          std::istringstream fields(l.substr(6));
          uint64_t a = 0, b = 0;
          fields >> last_index >> a >> b;
          last_batch = str(a, " ", b);
        } else if (l.rfind("failure ", 0) == 0) r.failures.push_back(l.substr(8));
        else if (l == "done") done = true;
      }
      r.coverage.merge(Coverage::parse(rest));
      if (done && WIFEXITED(status) && WEXITSTATUS(status) == 0) break;
      r.crashed = true;
      r.failures.push_back(str("worker ", j, " died (status ", status, ") in the batch of seeds ", last_batch,
                               ": rerun them with --seed FIRST --jobs 1 --verbose"));
      if (last_index < 0 || last_index + opt.jobs >= batches) break;
      pids[size_t(j)] = start(j, last_index + opt.jobs, dir / str("job", j, "-", attempt + 1));
    }
  std::error_code ec;
  fs::remove_all(dir, ec);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

int replay(const std::vector<std::string>& paths, const RunOptions& opt, const std::set<std::string>& known_failing) {
  std::vector<fs::path> files;
  for (const std::string& p : paths) {
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p))
        if (e.path().extension() == ".kir") files.push_back(e.path());
    } else {
      files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  const Checker checker(target_for(opt.target), fuzz_compile_options(opt));
  int unexpected = 0;
  for (const fs::path& f : files) {
    const std::string name = f.filename().string();
    FuzzCase c = from_kir(read_file(f));
    std::string skip;
    for (const Node* n : c.graph->node_list())
      if (skip.empty()) skip = why_not_drawn(opt.target, n->op);
    if (!skip.empty()) {
      std::cout << "skip  " << name << " (" << skip << ")\n";
      continue;
    }
    Verdict v = checker.check_one(c);
    const bool known = known_failing.count(name) > 0;
    if (is_failure(v.outcome)) {
      std::cout << (known ? "known " : "FAIL  ") << name << ": " << outcome_name(v.outcome) << ": "
                << v.detail.substr(0, 400) << "\n";
      if (!known) ++unexpected;
    } else {
      std::cout << (known ? "fixed " : "ok    ") << name;
      if (v.outcome != Outcome::Match) std::cout << " (" << outcome_name(v.outcome) << ")";
      std::cout << (known ? " (listed as known failing: take it off the list)" : "") << "\n";
    }
  }
  std::error_code ec;
  fs::remove_all(fuzz_compile_options(opt).cache_dir, ec);
  return unexpected;
}

}  // namespace kiln::fuzz
