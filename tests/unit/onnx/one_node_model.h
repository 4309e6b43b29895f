// A one-node ONNX model built in memory for importer tests: typed graph inputs with static dims,
// the node with its attributes, its outputs; imported and run in the interpreter, or the import
// error returned. Why: the decomposition and quantization tests build hundreds of such models.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/interp.h"
#include "kiln/onnx.h"

namespace kiln::testing {

struct Io {
  std::string name;
  int elem;
  std::vector<int64_t> dims;
};

// A one-node model: inputs (graph inputs), the node, one output (shape left to the importer).
struct OneNode {
  onnx::ModelProto m;
  onnx::NodeProto* node;
  // output_elem: the element type declared for the outputs (0: left to the importer).
  OneNode(const std::string& op, const std::vector<Io>& ins, std::vector<std::string> outs, int opset = 18,
          int output_elem = onnx::TensorProto::FLOAT) {
    m.set_ir_version(opset >= 19 ? 9 : 8);
    auto* os = m.add_opset_import();
    os->set_domain("");
    os->set_version(opset);
    auto* g = m.mutable_graph();
    node = g->add_node();
    node->set_op_type(op);
    node->set_name("the_" + op);
    for (const auto& i : ins) {
      node->add_input(i.name);
      if (i.name.empty()) continue;
      auto* vi = g->add_input();
      vi->set_name(i.name);
      auto* tt = vi->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(i.elem);
      tt->mutable_shape();  // a scalar has a shape with no dims
      for (int64_t d : i.dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
    }
    for (const auto& o : outs) {
      node->add_output(o);
      if (o.empty()) continue;
      auto* vo = g->add_output();
      vo->set_name(o);
      if (output_elem != 0) vo->mutable_type()->mutable_tensor_type()->set_elem_type(output_elem);
    }
  }
  void attr(const std::string& n, int64_t v) {
    auto* a = node->add_attribute();
    a->set_name(n);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  void attr(const std::string& n, const std::string& v) {
    auto* a = node->add_attribute();
    a->set_name(n);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  void attr(const std::string& n, std::vector<int64_t> v) {
    auto* a = node->add_attribute();
    a->set_name(n);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  std::vector<HostTensor> run(const std::vector<HostTensor>& feed, std::map<std::string, HostTensor> statics = {}) {
    std::string b;
    m.SerializeToString(&b);
    ImportOptions o;
    o.static_input_values = std::move(statics);
    auto g = import_onnx_bytes(b, "decomp.onnx", o);
    std::vector<HostTensor> in;
    size_t k = 0;
    for (const Value* v : g->inputs()) {
      (void)v;
      in.push_back(feed.at(k++));
    }
    return interp::run(*g, in);
  }
  // The import error message (empty when the import succeeds).
  std::string import_error() {
    std::string b;
    m.SerializeToString(&b);
    try {
      import_onnx_bytes(b, "decomp.onnx");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

}  // namespace kiln::testing
