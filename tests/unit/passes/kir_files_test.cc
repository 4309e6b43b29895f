// Runs every text-IR pass test under tests/ir/<pass>/*.kir as its own test case: the RUN line's
// kiln-opt flags are applied in process, the result is FileChecked against the CHECK lines, and
// the interpreter's results before and after are compared on random inputs.
//
// Directives a .kir file may hold besides RUN/CHECK lines:
//   // NUMERICS: exact            (default) outputs must be bit-identical
//   // NUMERICS: tolerance=1e-5   |after - before| <= tol * (1 + |before|) elementwise
//   // BIND: B=4, T=2             values for symbolic input dims (default 3 each)
//   // EXPECT-UNCHANGED           no pass may report a change, and the IR must print the same
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "common/filecheck.h"
#include "kiln/interp.h"
#include "kiln/passes.h"
#include "passes/opt_driver.h"

using namespace kiln;

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> kir_files() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(KILN_TEST_IR_DIR))
    if (entry.path().extension() == ".kir")
      files.push_back(std::filesystem::relative(entry.path(), KILN_TEST_IR_DIR).string());
  std::sort(files.begin(), files.end());
  return files;
}

// The text after "// NAME:" on the first line that has it.
std::optional<std::string> directive(const std::string& text, const std::string& name) {
  std::regex re("//[ \\t]*" + name + ":?[ \\t]*(.*)");
  std::smatch m;
  if (!std::regex_search(text, m, re)) return std::nullopt;
  return m[1].str();
}

std::vector<std::string> run_lines(const std::string& text) {
  std::vector<std::string> out;
  std::regex re("//[ \\t]*RUN:[ \\t]*(.*)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1].str());
  return out;
}

std::map<std::string, int64_t> bindings_for(const Graph& g, const std::string& text) {
  std::map<std::string, int64_t> b;
  std::set<std::string> symbols;
  for (const Value* in : g.inputs())
    for (const SymInt& d : in->type.shape) d.collect_symbols(symbols);
  for (const auto& s : symbols) b[s] = 3;
  if (auto bind = directive(text, "BIND")) {
    std::regex pair_re("([A-Za-z_][A-Za-z0-9_]*)[ \\t]*=[ \\t]*(-?[0-9]+)");
    for (auto it = std::sregex_iterator(bind->begin(), bind->end(), pair_re); it != std::sregex_iterator(); ++it)
      b[(*it)[1].str()] = std::stoll((*it)[2].str());
  }
  return b;
}

std::vector<HostTensor> random_inputs(const Graph& g, const std::map<std::string, int64_t>& b, uint64_t seed) {
  std::vector<HostTensor> out;
  for (const Value* in : g.inputs()) {
    std::vector<int64_t> shape;
    for (const SymInt& d : in->type.shape) shape.push_back(d.evaluate(b));
    DType t = in->type.dtype;
    if (is_float(t)) out.push_back(HostTensor::random(t, shape, seed++, -2, 2));
    else if (t == DType::Bool) out.push_back(HostTensor::random(t, shape, seed++, 0, 1));
    else out.push_back(HostTensor::random(t, shape, seed++, 0, 2));  // valid as small indices
  }
  return out;
}

// Empty when the outputs agree; otherwise what differs.
std::string compare(const std::vector<HostTensor>& before, const std::vector<HostTensor>& after,
                    std::optional<double> tolerance) {
  if (before.size() != after.size()) return "output counts differ";
  for (size_t i = 0; i < before.size(); ++i) {
    const HostTensor& a = before[i];
    const HostTensor& b = after[i];
    if (a.dtype() != b.dtype() || a.shape() != b.shape())
      return str("output ", i, ": ", a.to_string(), " vs ", b.to_string());
    if (!tolerance) {
      if (!a.bit_equal(b)) return str("output ", i, " is not bit-identical: ", a.to_string(), " vs ", b.to_string());
      continue;
    }
    for (int64_t k = 0; k < a.numel(); ++k) {
      double x = a.get_f64(k), y = b.get_f64(k);
      if (std::isnan(x) && std::isnan(y)) continue;
      if (!(std::abs(x - y) <= *tolerance * (1 + std::abs(x))))
        return str("output ", i, " element ", k, ": ", x, " vs ", y);
    }
  }
  return "";
}

class KirFile : public ::testing::TestWithParam<std::string> {};

TEST_P(KirFile, MatchesChecksAndKeepsNumerics) {
  std::filesystem::path path = std::filesystem::path(KILN_TEST_IR_DIR) / GetParam();
  std::string text = read_file(path);
  std::vector<std::string> runs = run_lines(text);
  ASSERT_EQ(runs.size(), 1u) << path << ": expected exactly one RUN line";
  passes::OptInvocation inv = passes::parse_opt_args(passes::split_run_line(runs[0]));
  inv.options.verify_each = true;

  std::unique_ptr<Graph> original = parse_graph(text);
  std::unique_ptr<Graph> optimized = original->clone();
  PassStats stats = optimize(*optimized, inv.options);
  std::string output = print_graph(*optimized);

  kiln::testing::CheckResult check = kiln::testing::filecheck(text, output);
  EXPECT_TRUE(check.ok) << path << "\n" << check.message << "\nfull output:\n" << output;
  if (directive(text, "EXPECT-UNCHANGED")) {
    for (const PassRun& r : stats.runs) EXPECT_FALSE(r.changed) << r.pass << " reported a change";
    EXPECT_EQ(output, print_graph(*original));
  } else {
    EXPECT_GT(check.num_directives, 0) << path << " has no CHECK lines";
  }

  std::optional<double> tolerance;
  if (auto n = directive(text, "NUMERICS")) {
    std::smatch m;
    if (std::regex_search(*n, m, std::regex("tolerance=([0-9.eE+-]+)"))) tolerance = std::stod(m[1].str());
  }
  std::map<std::string, int64_t> b = bindings_for(*original, text);
  for (uint64_t seed : {1u, 2u}) {
    std::vector<HostTensor> inputs = random_inputs(*original, b, seed * 100);
    std::vector<HostTensor> before = interp::run(*original, inputs);
    std::vector<HostTensor> after = interp::run(*optimized, inputs);
    std::string diff = compare(before, after, tolerance);
    EXPECT_TRUE(diff.empty()) << path << ": " << diff;
  }
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(0, info.param.size() - 4);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(TextIR, KirFile, ::testing::ValuesIn(kir_files()), test_name);

}  // namespace
