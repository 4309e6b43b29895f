// The `kiln._kiln` extension module: Kiln's C++ API for the Python package (python/kiln). Why: one
// thin, typed layer; everything friendly (sessions, torch, errors with source lines) is Python.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.h"
#include "executable.h"
#include "graph_builder.h"
#include "kiln/error.h"
#include "kiln/onnx.h"
#include "kiln/ops.h"
#include "kiln/target.h"

namespace nb = nanobind;

namespace {

// kiln.Error and kiln.UnsupportedOpError; created once, alive for the process.
PyObject* g_error = nullptr;
PyObject* g_unsupported = nullptr;

void bind_errors(nb::module_& m) {
  g_error = PyErr_NewExceptionWithDoc(
      "kiln.Error", "A model, graph or input Kiln cannot take; the message names the node, op, input or file.",
      PyExc_RuntimeError, nullptr);
  g_unsupported = PyErr_NewExceptionWithDoc(
      "kiln.UnsupportedOpError", "Well formed, but uses an op (or dtype, opset) Kiln does not support.", g_error,
      nullptr);
  m.attr("Error") = nb::handle(g_error);
  m.attr("UnsupportedOpError") = nb::handle(g_unsupported);
  // One translator so the subclass is tried first.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const kiln::UnsupportedError& e) {
      PyErr_SetString(g_unsupported, e.what());
    } catch (const kiln::Error& e) {
      PyErr_SetString(g_error, e.what());
    }
  });
}

void bind_onnx(nb::module_& m) {
  m.def("load_onnx",
        [](const std::string& path, const std::map<std::string, int64_t>& dims) {
#ifndef KILN_HAVE_ONNX
          throw kiln::Error(kiln::str(path, ": this build of Kiln has no ONNX importer (libonnx-dev missing)"));
#endif
          kiln::ImportOptions options;
          options.dim_values = dims;
          std::shared_ptr<kiln::Graph> g;
#ifdef KILN_HAVE_ONNX
          {
            nb::gil_scoped_release release;
            g = kiln::import_onnx(path, options);
          }
#endif
          return kiln::py::PyGraph{g};
        },
        nb::arg("path"), nb::arg("dims") = std::map<std::string, int64_t>{},
        "Imports an .onnx file (dims: concrete sizes for named symbolic dims). Raises kiln.Error / "
        "kiln.UnsupportedOpError naming the file, node, op, domain and opset.");
}

}  // namespace

NB_MODULE(_kiln, m) {
  m.doc() = "Kiln's C++ API (the kiln package wraps it; see docs/python.md).";
  // Compiled partitions live in torch's Dynamo caches until the interpreter exits, by design; the
  // leak report nanobind prints for objects alive at exit would be noise in every torch program.
  nb::set_leak_warnings(false);
  bind_errors(m);
  kiln::py::bind_graph(m);
  kiln::py::bind_executable(m);
  bind_onnx(m);
  m.def("_borrowed_address",
        [](const kiln::py::InArray& a, const std::string& dtype) {
          kiln::HostTensor t = kiln::py::borrow_array(a, kiln::py::dtype_named(dtype, "probe"), "probe");
          return reinterpret_cast<uintptr_t>(t.raw());
        },
        nb::arg("array"), nb::arg("dtype"),
        "The address a Kiln tensor made from `array` reads (for the zero-copy tests).");
  m.def("op_names", []() {
    std::vector<std::string> names;
    for (int i = 0; i < kiln::kNumOps; ++i) names.emplace_back(kiln::op_name(kiln::Op(i)));
    return names;
  }, "Every op of the op table (src/ir/ops.def).");
  m.def("op_support",
        [](const std::string& target, const std::string& op) {
          std::optional<kiln::Op> o = kiln::op_from_name(op);
          KILN_CHECK(o.has_value(), "no op named '", op, "'");
          kiln::TargetKind kind = target == "cuda" ? kiln::TargetKind::Cuda : kiln::TargetKind::Cpu;
          const kiln::OpSupport& s = kiln::op_support(kind, *o);
          return std::make_pair(std::string(kiln::op_decision_name(s.decision)), std::string(s.note));
        },
        nb::arg("target"), nb::arg("op"), "(decision, note) of the target for an op (kiln ops).");
}
