// Tests for the ONNX importer and tensor files: small models built with the onnx protobuf API,
// imported, run in the interpreter and checked against values computed here; and bad input that
// must give a kiln::Error naming the problem (never a crash).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "kiln/interp.h"
#include "kiln/onnx.h"
#include "kiln/tensor_io.h"

namespace kiln {
namespace {

void add_io(onnx::ValueInfoProto* vi, const std::string& name, int elem, std::vector<std::string> dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  for (const auto& d : dims) {
    auto* dim = tt->mutable_shape()->add_dim();
    if (std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
    else dim->set_dim_param(d);
  }
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                          std::vector<std::string> out, const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? op + "_" + out[0] : name);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

onnx::ModelProto base_model(int opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(opset);
  return m;
}

std::string bytes(const onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

TEST(OnnxImport, LeakyReluGemmMatchesHandComputed) {
  auto m = base_model();
  auto* g = m.mutable_graph();
  add_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"3", "5"});
  add_io(g->add_input(), "w", onnx::TensorProto::FLOAT, {"7", "5"});
  add_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"3", "7"});
  auto* gemm = add_node(g, "Gemm", {"x", "w"}, {"h"});
  auto* tb = gemm->add_attribute();
  tb->set_name("transB");
  tb->set_type(onnx::AttributeProto::INT);
  tb->set_i(1);
  auto* al = gemm->add_attribute();
  al->set_name("alpha");
  al->set_type(onnx::AttributeProto::FLOAT);
  al->set_f(0.5f);
  auto* lr = add_node(g, "LeakyRelu", {"h"}, {"y"});
  auto* a = lr->add_attribute();
  a->set_name("alpha");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(0.1f);
  auto graph = import_onnx_bytes(bytes(m), "test.onnx");
  HostTensor x = HostTensor::random(DType::F32, {3, 5}, 1), w = HostTensor::random(DType::F32, {7, 5}, 2);
  auto out = interp::run(*graph, {x, w});
  ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{3, 7}));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 7; ++j) {
      double s = 0;
      for (int k = 0; k < 5; ++k) s += x.get_f64(i * 5 + k) * w.get_f64(j * 5 + k);
      s *= 0.5;
      double want = s > 0 ? s : 0.1 * s;
      EXPECT_NEAR(out[0].get_f64(i * 7 + j), want, 1e-5);
    }
}

TEST(OnnxImport, DimParamBecomesSymbolAndShapeSubgraphFeedsReshape) {
  // y = Reshape(x, Concat(Shape(x)[0:1], [-1])): a typical exporter shape sub-graph.
  auto m = base_model();
  auto* g = m.mutable_graph();
  add_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"batch", "3", "4"});
  add_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"batch", "12"});
  add_node(g, "Shape", {"x"}, {"s"});
  auto* idx = g->add_initializer();
  idx->set_name("zero");
  idx->set_data_type(onnx::TensorProto::INT64);
  idx->add_dims(1);
  idx->add_int64_data(0);
  auto* minus = g->add_initializer();
  minus->set_name("minus_one");
  minus->set_data_type(onnx::TensorProto::INT64);
  minus->add_dims(1);
  minus->add_int64_data(-1);
  add_node(g, "Gather", {"s", "zero"}, {"b"});
  auto* cat = add_node(g, "Concat", {"b", "minus_one"}, {"target"});
  auto* ax = cat->add_attribute();
  ax->set_name("axis");
  ax->set_type(onnx::AttributeProto::INT);
  ax->set_i(0);
  add_node(g, "Reshape", {"x", "target"}, {"y"});
  auto graph = import_onnx_bytes(bytes(m), "sym.onnx");
  EXPECT_EQ(graph->inputs()[0]->type.shape[0], SymInt::symbol("batch"));
  EXPECT_EQ(graph->outputs()[0]->type.to_string(), "f32[batch, 12]");
  HostTensor x = HostTensor::random(DType::F32, {5, 3, 4}, 3);
  auto out = interp::run(*graph, {x});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{5, 12}));
  EXPECT_TRUE(out[0].reshaped({5, 3, 4}).bit_equal(x));
}

