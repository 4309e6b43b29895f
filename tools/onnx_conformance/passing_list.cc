// The committed list of tests that must pass (tests/conformance/onnx_passing*.txt). Why: a pass
// count hides a test that regresses behind one that starts passing; a list names the test that
// left it.
#include <fstream>
#include <iostream>
#include <set>

#include "conformance.h"

namespace conformance {

int check_passing_list(const std::string& path, const std::vector<std::string>& passing,
                       const std::vector<std::string>* ran, const std::string& write_path) {
  if (!write_path.empty()) {
    std::ofstream out(write_path);
    out << "# Tests that must pass (onnx_conformance --passing checks it; with --compile: pass running generated\n"
           "# kernels, docs/testing.md). Regenerate after a change that makes more tests pass:\n"
           "# onnx_conformance ... --write-passing THIS_FILE\n";
    for (const std::string& name : passing) out << name << "\n";
    if (!out.good()) {
      std::cerr << write_path << ": cannot write\n";
      return 2;
    }
    std::cout << "onnx_conformance: wrote " << passing.size() << " passing tests to " << write_path << "\n";
  }
  if (path.empty()) return 0;
  std::ifstream in(path);
  if (!in.good()) {
    std::cerr << path << ": cannot read the list of passing tests\n";
    return 2;
  }
  std::set<std::string> want;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') want.insert(line);
  const std::set<std::string> got(passing.begin(), passing.end());
  std::set<std::string> checked;
  if (ran) checked.insert(ran->begin(), ran->end());
  std::vector<std::string> lost, gained;
  for (const std::string& name : want)
    if (!got.count(name) && (!ran || checked.count(name))) lost.push_back(name);
  for (const std::string& name : got)
    if (!want.count(name)) gained.push_back(name);
  if (!gained.empty())
    std::cout << "onnx_conformance: " << gained.size() << " tests pass that " << path
              << " does not list (add them with --write-passing): " << gained.front()
              << (gained.size() > 1 ? " ..." : "") << "\n";
  if (!lost.empty()) {
    std::cout << "onnx_conformance: FAILED: " << lost.size() << " tests listed in " << path << " no longer pass:";
    for (const std::string& name : lost) std::cout << " " << name;
    std::cout << "\n";
    return 1;
  }
  std::cout << "onnx_conformance: all " << (ran ? "the run's" : std::to_string(want.size())) << " tests of " << path
            << " pass\n";
  return 0;
}

}  // namespace conformance
