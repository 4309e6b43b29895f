// Decompositions: each high-level op is rebuilt from primitives, the result must contain only
// primitives, and the interpreter must give the same values before and after (within a tolerance
// for the extra roundings of the narrow dtypes), including on symbolic shapes.
#include <gtest/gtest.h>

#include <limits>

#include "common/op_samples.h"
#include "interp_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {
using Ints = std::vector<int64_t>;

// Decomposes every node with a decomposition, repeatedly, until only primitives remain.
void decompose_all(Graph& g) {
  for (int round = 0; round < 8; ++round) {
    bool changed = false;
    for (Node* n : g.node_list()) {
      DecompFn fn = n->info().decompose;
      if (fn == nullptr) continue;
      g.set_insertion_point(n);
      std::vector<Value*> replacements = fn(g, *n);
      g.set_insertion_point(nullptr);
      ASSERT_EQ(replacements.size(), n->outputs.size()) << n->describe();
      for (size_t i = 0; i < replacements.size(); ++i) {
        EXPECT_EQ(replacements[i]->type, n->outputs[i]->type) << n->describe() << " output " << i;
        g.replace_all_uses(n->outputs[i], replacements[i]);
      }
      g.erase_node(n);
      changed = true;
    }
    if (!changed) return;
  }
}

void expect_only_primitives(const Graph& g, const std::string& what) {
  for (const auto& n : g.nodes()) EXPECT_EQ(n->info().decompose, nullptr) << what << ": " << n->describe() << " left";
}

// The interpreter computes high-level ops in double; the decomposition rounds after every primitive.
Tolerance decomposition_tolerance(DType dt) {
  switch (dt) {
    case DType::F64: return {.rtol = 1e-10, .atol = 1e-10};
    case DType::F32: return {.rtol = 2e-5, .atol = 2e-5};
    case DType::F16: return {.rtol = 2e-2, .floor = 2e-2};
    case DType::BF16: return {.rtol = 5e-2, .floor = 1e-1};
    default: return {};
  }
}

// Runs g, decomposes it, checks it is primitive-only, runs again and compares.
void check_decomposition(Graph& g, const std::vector<HostTensor>& inputs, const std::string& what) {
  std::vector<HostTensor> before = interp::run(g, inputs);
  decompose_all(g);
  expect_only_primitives(g, what);
  std::vector<HostTensor> after = interp::run(g, inputs);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    ASSERT_EQ(before[i].shape(), after[i].shape()) << what;
    ASSERT_EQ(before[i].dtype(), after[i].dtype()) << what;
    if (!is_float(before[i].dtype())) {
      EXPECT_TRUE(before[i].bit_equal(after[i])) << what;
      continue;
    }
    expect_close(after[i], before[i].to_doubles(), decomposition_tolerance(before[i].dtype()), what);
  }
}

// One-node graph of `op` over inputs with the given types.
std::unique_ptr<Graph> single_op(Op op, const std::vector<TensorType>& types, const Attrs& attrs) {
  auto g = std::make_unique<Graph>();
  std::vector<Value*> ins;
  for (size_t i = 0; i < types.size(); ++i) ins.push_back(g->add_input(str("x", i), types[i]));
  g->set_outputs(g->add_node(op, ins, attrs));
  return g;
}

TensorType T(DType dt, Shape s) { return TensorType{dt, std::move(s), Device::CPU}; }

std::vector<HostTensor> random_inputs(const std::vector<TensorType>& types, const std::vector<Ints>& shapes, uint64_t seed) {
  std::vector<HostTensor> in;
  for (size_t i = 0; i < types.size(); ++i) {
    DType dt = types[i].dtype;
    if (dt == DType::Bool) in.push_back(HostTensor::random(dt, shapes[i], seed + i));
    else in.push_back(HostTensor::random(dt, shapes[i], seed + i, is_float(dt) ? -2 : 0, is_float(dt) ? 2 : 4));
  }
  return in;
}

struct DecompCase {
  std::string name;
  Op op;
  std::vector<TensorType> types;  // may be symbolic
  std::vector<Ints> shapes;       // concrete input shapes for the run
  Attrs attrs;
};

