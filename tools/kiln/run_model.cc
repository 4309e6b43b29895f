// `kiln run MODEL.onnx`: the main job on a real model (see run_model.h).
#include "run_model.h"

#include <cmath>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "kernels/cpu/eager.h"
#include "kiln/demo.h"
#include "kiln/error.h"
#include "kiln/passes.h"
#include "kiln/interp.h"
#include "kiln/onnx.h"
#include "kiln/tensor_io.h"
#include "kiln/aot.h"
#include "model_source.h"
#include "trace_events.h"

namespace kiln::cli {

namespace {
std::pair<std::string, std::string> split_assignment(const std::string& s, const char* flag) {
  size_t eq = s.find('=');
  KILN_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < s.size(), flag, " expects NAME=VALUE, got '", s, "'");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

std::string summary(const HostTensor& t) {
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t nans = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.get_f64(i);
    if (std::isnan(v)) { ++nans; continue; }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  int64_t n = t.numel() - nans;
  return str("min ", n ? lo : NAN, "  max ", n ? hi : NAN, "  mean ", n ? sum / double(n) : NAN,
             nans ? str("  NaN x", nans) : std::string(), "  ", t.to_string(4));
}
}  // namespace

void add_model_options(CLI::App& app, ModelRunOptions& o) {
  app.add_option("--input", o.inputs, "NAME=FILE: an input tensor (.npy or ONNX .pb); others are seeded random");
  app.add_option("--expect", o.expects, "NAME=FILE: a reference output; exit 1 beyond tolerance");
  app.add_option("--dim", o.dims, "NAME=VALUE: size of a symbolic dim for random inputs (default 1)");
  app.add_option("--save", o.save_dir, "Write every output as DIR/<output-name>.npy");
  app.add_flag("--check", o.check, "Also run the reference interpreter and print the max error");
  app.add_option("--dtype", o.dtype,
                 "f16 or bf16: run an f32 model in 16-bit precision (f32 inputs and outputs, f32 accumulation); "
                 "outputs are compared with the 16-bit tolerance")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
}

int run_model(const std::string& path, const ModelRunOptions& o, const ExecOptions& exec, bool json) {
  ImportOptions import_options;
  std::map<std::string, int64_t> dim_values;
  for (const auto& d : o.dims) {
    auto [name, value] = split_assignment(d, "--dim");
    try {
      dim_values[name] = std::stoll(value);
    } catch (const std::exception&) {
      throw Error(str("--dim ", d, ": '", value, "' is not an integer"));
    }
  }
  import_options.dim_values = dim_values;
  std::unique_ptr<Graph> g;
  std::shared_ptr<Executable> prebuilt;  // `kiln run DIR` on a `kiln compile` artefact
  if (is_compiled_artefact(path)) {
    PhaseScope phase("load artefact");
    KILN_CHECK(exec.target->kind() == TargetKind::Cpu, path, ": compiled artefacts are CPU artefacts; use --device cpu");
    CompiledArtefact a = load_compiled_artefact(path, exec.threads);
    g = a.graph->clone();
    prebuilt = a.executable;
  } else {
    PhaseScope phase("import");
    g = load_model_file(path, import_options);
  }

  // The precision the model computes in (--dtype): comparisons use its tolerance.
  const DType compute_dtype = o.dtype.empty() ? DType::F32 : *parse_dtype(o.dtype);
  if (compute_dtype != DType::F32) {
    PhaseScope phase("convert precision");
    g = to_float_precision(*g, compute_dtype);
  }

  std::map<std::string, HostTensor> given;
  for (const auto& in : o.inputs) {
    auto [name, file] = split_assignment(in, "--input");
    given[name] = read_tensor_file(file);
  }
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < g->inputs().size(); ++i) {
    const Value* v = g->inputs()[i];
    auto it = given.find(v->name);
    if (it != given.end()) {
      inputs.push_back(it->second);
      given.erase(it);
      continue;
    }
    std::set<std::string> symbols;
    for (const SymInt& d : v->type.shape) d.collect_symbols(symbols);
    std::map<std::string, int64_t> b;
    for (const auto& s : symbols) b[s] = dim_values.count(s) ? dim_values[s] : 1;
    std::vector<int64_t> shape;
    for (const SymInt& d : v->type.shape) shape.push_back(d.evaluate(b));
    bool index_like = is_integer(v->type.dtype);
    inputs.push_back(HostTensor::random(v->type.dtype, shape, o.seed + i, index_like ? 0 : -1, index_like ? 9 : 1));
  }
  KILN_CHECK(given.empty(), path, ": --input names '", given.begin()->first, "', which is not an input of the model");

