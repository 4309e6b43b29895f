// kiln-opt: reads a graph (text IR, or an ONNX model when the ONNX frontend is built), runs
// optimization passes and prints the result, like mlir-opt. Why: pass tests, bug reports and
// "what does the optimizer do to this model" all start from one command line.
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "kiln/error.h"
#include "kiln/graph.h"
#include "kiln/passes.h"
#include "passes/opt_driver.h"
#ifdef KILN_HAVE_ONNX
#include "kiln/onnx.h"
#endif

namespace {

std::string read_all(std::istream& in) {
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::unique_ptr<kiln::Graph> load(const std::string& path, const kiln::passes::OptInvocation& inv) {
  if (ends_with(path, ".onnx")) {
#ifdef KILN_HAVE_ONNX
    kiln::ImportOptions options;
    options.input_shapes = inv.input_shapes;
    return kiln::import_onnx(path, options);
#else
    throw kiln::Error("'" + path + "': this kiln-opt was built without the ONNX frontend");
#endif
  }
  KILN_CHECK(inv.input_shapes.empty(), "--input-shape applies to ONNX models only, not '", path, "'");
  if (path == "-") return kiln::parse_graph(read_all(std::cin));
  std::ifstream in(path);
  KILN_CHECK(in.good(), "cannot read '", path, "'");
  return kiln::parse_graph(read_all(in));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    kiln::passes::OptInvocation inv =
        kiln::passes::parse_opt_args(std::vector<std::string>(argv + 1, argv + argc));
    if (inv.help) {
      std::cout << kiln::passes::opt_usage();
      return 0;
    }
    if (inv.list_passes) {
      for (const auto& [name, why] : kiln::registered_passes()) std::cout << name << ": " << why << "\n";
      return 0;
    }
    KILN_CHECK(inv.inputs.size() == 1, "expected one input file (or - for stdin)\n", kiln::passes::opt_usage());
    std::unique_ptr<kiln::Graph> g = load(inv.inputs[0], inv);
    kiln::PassStats stats = kiln::optimize(*g, inv.options);
    if (inv.stats)
      std::cerr << kiln::passes::stats_markdown(stats, inv.stats_title.empty() ? inv.inputs[0] : inv.stats_title);
    std::string text = kiln::print_graph(*g);
    if (inv.output_path.empty()) {
      std::cout << text;
    } else {
      std::ofstream out(inv.output_path);
      KILN_CHECK(out.good(), "cannot write '", inv.output_path, "'");
      out << text;
    }
    return 0;
  } catch (const kiln::Error& e) {
    std::cerr << "kiln-opt: " << e.what() << "\n";
    return 1;
  }
}
