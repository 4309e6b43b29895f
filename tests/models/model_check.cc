// kiln_onnx_model_check: imports one exported model, runs it in the reference interpreter on the
// inputs saved beside it and compares with PyTorch's outputs. Why: end-to-end evidence that real
// architectures (ResNet, MobileNetV3, Transformer, MiniLM) import and compute correctly.
//   usage: kiln_onnx_model_check DIR [rtol atol]   (DIR holds model.onnx, input_*.npy, output_*.npy)
#include <cmath>
#include <filesystem>
#include <iostream>

#include "kiln/interp.h"
#include "kiln/onnx.h"
#include "kiln/tensor_io.h"

namespace fs = std::filesystem;
using namespace kiln;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: kiln_onnx_model_check DIR [rtol atol]\n";
    return 2;
  }
  fs::path dir = argv[1];
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
      std::cout << dir.filename().string() << ": imported with symbolic dims\n";
    } catch (const UnsupportedError& e) {
      std::cout << dir.filename().string() << ": symbolic import needs static shapes (" << e.what() << "); specialising\n";
      g = import_onnx(model, opts);
    }
    auto outs = interp::run(*g, inputs);
    int bad = 0;
    for (size_t i = 0; i < outs.size(); ++i) {
      fs::path f = dir / str("output_", i, ".npy");
      if (!fs::exists(f)) continue;
      HostTensor want = read_npy(f.string());
      if (want.shape() != outs[i].shape()) {
        std::cout << dir.filename().string() << ": output " << i << " shape " << dims_to_string(outs[i].shape())
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
        if (!(err <= atol + rtol * std::fabs(b))) ++wrong;
      }
      std::cout << dir.filename().string() << ": output " << i << " " << dims_to_string(want.shape())
                << " max abs err " << max_err << (wrong ? str(", ", wrong, " elements out of tolerance") : "") << "\n";
      if (wrong) ++bad;
    }
    std::cout << dir.filename().string() << ": " << (bad ? "FAIL" : "PASS") << " (" << g->num_nodes() << " nodes)\n";
    return bad ? 1 : 0;
  } catch (const std::exception& e) {
    std::cout << dir.filename().string() << ": FAIL: " << e.what() << "\n";
    return 1;
  }
}
