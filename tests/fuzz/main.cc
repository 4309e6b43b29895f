// kiln-fuzz-diff: the differential fuzzer's command line (docs/testing.md). Why: scripts/fuzz-diff,
// CTest and the GPU machine all run the same binary with different counts.
//   kiln-fuzz-diff N [--target cpu|cuda] [--seed S] [--jobs J] [--batch B] [--threads T]
//                    [--max-steps K] [--save-dir DIR] [--no-shrink] [--report FILE.md] [--verbose]
//   kiln-fuzz-diff --replay FILE.kir|DIR... [--known-failing LIST] [--target cpu|cuda]
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "fuzz/runner.h"
#include "kiln/error.h"

using namespace kiln;
using namespace kiln::fuzz;

namespace {

int usage() {
  std::cerr << "usage: kiln-fuzz-diff N [--target cpu|cuda] [--seed S] [--jobs J] [--batch B] [--threads T]\n"
               "                        [--max-steps K] [--save-dir DIR] [--no-shrink] [--report FILE.md] [--verbose] [--print]\n"
               "       kiln-fuzz-diff --replay FILE.kir|DIR... [--known-failing LIST] [--target cpu|cuda]\n";
  return 2;
}

// The first word of every non-comment line of a known-failing list (file name, then the reason).
std::set<std::string> read_list(const std::string& path) {
  std::set<std::string> out;
  std::ifstream f(path);
  KILN_CHECK(f.good(), "fuzz-diff: cannot read ", path);
  for (std::string l; std::getline(f, l);) {
    std::istringstream w(l);
    std::string name;
    if (w >> name && name[0] != '#') out.insert(name);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  RunOptions opt;
  opt.seed = std::random_device{}() ^ uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  opt.seed %= 1000000000000ull;  // short enough to type
  std::string report;
  std::vector<std::string> replay_paths;
  std::set<std::string> known;
  bool replaying = false, have_count = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      KILN_CHECK(i + 1 < argc, "fuzz-diff: ", a, " needs a value");
      return argv[++i];
    };
    if (a == "--target") {
      std::string t = next();
      KILN_CHECK(t == "cpu" || t == "cuda", "fuzz-diff: --target is cpu or cuda, not '", t, "'");
      opt.target = opt.gen.target = t == "cpu" ? TargetKind::Cpu : TargetKind::Cuda;
    } else if (a == "--seed") opt.seed = std::stoull(next());
    else if (a == "--jobs") opt.jobs = std::max(1, std::stoi(next()));
    else if (a == "--batch") opt.batch = std::max(1, std::stoi(next()));
    else if (a == "--threads") opt.threads = std::max(1, std::stoi(next()));
    else if (a == "--max-steps") opt.gen.max_steps = std::max(1, std::stoi(next()));
    else if (a == "--save-dir") opt.save_dir = next();
    else if (a == "--no-shrink") opt.shrink = false;
    else if (a == "--report") report = next();
    else if (a == "--verbose") opt.verbose = true;
    else if (a == "--print") {  // print the generated cases as .kir and stop (nothing compiled)
      for (int64_t k = 0; k < opt.count; ++k) std::cout << to_kir(generate_case(opt.seed + uint64_t(k), opt.gen)) << "\n";
      return 0;
    }
    else if (a == "--known-failing") known = read_list(next());
    else if (a == "--replay") replaying = true;
    else if (a == "--help" || a == "-h") return usage(), 0;
    else if (replaying && a[0] != '-') replay_paths.push_back(a);
    else if (!have_count && a[0] != '-') opt.count = std::stoll(a), have_count = true;
    else return usage();
  }
  if (replaying) {
    if (replay_paths.empty()) return usage();
    int bad = replay(replay_paths, opt, known);
    std::cout << "fuzz-diff replay: " << (bad == 0 ? "no unexpected failures" : str(bad, " unexpected failures")) << "\n";
    return bad == 0 ? 0 : 1;
  }
  std::cout << "fuzz-diff: " << opt.count << " graphs on " << target_kind_name(opt.target) << ", seed " << opt.seed
            << " (reproduce: --seed " << opt.seed << "; one case: --seed <its seed> 1), " << opt.jobs << " jobs"
            << std::endl;
  RunResult r = run_fuzz(opt);
  const Coverage& c = r.coverage;
  auto n = [&](Outcome o) { auto it = c.outcomes.find(o); return it == c.outcomes.end() ? int64_t(0) : it->second; };
  std::cout << "fuzz-diff: " << c.graphs << " graphs in " << r.seconds << " s (" << 1000 * r.seconds / double(std::max<int64_t>(1, c.graphs))
            << " s per 1000): " << n(Outcome::Match) << " match, " << n(Outcome::Mismatch) << " mismatch, "
            << n(Outcome::CompileError) << " compile-error, " << n(Outcome::RunError) << " run-error, "
            << n(Outcome::Rejected) << " rejected by the reference, " << n(Outcome::IllConditioned) << " ill-conditioned, " << n(Outcome::NarrowPrecision) << " narrow-precision, " << n(Outcome::Amplified) << " amplified, " << n(Outcome::Unsupported) << " refused by the target\n";
  for (const std::string& f : r.failures) std::cout << "  " << f << "\n";
  std::set<Op> ops;
  for (const auto& [k, _] : c.nodes) ops.insert(k.first);
  std::cout << "coverage: " << ops.size() << " of " << kNumOps << " ops, " << c.nodes.size() << " op/dtype pairs, "
            << c.symbolic_graphs << " symbolic graphs (" << c.zero_size_graphs << " with a 0 dim), " << c.special_graphs
            << " with special values\n";
  if (!report.empty()) {
    std::ofstream f(report);
    f << "# Differential fuzzing: " << c.graphs << " graphs on " << target_kind_name(opt.target) << "\n\n"
      << "`kiln-fuzz-diff " << opt.count << " --target " << target_kind_name(opt.target) << " --seed " << opt.seed
      << " --jobs " << opt.jobs << "` (" << r.seconds << " s)\n\n"
      << c.markdown(opt.target);
    if (!r.failures.empty()) {
      f << "\n## Failures\n\n";
      for (const std::string& l : r.failures) f << "    " << l << "\n";
    }
    std::cout << "report: " << report << "\n";
  }
  return r.failures.empty() ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "fuzz-diff: " << e.what() << "\n";
  return 2;
}