TEST(OnnxImport, EinsumBatchMatmulMatchesLoops) {
  auto m = base_model();
  auto* g = m.mutable_graph();
  add_io(g->add_input(), "a", onnx::TensorProto::FLOAT, {"2", "3", "5"});
  add_io(g->add_input(), "b", onnx::TensorProto::FLOAT, {"2", "5", "4"});
  add_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"2", "4", "3"});
  auto* e = add_node(g, "Einsum", {"a", "b"}, {"y"});
  auto* eq = e->add_attribute();
  eq->set_name("equation");
  eq->set_type(onnx::AttributeProto::STRING);
  eq->set_s("bij,bjk->bki");
  auto graph = import_onnx_bytes(bytes(m), "einsum.onnx");
  HostTensor a = HostTensor::random(DType::F32, {2, 3, 5}, 4), b = HostTensor::random(DType::F32, {2, 5, 4}, 5);
  auto out = interp::run(*graph, {a, b});
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 4; ++k) {
        double s = 0;
        for (int j = 0; j < 5; ++j) s += a.get_f64((n * 3 + i) * 5 + j) * b.get_f64((n * 5 + j) * 4 + k);
        EXPECT_NEAR(out[0].get_f64((n * 4 + k) * 3 + i), s, 1e-5);
      }
}

// Opset-1 models load node by node: Not is defined as in opset 6 and runs; Add-1 (consumed_inputs,
// no broadcasting) is not, and the error names the node, the opset and the definition to convert to.
TEST(OnnxImport, OldOpsetLoadsOpsWhoseDefinitionIsUnchanged) {
  {
    auto m = base_model(1);
    auto* g = m.mutable_graph();
    add_io(g->add_input(), "x", onnx::TensorProto::BOOL, {"3", "7"});
    add_io(g->add_output(), "y", onnx::TensorProto::BOOL, {"3", "7"});
    add_node(g, "Not", {"x"}, {"y"});
    auto graph = import_onnx_bytes(bytes(m), "not1.onnx");
    HostTensor x = HostTensor::zeros(DType::Bool, {3, 7});
    for (int64_t i = 0; i < 21; ++i) x.set_i64(i, (i * 7 + 3) % 5 < 2);
    auto out = interp::run(*graph, {x});
    for (int64_t i = 0; i < 21; ++i) EXPECT_EQ(out[0].get_i64(i), 1 - x.get_i64(i)) << i;
  }
  {
    auto m = base_model(1);
    auto* g = m.mutable_graph();
    add_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2"});
    add_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"2"});
    add_node(g, "Add", {"x", "x"}, {"y"}, "old_add");
    try {
      import_onnx_bytes(bytes(m), "add1.onnx");
      FAIL();
    } catch (const UnsupportedError& e) {
      std::string msg = e.what();
      for (const char* part : {"old_add", "add1.onnx", "opset 1", "opset-1 definition", "Add-6", "opset 6 or newer"})
        EXPECT_NE(msg.find(part), std::string::npos) << msg;
    }
  }
  {  // an op that did not exist yet
    auto m = base_model(3);
    auto* g = m.mutable_graph();
    add_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2"});
    add_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"2"});
    add_node(g, "Erf", {"x"}, {"y"}, "early_erf");
    try {
      import_onnx_bytes(bytes(m), "erf3.onnx");
      FAIL();
    } catch (const UnsupportedError& e) {
      std::string msg = e.what();
      for (const char* part : {"early_erf", "does not exist", "opset 3"}) EXPECT_NE(msg.find(part), std::string::npos) << msg;
    }
  }
}

TEST(OnnxImport, TopKAndCumSumKernels) {
  auto m = base_model();
  auto* g = m.mutable_graph();
  add_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"7"});
  add_io(g->add_output(), "v", onnx::TensorProto::FLOAT, {"3"});
  add_io(g->add_output(), "i", onnx::TensorProto::INT64, {"3"});
  add_io(g->add_output(), "c", onnx::TensorProto::FLOAT, {"7"});
  auto* k = g->add_initializer();
  k->set_name("k");
  k->set_data_type(onnx::TensorProto::INT64);
  k->add_dims(1);
  k->add_int64_data(3);
  auto* axis = g->add_initializer();
  axis->set_name("axis");
  axis->set_data_type(onnx::TensorProto::INT64);
  axis->add_int64_data(0);
  add_node(g, "TopK", {"x", "k"}, {"v", "i"});
  add_node(g, "CumSum", {"x", "axis"}, {"c"});
  auto graph = import_onnx_bytes(bytes(m), "topk.onnx");
  HostTensor x = HostTensor::from_doubles(DType::F32, {7}, {3, -1, 9, 4, 9, 0, 2});
  auto out = interp::run(*graph, {x});
  EXPECT_EQ(out[0].to_doubles(), (std::vector<double>{9, 9, 4}));
  EXPECT_EQ(out[1].get_i64(0), 2);  // ties: lower index first
  EXPECT_EQ(out[1].get_i64(1), 4);
  EXPECT_EQ(out[1].get_i64(2), 3);
  EXPECT_EQ(out[2].to_doubles(), (std::vector<double>{3, 2, 11, 15, 24, 24, 26}));
}

