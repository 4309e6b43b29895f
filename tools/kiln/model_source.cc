// Loading a command's model (see model_source.h).
#include "model_source.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <set>

#include "kiln/demo.h"
#include "kiln/error.h"
#include "kiln/onnx.h"
#include "kiln/trace.h"

namespace kiln::cli {

std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& dims) {
  std::map<std::string, int64_t> out;
  for (const auto& d : dims) {
    size_t eq = d.find('=');
    KILN_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < d.size(), "--dim expects NAME=VALUE, got '", d, "'");
    try {
      size_t used = 0;
      out[d.substr(0, eq)] = std::stoll(d.substr(eq + 1), &used);
      KILN_CHECK(used == d.size() - eq - 1, "");
    } catch (const std::exception&) {
      throw Error(str("--dim ", d, ": '", d.substr(eq + 1), "' is not an integer"));
    }
  }
  return out;
}

std::vector<HostTensor> random_inputs(const Graph& g, const std::map<std::string, int64_t>& dims, uint64_t seed) {
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value* v = g.inputs()[i];
    std::set<std::string> symbols;
    for (const SymInt& d : v->type.shape) d.collect_symbols(symbols);
    std::map<std::string, int64_t> b;
    for (const auto& s : symbols) b[s] = dims.count(s) ? dims.at(s) : 1;
    std::vector<int64_t> shape;
    for (const SymInt& d : v->type.shape) shape.push_back(d.evaluate(b));
    bool index_like = is_integer(v->type.dtype);
    inputs.push_back(HostTensor::random(v->type.dtype, shape, seed + i, index_like ? 0 : -1, index_like ? 9 : 1));
  }
  return inputs;
}

std::unique_ptr<Graph> load_model_file(const std::string& path, const ImportOptions& import_options) {
  if (std::filesystem::path(path).extension() != ".kir") return import_onnx(path, import_options);
  std::ifstream in(path);
  KILN_CHECK(in.good(), path, ": cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return parse_graph(text.str());
  } catch (const Error& e) {
    throw Error(str(path, ": ", e.what()));
  }
}

ModelSource load_model_source(const std::string& path, const std::map<std::string, int64_t>& dims, uint64_t seed) {
  const auto t0 = std::chrono::steady_clock::now();
  ModelSource m;
  if (path.empty()) {
    demo::BlockParams params = demo::make_block_params(demo::BlockConfig{}, seed);
    auto fn = [&](const Tensor& x) { return demo::transformer_block(x, params); };
    HostTensor x = HostTensor::random(DType::F32, {2, 16, 64}, seed + 3);
    TraceOptions options;
    options.name = "transformer_block";
    options.dynamic_dims = {{0, 0, "B"}, {0, 1, "T"}};
    TracedFunction traced = trace(fn, Tensor::from_host(x), options);
    traced(Tensor::from_host(x));
    m.label = "transformer_block (built-in)";
    m.graph = traced.graph().clone();
    m.inputs = {x};
  } else {
    KILN_CHECK(std::filesystem::is_regular_file(path), path, ": no such model file");
    ImportOptions import_options;
    import_options.dim_values = dims;
    m.label = path;
    m.graph = load_model_file(path, import_options);
    m.inputs = random_inputs(*m.graph, dims, seed);
  }
  m.import_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

}  // namespace kiln::cli
