// Loading and judging one ONNX backend node test (see conformance.h).
#include <algorithm>
#include <cmath>
#include <map>

#include "conformance.h"
#include "kiln/interp.h"
#include "kiln/onnx.h"
#include "kiln/tensor_io.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace conformance {

namespace {

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

// Imports the model so that its data inputs stay graph inputs wherever the importer can do
// without their values: first with the declared shapes, then with the data's concrete shapes (a
// Shape of a symbolic dim feeding a Reshape), and only then freezing every input that reaches an
// operand the importer needs as a constant (a Reshape's shape, Slice's starts, TopK's k...).
std::unique_ptr<Graph> import_with_inputs(const std::string& model, const std::map<std::string, HostTensor>& given) {
  ImportOptions opts;
  opts.static_input_values = given;
  for (const auto& [name, value] : given)  // a sequence's length and element shapes are part of its type
    if (!value.is_tensor() && !(value.kind() == ValueKind::Optional && value.items().empty()))
      opts.input_types[name] = type_of(value);
  opts.freeze_through_shape = false;
  try {
    return import_onnx(model, opts);
  } catch (const UnsupportedError&) {
  }
  for (const auto& [name, value] : given)
    if (value.is_tensor()) opts.input_shapes[name] = value.shape();
  try {
    return import_onnx(model, opts);
  } catch (const UnsupportedError&) {
  }
  opts.input_shapes.clear();
  opts.freeze_through_shape = true;
  return import_onnx(model, opts);
}

}  // namespace

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '|' || c == '\t') c = ' ';
  if (s.size() > 300) s = s.substr(0, 300) + "...";
  return s;
}

std::string compare(const HostTensor& got, const HostTensor& want, const std::string& name) {
  if (got.kind() != want.kind() || !want.is_tensor()) {  // sequences and optionals: element by element
    if (got.kind() != want.kind()) return str("output '", name, "' is ", got.to_string(2), ", expected ", want.to_string(2));
    if (got.items().size() != want.items().size())
      return str("output '", name, "' has ", got.items().size(), " elements, expected ", want.items().size());
    for (size_t i = 0; i < want.items().size(); ++i) {
      std::string diff = compare(got.items()[i], want.items()[i], str(name, "[", i, "]"));
      if (!diff.empty()) return diff;
    }
    return "";
  }
  if (got.dtype() != want.dtype())
    return str("output '", name, "' has dtype ", dtype_name(got.dtype()), ", expected ", dtype_name(want.dtype()));
  if (got.shape() != want.shape())
    return str("output '", name, "' has shape ", dims_to_string(got.shape()), ", expected ", dims_to_string(want.shape()));
  if (want.dtype() == DType::Str) {  // strings compare exactly, byte for byte
    for (int64_t i = 0; i < want.numel(); ++i)
      if (got.str_at(i) != want.str_at(i))
        return str("output '", name, "' differs first at ", i, ": got \"", got.str_at(i), "\", expected \"",
                   want.str_at(i), "\"");
    return "";
  }
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

std::string compare_outputs(const std::vector<HostTensor>& got, const DataSet& ds) {
  if (got.size() != ds.expected.size())
    return str("graph has ", got.size(), " outputs, test data has ", ds.expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    std::string diff = compare(got[i], ds.expected[i], ds.output_names[i].empty() ? str(i) : ds.output_names[i]);
    if (!diff.empty()) return diff;
  }
  return "";
}

std::vector<DataSet> load_test(const fs::path& dir, std::string* problem) {
  fs::path model = dir / "model.onnx";
  std::vector<std::string> names = onnx_input_names(model.string());
  OnnxValueKinds kinds = onnx_value_kinds(model.string());
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  std::vector<DataSet> out;
  if (sets.empty()) {
    *problem = "no test_data_set_* folder";
    return out;
  }
  for (const auto& set : sets) {
    std::map<std::string, HostTensor> given;
    auto in_files = numbered(set, "input_");
    if (in_files.size() > names.size()) {
      *problem = "more input files than graph inputs";
      return {};
    }
    for (size_t i = 0; i < in_files.size(); ++i) {
      std::string n;
      try {
        given[names[i]] = read_value_pb(in_files[i].string(), kinds.inputs[i], &n);  // by position, as ONNX's runner
      } catch (const Error&) {
        import_onnx(model.string());  // sequence/optional inputs: let the importer say "unsupported"
        throw;
      }
    }
    DataSet ds;
    ds.graph = import_with_inputs(model.string(), given);
    for (const auto& [name, value] : given) {
      bool is_input = false;
      for (const Value* in : ds.graph->inputs()) is_input |= in->name == name;
      if (!is_input) ds.frozen_inputs.push_back(name);
    }
    for (const Value* in : ds.graph->inputs()) {
      auto it = given.find(in->name);
      if (it == given.end()) {
        *problem = str("no data for graph input '", in->name, "'");
        return {};
      }
      ds.feed.push_back(it->second);
    }
    auto out_files = numbered(set, "output_");
    for (size_t i = 0; i < out_files.size(); ++i) {
      const auto& f = out_files[i];
      std::string n;
      ds.expected.push_back(read_value_pb(f.string(), i < kinds.outputs.size() ? kinds.outputs[i] : ValueKind::Tensor, &n));
      ds.output_names.push_back(n);
    }
    out.push_back(std::move(ds));
  }
  return out;
}

std::string run_interpreted(const fs::path& dir) {
  try {
    std::string problem;
    std::vector<DataSet> sets = load_test(dir, &problem);
    if (!problem.empty()) return "FAIL: " + problem;
    for (const DataSet& ds : sets) {
      std::string diff = compare_outputs(interp::run(*ds.graph, ds.feed), ds);
      if (!diff.empty()) return "FAIL: " + diff;
    }
    return "PASS";
  } catch (const UnsupportedError& e) {
    return std::string("UNSUPPORTED: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("FAIL: ") + e.what();
  }
}

}  // namespace conformance
