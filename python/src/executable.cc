// Python bindings of compile_for, Executable::run, explain and the AOT artefact (executable.h).
#include "executable.h"

#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "../../tools/kiln/explain_report.h"
#include "arrays.h"
#include "graph_builder.h"
#include "kiln/aot.h"
#include "kiln/error.h"
#include "kiln/passes.h"
#include "kiln/target.h"

namespace kiln::py {

namespace {

std::vector<HostTensor> borrow_inputs(const std::vector<InArray>& arrays, const std::vector<std::string>& dtypes,
                                      const Graph& g) {
  KILN_CHECK(arrays.size() == dtypes.size(), "run: ", arrays.size(), " arrays but ", dtypes.size(), " dtypes");
  KILN_CHECK(arrays.size() == g.inputs().size(), "run: the graph takes ", g.inputs().size(), " inputs, got ",
             arrays.size());
  std::vector<HostTensor> in;
  for (size_t i = 0; i < arrays.size(); ++i) {
    std::string what = str("input '", g.inputs()[i]->name, "'");
    in.push_back(borrow_array(arrays[i], dtype_named(dtypes[i], what), what));
  }
  return in;
}

std::vector<std::pair<nb::object, std::string>> to_arrays(std::vector<HostTensor> out) {
  std::vector<std::pair<nb::object, std::string>> result;
  for (HostTensor& t : out) {
    std::string d(dtype_name(t.dtype()));
    result.emplace_back(array_of(std::move(t)), d);
  }
  return result;
}

nb::dict stats_dict(const CompileStats& s) {
  nb::dict d;
  d["kernels_generated"] = s.kernels_generated;
  d["library_calls"] = s.library_calls;
  d["cache_hit"] = s.cache_hit;
  d["lower_ms"] = s.lower_ms;
  d["compile_ms"] = s.compile_ms;
  d["load_ms"] = s.load_ms;
  d["cache_key"] = s.cache_key;
  d["shared_object"] = s.shared_object;
  return d;
}

}  // namespace

void bind_executable(nb::module_& m) {
  nb::class_<PyExecutable>(m, "Executable", "A graph compiled for a target.")
      .def("run",
           [](PyExecutable& e, const std::vector<InArray>& arrays, const std::vector<std::string>& dtypes) {
             std::vector<HostTensor> in = borrow_inputs(arrays, dtypes, *e.graph);
             std::vector<HostTensor> out;
             {
               nb::gil_scoped_release release;
               out = e.exe->run(in);
             }
             unalias_outputs(out, in);
             return to_arrays(std::move(out));
           },
           nb::arg("arrays"), nb::arg("dtypes"),
           "Runs on C-contiguous arrays (read in place, not copied; dtypes are Kiln's names, bf16 as 16-bit "
           "integers): [(array, dtype)] per output.")
      .def("explain", [](const PyExecutable& e) { return e.exe->explain(); },
           "Fusion decisions and refusals, Loop IR, generated source and memory plan.")
      .def("explain_report",
           [](PyExecutable& e, const std::string& label, const std::vector<InArray>& arrays,
              const std::vector<std::string>& dtypes, int repeats) {
             KILN_CHECK(e.device == "cpu", "explain measures CPU executables only (this one is for ", e.device, ")");
             std::vector<HostTensor> in = borrow_inputs(arrays, dtypes, *e.graph);
             nb::gil_scoped_release release;
             cli::ExplainReport r = cli::explain_executable(label, *e.exe, in, cpu_target().ceilings(), repeats);
             return std::make_pair(r.to_text(), r.to_json());
           },
           nb::arg("label"), nb::arg("arrays"), nb::arg("dtypes"), nb::arg("repeats") = 5,
           "`kiln explain`'s report on these inputs: (text, json).")
      .def_prop_ro("stats", [](const PyExecutable& e) { return stats_dict(e.exe->stats()); })
      .def_prop_ro("reference_fallbacks", [](const PyExecutable& e) { return e.exe->last_run().reference_fallbacks; },
                   "Ops of the last run that ran no fast kernel (reference kernel or interpreter).")
      .def_prop_ro("graph", [](const PyExecutable& e) { return PyGraph{std::const_pointer_cast<Graph>(e.graph)}; },
                   "The (optimised) graph it runs.")
      .def_prop_ro("device", [](const PyExecutable& e) { return e.device; })
      .def("save",
           [](const PyExecutable& e, const std::string& dir) {
             KILN_CHECK(e.device == "cpu", "save: only CPU executables have an artefact format (this one is for ",
                        e.device, ")");
             nb::gil_scoped_release release;
             save_compiled(*e.graph, *e.exe, dir, CompileOptions{});
           },
           nb::arg("dir"), "Writes `kiln compile`'s artefact (kiln::load_compiled loads it from C++).");

  m.def("compile",
        [](const PyGraph& g, const std::string& device, int num_threads, bool optimize, const std::string& cache_dir) {
          const Target& target = target_named(device);  // throws naming the device (and why CUDA is unavailable)
          CompileOptions options;
          options.num_threads = num_threads;
          if (!cache_dir.empty()) options.cache_dir = cache_dir;
          PyExecutable out;
          {
            nb::gil_scoped_release release;
            std::shared_ptr<Graph> optimized = g.graph->clone();
            if (optimize) {
              kiln::optimize(*optimized, target.optimize_options());
              // A pass that replaces an output value (softmax decomposed, say) does not carry the
              // output's name over (Graph::replace_all_uses); sessions and the saved artefact need
              // it, and it must be there before compiling (names reach the generated source).
              const std::vector<Value*>& outs = optimized->outputs();
              for (size_t i = 0; i < outs.size() && i < g.graph->outputs().size(); ++i)
                if (outs[i]->name.empty()) outs[i]->name = g.graph->outputs()[i]->name;
            }
            CompileForOptions how;
            how.optimize = false;  // done above: compile_for's own pipeline would be the same
            out.exe = compile_for(*optimized, target, options, how);
            out.graph = optimized;
          }
          out.device = std::string(target.name());
          return out;
        },
        nb::arg("graph"), nb::arg("device") = "cpu", nb::arg("num_threads") = 0, nb::arg("optimize") = true,
        nb::arg("cache_dir") = "",
        "Optimises the graph with the target's pipeline and compiles it (compile_for). Symbolic dims stay "
        "symbolic: one Executable serves every size. Kernels come from the on-disk compile cache when present.");

  m.def("load_compiled",
        [](const std::string& dir, int num_threads) {
          CompiledArtefact a;
          {
            nb::gil_scoped_release release;
            a = load_compiled_artefact(dir, num_threads);
          }
          return PyExecutable{a.executable, a.graph, "cpu"};
        },
        nb::arg("dir"), nb::arg("num_threads") = 0, "Loads a `kiln compile` artefact without a C++ compiler.");

  m.def("cache_dir", []() { return compile_cache_dir(); }, "The compile cache directory.");
  m.def("cuda_unavailable_reason", []() { return cuda_target()->unavailable_reason(); },
        "Empty when the CUDA target can run here; else why not.");
}

}  // namespace kiln::py