std::vector<DecompCase> cases_for(DType d) {
  SymInt B = SymInt::symbol("B"), T_ = SymInt::symbol("T"), N = SymInt::symbol("N");
  std::vector<DecompCase> c = {
      {"gelu", Op::Gelu, {T(d, {7, 13})}, {{7, 13}}, {}},
      {"gelu/tanh", Op::Gelu, {T(d, {7, 13})}, {{7, 13}}, {{"approximate", std::string("tanh")}}},
      {"silu", Op::Silu, {T(d, {1, 9})}, {{1, 9}}, {}},
      {"reduce_mean/all", Op::ReduceMean, {T(d, {7, 5, 3})}, {{7, 5, 3}}, {}},
      {"reduce_mean/axes/keepdim", Op::ReduceMean, {T(d, {7, 5, 3})}, {{7, 5, 3}},
       {{"axes", Ints{0, -1}}, {"keepdim", int64_t(1)}}},
      {"reduce_mean/symbolic", Op::ReduceMean, {T(d, {B, N})}, {{3, 11}}, {{"axes", Ints{1}}}},
      {"squeeze", Op::Squeeze, {T(d, {1, 7, 1})}, {{1, 7, 1}}, {}},
      {"unsqueeze/symbolic", Op::Unsqueeze, {T(d, {B, 3})}, {{5, 3}}, {{"axes", Ints{0, 2}}}},
      {"flatten/symbolic", Op::Flatten, {T(d, {B, 3, T_})}, {{2, 3, 7}}, {{"start_dim", int64_t(1)}}},
      {"index_select", Op::IndexSelect, {T(d, {5, 7}), T(DType::I64, {4})}, {{5, 7}, {4}}, {{"axis", int64_t(1)}}},
      {"global_avg_pool", Op::GlobalAvgPool, {T(d, {2, 3, 7, 5})}, {{2, 3, 7, 5}}, {}},
      {"global_avg_pool/symbolic_1d", Op::GlobalAvgPool, {T(d, {B, 3, T_})}, {{2, 3, 13}}, {}},
      {"softmax", Op::Softmax, {T(d, {3, 13})}, {{3, 13}}, {}},
      {"softmax/axis0", Op::Softmax, {T(d, {7, 2, 3})}, {{7, 2, 3}}, {{"axis", int64_t(0)}}},
      {"log_softmax", Op::LogSoftmax, {T(d, {3, 13})}, {{3, 13}}, {{"axis", int64_t(-1)}}},
      {"log_softmax/symbolic", Op::LogSoftmax, {T(d, {B, T_})}, {{2, 9}}, {{"axis", int64_t(1)}}},
      {"layer_norm", Op::LayerNorm, {T(d, {3, 13})}, {{3, 13}}, {}},
      {"layer_norm/affine", Op::LayerNorm, {T(d, {2, 3, 7}), T(d, {7}), T(d, {7})}, {{2, 3, 7}, {7}, {7}}, {}},
      {"layer_norm/axis1", Op::LayerNorm, {T(d, {2, 3, 7}), T(d, {3, 7})}, {{2, 3, 7}, {3, 7}}, {{"axis", int64_t(1)}}},
      {"layer_norm/symbolic", Op::LayerNorm, {T(d, {B, N}), T(d, {N}), T(d, {N})}, {{3, 11}, {11}, {11}}, {}},
      {"rms_norm", Op::RmsNorm, {T(d, {5, 7}), T(d, {7})}, {{5, 7}, {7}}, {}},
      {"rms_norm/symbolic", Op::RmsNorm, {T(d, {B, N})}, {{2, 13}}, {{"eps", 1e-3}}},
      {"batch_norm/4d", Op::BatchNorm, {T(d, {2, 3, 5, 7}), T(d, {3}), T(d, {3}), T(d, {3}), T(d, {3})},
       {{2, 3, 5, 7}, {3}, {3}, {3}, {3}}, {}},
      {"batch_norm/2d", Op::BatchNorm, {T(d, {4, 5}), T(d, {5}), T(d, {5}), T(d, {5}), T(d, {5})},
       {{4, 5}, {5}, {5}, {5}, {5}}, {}},
      {"attention", Op::Attention, {T(d, {2, 7, 8}), T(d, {2, 7, 8}), T(d, {2, 7, 8})}, {{2, 7, 8}, {2, 7, 8}, {2, 7, 8}}, {}},
      {"attention/causal", Op::Attention, {T(d, {2, 5, 4}), T(d, {2, 9, 4}), T(d, {2, 9, 3})},
       {{2, 5, 4}, {2, 9, 4}, {2, 9, 3}}, {{"causal", int64_t(1)}}},
      {"attention/causal/scale", Op::Attention, {T(d, {1, 2, 6, 4}), T(d, {1, 2, 6, 4}), T(d, {1, 2, 6, 4})},
       {{1, 2, 6, 4}, {1, 2, 6, 4}, {1, 2, 6, 4}}, {{"causal", int64_t(1)}, {"scale", 0.3}}},
      {"attention/float_mask", Op::Attention, {T(d, {2, 5, 4}), T(d, {2, 7, 4}), T(d, {2, 7, 4}), T(d, {5, 7})},
       {{2, 5, 4}, {2, 7, 4}, {2, 7, 4}, {5, 7}}, {}},
      {"attention/symbolic_causal", Op::Attention, {T(d, {B, T_, 4}), T(d, {B, N, 4}), T(d, {B, N, 4})},
       {{2, 3, 4}, {2, 7, 4}, {2, 7, 4}}, {{"causal", int64_t(1)}}},
  };
  return c;
}

}  // namespace