  Scoreboard sb;
  std::vector<HostTensor> outs;
  std::string how;
  if (prebuilt && exec.compile) {  // --eager runs the artefact's graph one op at a time
    outs = run_measured(*prebuilt, inputs, sb);
    how = str("loaded the ahead-of-time artefact (", prebuilt->stats().kernels_generated, " generated kernels, ",
              prebuilt->stats().library_calls, " library calls; no compiler run)");
  } else if (exec.compile) {
    CompiledGraph compiled = optimize_and_compile(*g, exec);
    outs = run_measured(*compiled.executable, inputs, sb);
    const CompileStats& cs = compiled.executable->stats();
    how = str("optimised (", compiled.pass_stats.nodes_before, " -> ", compiled.pass_stats.nodes_after,
              " nodes) and compiled (", cs.kernels_generated, " generated kernels, ", cs.library_calls,
              " library calls, ", cs.cache_hit ? std::string("cache hit") : str(cs.compile_ms, " ms compiling"), ")");
  } else {
    auto run_eager = [&](Scoreboard* board) {
      return exec.target->run_eager(*g, inputs, board);
    };
    run_eager(nullptr);  // warm up
    TraceRecorder* trace = active_trace();
    double t0 = trace ? trace->now_us() : 0;
    outs = run_eager(&sb);
    if (trace) {
      trace->phase("run (eager)", t0, trace->now_us() - t0);
      trace->kernels(sb, t0, "eager");
    }
    how = "eager (one kernel per op)";
  }

  bool ok = true;
  nlohmann::json report;
  report["model"] = path;
  report["mode"] = exec.compile ? "compiled" : "eager";
  report["outputs"] = nlohmann::json::array();
  std::vector<HostTensor> reference;
  if (o.check) reference = interp::run(*g, inputs);
  std::map<std::string, std::string> expects;
  for (const auto& e : o.expects) {
    auto [name, file] = split_assignment(e, "--expect");
    expects[name] = file;
  }
  if (!json) std::cout << "kiln run " << path << ": " << how << "\n";
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string name = g->outputs()[i]->name.empty() ? str("output", i) : g->outputs()[i]->name;
    nlohmann::json entry = {{"name", name}, {"type", std::string(dtype_name(outs[i].dtype())) + dims_to_string(outs[i].shape())}};
    if (!json) std::cout << "  " << name << ": " << dtype_name(outs[i].dtype()) << dims_to_string(outs[i].shape())
                         << "  " << summary(outs[i]) << "\n";
    auto compare_with = [&](const HostTensor& want, const std::string& label) {
      const DType judged = outs[i].dtype() == DType::F32 && compute_dtype != DType::F32 ? compute_dtype : outs[i].dtype();
      const auto [atol, rtol] = demo::tolerances_for(judged, o.atol, o.rtol);
      demo::Agreement a = demo::compare(want, outs[i], atol, rtol);
      entry[label] = {{"max_abs_error", a.max_abs_error}, {"max_rel_error", a.max_rel_error}, {"ok", a.within_tolerance}};
      if (!json) std::cout << "    vs " << label << ": " << a.to_string() << "\n";
      ok = ok && a.within_tolerance;
    };
    if (o.check) compare_with(reference[i], "interpreter");
    if (auto it = expects.find(name); it != expects.end()) {
      compare_with(read_tensor_file(it->second), "expected");
      expects.erase(it);
    }
    if (!o.save_dir.empty()) {
      std::filesystem::create_directories(o.save_dir);
      write_npy((std::filesystem::path(o.save_dir) / (name + ".npy")).string(), outs[i]);
    }
    report["outputs"].push_back(entry);
  }
  KILN_CHECK(expects.empty(), path, ": --expect names '", expects.begin()->first, "', which is not an output of the model");
  if (json) {
    report["scoreboard"] = nlohmann::json::parse(sb.to_json());
    report["ok"] = ok;
    std::cout << report.dump(2) << "\n";
  } else {
    std::cout << "\n" << sb.table(str(exec.compile ? "compiled" : "eager", " scoreboard")) << "\n"
              << (ok ? "OK\n" : "MISMATCH: outputs differ beyond tolerance (see above)\n");
  }
  return ok ? 0 : 1;
}

}  // namespace kiln::cli