TEST(OnnxImport, BadInputGivesClearErrors) {
  EXPECT_THROW(import_onnx_bytes("\x08\x07garbage\xff\xff\xff", "bad.onnx"), Error);
  try {
    import_onnx("/nonexistent/model.onnx");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.onnx"), std::string::npos);
  }
  {  // dangling input
    auto m = base_model();
    auto* g = m.mutable_graph();
    add_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2"});
    add_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"2"});
    add_node(g, "Add", {"x", "ghost"}, {"y"}, "the_add");
    try {
      import_onnx_bytes(bytes(m), "dangling.onnx");
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("ghost"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("the_add"), std::string::npos);
    }
  }
  {  // cycle
    auto m = base_model();
    auto* g = m.mutable_graph();
    add_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2"});
    add_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"2"});
    add_node(g, "Add", {"x", "z"}, {"y"}, "first");
    add_node(g, "Relu", {"y"}, {"z"}, "second");
    EXPECT_THROW(import_onnx_bytes(bytes(m), "cycle.onnx"), Error);
  }
  {  // unsupported op names op, domain and opset
    auto m = base_model(18);
    auto* g = m.mutable_graph();
    add_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2"});
    add_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"2"});
    add_node(g, "FancyOp", {"x"}, {"y"}, "fancy");
    try {
      import_onnx_bytes(bytes(m), "unsup.onnx");
      FAIL();
    } catch (const UnsupportedError& e) {
      std::string msg = e.what();
      for (const char* part : {"FancyOp", "fancy", "opset 18", "ai.onnx", "unsup.onnx"})
        EXPECT_NE(msg.find(part), std::string::npos) << msg;
    }
  }
  {  // initializer with wrong data size, absurd shape
    auto m = base_model();
    auto* g = m.mutable_graph();
    add_io(g->add_output(), "w", onnx::TensorProto::FLOAT, {"4"});
    auto* w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(int64_t(1) << 40);
    w->add_dims(int64_t(1) << 40);
    w->set_raw_data("abcd");
    EXPECT_THROW(import_onnx_bytes(bytes(m), "absurd.onnx"), Error);
  }
}

TEST(OnnxImport, ConvTransposeWithShortStridesIsAnErrorNotACrash) {  // found by scripts/fuzz-onnx
  auto m = base_model();
  auto* g = m.mutable_graph();
  add_io(g->add_input(), "X", onnx::TensorProto::FLOAT, {"1", "1", "3", "3"});
  add_io(g->add_input(), "W", onnx::TensorProto::FLOAT, {"1", "2", "3", "3"});
  add_io(g->add_output(), "Y", onnx::TensorProto::FLOAT, {"1", "2", "10", "8"});
  auto* n = add_node(g, "ConvTranspose", {"X", "W"}, {"Y"});
  auto* st = n->add_attribute();
  st->set_name("strides");
  st->set_type(onnx::AttributeProto::INTS);
  st->add_ints(3);
  auto* os = n->add_attribute();
  os->set_name("output_shape");
  os->set_type(onnx::AttributeProto::INTS);
  os->add_ints(10);
  EXPECT_THROW(import_onnx_bytes(bytes(m), "short_strides.onnx"), Error);
}

TEST(TensorIo, NpyAndPbRoundTripEveryDtype) {
  auto dir = std::filesystem::temp_directory_path() / "kiln_tensor_io_test";
  std::filesystem::create_directories(dir);
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::I8, DType::I16, DType::I32, DType::I64, DType::U8, DType::U16, DType::U32, DType::Bool}) {
    HostTensor t = HostTensor::random(dt, {3, 1, 5}, 7, dt == DType::Bool ? 0 : -5, dt == DType::Bool ? 1 : 5);
    std::string npy = (dir / "t.npy").string(), pb = (dir / "t.pb").string();
    write_tensor_file(npy, t);
    write_tensor_file(pb, t, "named");
    std::string name;
    EXPECT_TRUE(read_tensor_file(npy).bit_equal(t)) << dtype_name(dt);
    EXPECT_TRUE(read_tensor_file(pb, &name).bit_equal(t)) << dtype_name(dt);
    EXPECT_EQ(name, "named");
  }
  HostTensor s = HostTensor::scalar(DType::F32, 2.5);
  write_npy((dir / "s.npy").string(), s);
  EXPECT_TRUE(read_npy((dir / "s.npy").string()).bit_equal(s));
  // Truncated data and a bad magic are errors naming the file.
  std::string good = serialize_npy(HostTensor::random(DType::F32, {4}, 1));
  EXPECT_THROW(parse_npy(good.substr(0, good.size() - 3), "short.npy"), Error);
  EXPECT_THROW(parse_npy("not numpy at all", "bad.npy"), Error);
}

}  // namespace
}  // namespace kiln