TEST(Decompositions, EveryDecomposableOpMatchesTheInterpreterInEveryFloatDtype) {
  uint64_t seed = 1;
  for (DType d : kFloatDTypes)
    for (const DecompCase& c : cases_for(d)) {
      auto g = single_op(c.op, c.types, c.attrs);
      std::vector<HostTensor> in = random_inputs(c.types, c.shapes, seed);
      seed += 10;
      if (c.op == Op::BatchNorm) in[4] = HostTensor::random(d, c.shapes[4], seed, 0.5, 2);  // var > 0
      if (c.op == Op::IndexSelect) in[1] = tensor(DType::I64, {4}, {6, -1, 0, 3});
      check_decomposition(*g, in, c.name + "/" + std::string(dtype_name(d)));
    }
}

TEST(Decompositions, AttentionWithBoolMaskAndCausalTogether) {
  for (DType d : kFloatDTypes) {
    std::vector<TensorType> types = {T(d, {2, 6, 4}), T(d, {2, 6, 4}), T(d, {2, 6, 5}), T(DType::Bool, {2, 1, 6})};
    auto g = single_op(Op::Attention, types, {{"causal", int64_t(1)}});
    std::vector<HostTensor> in = random_inputs(types, {{2, 6, 4}, {2, 6, 4}, {2, 6, 5}, {2, 1, 6}}, 77);
    in[3].set_i64(0, 1);  // key 0 stays visible so no row is fully masked
    in[3].set_i64(6, 1);
    check_decomposition(*g, in, str("attention/bool+causal/", dtype_name(d)));
  }
}

TEST(Decompositions, FullyMaskedAttentionRowsAreNaNBeforeAndAfter) {
  std::vector<TensorType> types = {T(DType::F32, {1, 2, 3}), T(DType::F32, {1, 2, 3}), T(DType::F32, {1, 2, 3}),
                                   T(DType::Bool, {2, 2})};
  auto g = single_op(Op::Attention, types, {});
  std::vector<HostTensor> in = random_inputs(types, {{1, 2, 3}, {1, 2, 3}, {1, 2, 3}, {2, 2}}, 5);
  in[3] = tensor(DType::Bool, {2, 2}, {0, 0, 1, 1});
  HostTensor before = interp::run(*g, in)[0];
  EXPECT_TRUE(std::isnan(before.get_f64(0)));
  EXPECT_FALSE(std::isnan(before.get_f64(3)));
  check_decomposition(*g, in, "attention/fully_masked");  // expect_close treats NaN == NaN
}

TEST(Decompositions, SymbolicGraphsStillRunAtOtherSizesAfterDecomposition) {
  SymInt B = SymInt::symbol("B"), N = SymInt::symbol("N");
  auto g = single_op(Op::LayerNorm, {T(DType::F32, {B, N})}, {});
  decompose_all(*g);
  for (int64_t n : {1, 4, 13}) {
    HostTensor x = HostTensor::random(DType::F32, {3, n}, uint64_t(n));
    HostTensor y = interp::run(*g, {x})[0];
    HostTensor want = run1(Op::LayerNorm, {}, {x});
    expect_close(y, want.to_doubles(), Tolerance{.rtol = 1e-5, .atol = 1e-5}, str("n = ", n));
  }
}

TEST(Decompositions, OpSamplesWithDecompositionsMatchAfterDecomposing) {
  int checked = 0;
  for (const auto& s : kiln::testing::op_samples()) {
    if (op_info(s.op).decompose == nullptr) continue;
    auto g = kiln::testing::build_sample_graph(s);
    std::vector<HostTensor> in = kiln::testing::sample_inputs(s, 11);
    check_decomposition(*g, in, s.label);
    ++checked;
  }
  EXPECT_GT(checked, 12);
}
