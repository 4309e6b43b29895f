// kiln_onnx_model_check: imports one exported model and runs it three ways on the inputs saved
// beside it — the reference interpreter on the imported graph, the interpreter after the default
// optimizer pipeline, and the compiled CPU path — comparing each with PyTorch's outputs. Why:
// end-to-end evidence that real architectures (ResNet, MobileNetV3, Transformer, MiniLM) import,
// optimize and compile without changing what they compute.
//   usage: kiln_onnx_model_check DIR [rtol atol]   (DIR holds model.onnx, input_*.npy, output_*.npy)
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>

#include "kiln/compile.h"
#include "kiln/interp.h"
#include "kiln/onnx.h"
#include "kiln/passes.h"
#include "kiln/tensor_io.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

// Compares `outs` with DIR/output_<i>.npy; prints one line per output; returns the bad count (a
// missing expected file counts as bad).
int compare_with_reference(const fs::path& dir, const std::string& mode, const std::vector<HostTensor>& outs,
                           double rtol, double atol) {
  int bad = 0;
  std::string name = dir.filename().string();
  for (size_t i = 0; i < outs.size(); ++i) {
    fs::path f = dir / str("output_", i, ".npy");
    if (!fs::exists(f)) {  // a check without its expected output checks nothing: that is a failure
      std::cout << name << " [" << mode << "]: output " << i << ": the expected " << f.string() << " is missing\n";
      ++bad;
      continue;
    }
    HostTensor want = read_npy(f.string());
    if (want.shape() != outs[i].shape()) {
      std::cout << name << " [" << mode << "]: output " << i << " shape " << dims_to_string(outs[i].shape())
                << " != " << dims_to_string(want.shape()) << "\n";
      ++bad;
      continue;
    }
    double max_err = 0;
    int64_t wrong = 0;
    for (int64_t k = 0; k < want.numel(); ++k) {
      double a = outs[i].get_f64(k), b = want.get_f64(k);
      double err = std::fabs(a - b);
      max_err = std::max(max_err, err);
      if (std::isnan(a) || std::isnan(b)) {
        if (std::isnan(a) != std::isnan(b)) ++wrong;  // NaN exactly where the reference has one
        continue;
      }
      if (!(err <= atol + rtol * std::fabs(b))) ++wrong;
    }
    std::cout << name << " [" << mode << "]: output " << i << " " << dims_to_string(want.shape())
              << " max abs err " << max_err << (wrong ? str(", ", wrong, " elements out of tolerance") : "") << "\n";
    if (wrong) ++bad;
  }
  return bad;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: kiln_onnx_model_check DIR [rtol atol]\n";
    return 2;
  }
  fs::path dir = argv[1];
  std::string name = dir.filename().string();
  double rtol = argc > 2 ? std::stod(argv[2]) : 1e-3, atol = argc > 3 ? std::stod(argv[3]) : 1e-4;
  try {
    // Symbolic import first (checks dim_param handling); if a shape sub-graph needs concrete
    // sizes, specialise on the saved inputs' shapes as a compiler would under a shape guard.
    std::string model = (dir / "model.onnx").string();
    std::vector<std::string> names = onnx_input_names(model);
    std::vector<HostTensor> inputs;
    ImportOptions opts;
    for (size_t i = 0; i < names.size(); ++i) {
      inputs.push_back(read_npy((dir / str("input_", i, ".npy")).string()));
      opts.input_shapes[names[i]] = inputs.back().shape();
    }
    std::unique_ptr<Graph> g;
    try {
      g = import_onnx(model);
      std::cout << name << ": imported with symbolic dims\n";
    } catch (const UnsupportedError& e) {
      std::cout << name << ": symbolic import needs static shapes (" << e.what() << "); specialising\n";
      g = import_onnx(model, opts);
    }
    int bad = compare_with_reference(dir, "interpreter", interp::run(*g, inputs), rtol, atol);

    std::unique_ptr<Graph> optimized = g->clone();
    OptimizeOptions o;
    o.verify_each = true;
    auto t0 = std::chrono::steady_clock::now();
    optimize(*optimized, o);
    std::cout << name << ": optimized " << g->num_nodes() << " -> " << optimized->num_nodes() << " nodes in "
              << seconds_since(t0) << " s\n";
    bad += compare_with_reference(dir, "optimized+interpreter", interp::run(*optimized, inputs), rtol, atol);

    t0 = std::chrono::steady_clock::now();
    std::shared_ptr<Executable> exe = compile(*optimized);
    std::cout << name << ": compiled " << exe->stats().kernels_generated << " kernels + "
              << exe->stats().library_calls << " library calls in " << seconds_since(t0) << " s"
              << (exe->stats().cache_hit ? " (cache hit)" : "") << "\n";
    bad += compare_with_reference(dir, "optimized+compiled", exe->run(inputs), rtol, atol);

    std::cout << name << ": " << (bad ? "FAIL" : "PASS") << "\n";
    return bad ? 1 : 0;
  } catch (const std::exception& e) {
    std::cout << name << ": FAIL: " << e.what() << "\n";
    return 1;
  }
}
