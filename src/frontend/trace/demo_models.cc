// The built-in demo: an MLP and a GPT-style transformer block written with the tensor API, run
// eagerly and through kiln::trace + the interpreter, and compared.
#include <algorithm>
#include <cmath>

#include "kiln/demo.h"
#include "kiln/error.h"
#include "kiln/trace.h"

namespace kiln::demo {

namespace {
// Uniform in +-1/sqrt(fan_in), as PyTorch initialises nn.Linear; plain data, no kernels run.
Tensor init_uniform(std::vector<int64_t> shape, int64_t fan_in, uint64_t seed, DType dtype) {
  double bound = 1.0 / std::sqrt(double(fan_in));
  return Tensor::from_host(HostTensor::random(dtype, std::move(shape), seed, -bound, bound));
}
Tensor filled(int64_t size, double value, DType dtype) {
  return Tensor::from_host(
      HostTensor::from_doubles(dtype, {size}, std::vector<double>(size_t(size), value)));
}
}  // namespace

MlpParams make_mlp_params(const std::vector<int64_t>& layer_sizes, uint64_t seed, DType dtype) {
  KILN_CHECK(layer_sizes.size() >= 2, "an MLP needs at least an input and an output size");
  MlpParams p;
  for (size_t i = 0; i + 1 < layer_sizes.size(); ++i) {
    int64_t in = layer_sizes[i], out = layer_sizes[i + 1];
    p.weights.push_back(init_uniform({in, out}, in, seed * 1000 + 2 * i, dtype));
    p.biases.push_back(init_uniform({out}, in, seed * 1000 + 2 * i + 1, dtype));
  }
  return p;
}

Tensor mlp(const Tensor& x, const MlpParams& params) {
  Tensor h = x;
  for (size_t i = 0; i < params.weights.size(); ++i) {
    h = matmul(h, params.weights[i]) + params.biases[i];
    if (i + 1 < params.weights.size()) h = relu(h);
  }
  return h;
}

BlockParams make_block_params(const BlockConfig& c, uint64_t seed, DType dtype) {
  KILN_CHECK(c.num_heads >= 1 && c.d_model % c.num_heads == 0, "d_model ", c.d_model,
             " must divide into ", c.num_heads, " heads");
  uint64_t s = seed * 1000 + 100;
  BlockParams p;
  p.config = c;
  int64_t C = c.d_model, F = c.d_ff;
  p.ln1_weight = filled(C, 1.0, dtype);
  p.ln1_bias = filled(C, 0.0, dtype);
  p.w_qkv = init_uniform({C, 3 * C}, C, s + 1, dtype);
  p.b_qkv = init_uniform({3 * C}, C, s + 2, dtype);
  p.w_out = init_uniform({C, C}, C, s + 3, dtype);
  p.b_out = init_uniform({C}, C, s + 4, dtype);
  // Non-trivial norm parameters so that a dropped scale or shift shows up in the comparison.
  p.ln2_weight = Tensor::from_host(HostTensor::random(dtype, {C}, s + 5, 0.5, 1.5));
  p.ln2_bias = Tensor::from_host(HostTensor::random(dtype, {C}, s + 6, -0.1, 0.1));
  p.w_fc1 = init_uniform({C, F}, C, s + 7, dtype);
  p.b_fc1 = init_uniform({F}, C, s + 8, dtype);
  p.w_fc2 = init_uniform({F, C}, F, s + 9, dtype);
  p.b_fc2 = init_uniform({C}, F, s + 10, dtype);
  return p;
}

Tensor transformer_block(const Tensor& x, const BlockParams& p) {
  KILN_CHECK(x.rank() == 3, "transformer_block expects x as [B, T, C], got ", x.type().to_string());
  const int64_t C = p.config.d_model, H = p.config.num_heads, D = C / H;
  SymInt B = x.dim(0), T = x.dim(1);

  // Attention: project to q, k, v, split heads to [B, H, T, D], attend causally, merge heads.
  Tensor h = layer_norm(x, p.ln1_weight, p.ln1_bias);
  Tensor qkv = matmul(h, p.w_qkv) + p.b_qkv;
  std::vector<Tensor> parts = split(qkv, -1, {C, C, C});
  auto to_heads = [&](const Tensor& t) { return permute(reshape(t, {B, T, H, D}), {0, 2, 1, 3}); };
  Tensor attended = attention(to_heads(parts[0]), to_heads(parts[1]), to_heads(parts[2]), {},
                              /*causal=*/true);
  Tensor merged = reshape(permute(attended, {0, 2, 1, 3}), {B, T, C});
  Tensor x1 = x + (matmul(merged, p.w_out) + p.b_out);

  // Feed-forward.
  Tensor h2 = layer_norm(x1, p.ln2_weight, p.ln2_bias);
  Tensor ff = matmul(gelu(matmul(h2, p.w_fc1) + p.b_fc1), p.w_fc2) + p.b_fc2;
  return x1 + ff;
}

std::string Agreement::to_string() const {
  return str("max abs error ", max_abs_error, ", max rel error ", max_rel_error,
             within_tolerance ? " (within tolerance)" : " (OUT OF TOLERANCE)");
}

std::pair<double, double> default_tolerances(DType d) {
  switch (d) {
    case DType::F16: return {1e-2, 1e-2};
    case DType::BF16: return {3e-2, 3e-2};
    default: return is_float(d) ? std::pair<double, double>{1e-4, 1e-3} : std::pair<double, double>{0, 0};
  }
}

std::pair<double, double> tolerances_for(DType d, double atol, double rtol) {
  const auto [default_atol, default_rtol] = default_tolerances(d);
  return {atol < 0 ? default_atol : atol, rtol < 0 ? default_rtol : rtol};
}

Agreement compare(const HostTensor& expected, const HostTensor& actual, double atol, double rtol) {
  KILN_CHECK(expected.dtype() == actual.dtype() && expected.shape() == actual.shape(),
             "cannot compare ", dtype_name(expected.dtype()), dims_to_string(expected.shape()),
             " with ", dtype_name(actual.dtype()), dims_to_string(actual.shape()));
  Agreement a;
  for (int64_t i = 0; i < expected.numel(); ++i) {
    double e = expected.get_f64(i), g = actual.get_f64(i);
    if (std::isnan(e) || std::isnan(g)) {
      if (std::isnan(e) != std::isnan(g)) a.within_tolerance = false;
      continue;
    }
    if (e == g) continue;  // covers equal infinities
    double diff = std::fabs(g - e);
    a.max_abs_error = std::max(a.max_abs_error, diff);
    a.max_rel_error = std::max(a.max_rel_error, diff / std::max(std::fabs(e), atol));
    if (!(diff <= atol + rtol * std::fabs(e))) a.within_tolerance = false;
  }
  return a;
}

namespace {
// Runs `fn` eagerly on each input (scoreboard of the first kept) and through one trace.
DemoResult check_model(const std::string& name, const std::function<Tensor(const Tensor&)>& fn,
                       const std::vector<Tensor>& inputs, const std::vector<DynamicDim>& dynamic,
                       const DemoOptions& options) {
  DemoResult r;
  r.model = name;
  TraceOptions trace_options;
  trace_options.name = name;
  trace_options.dynamic_dims = dynamic;
  TracedFunction traced = trace(fn, inputs.at(0), trace_options);
  {
    // Warm up (thread pools, BLAS buffers) so the scoreboard shows steady-state kernel times.
    ScoreboardScope unrecorded(nullptr);
    fn(inputs.at(0));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    Scoreboard scratch;
    Tensor eager_out;
    {
      ScoreboardScope scope(i == 0 ? &r.eager_scoreboard : &scratch);
      eager_out = fn(inputs[i]);
    }
    Tensor traced_out = traced(inputs[i]);
    if (i == 0) {
      r.first_input = inputs[i].host();
      r.reference_output = traced_out.host();
    }
    Agreement a = compare(eager_out.host(), traced_out.host(), options.atol, options.rtol);
    r.agreement.max_abs_error = std::max(r.agreement.max_abs_error, a.max_abs_error);
    r.agreement.max_rel_error = std::max(r.agreement.max_rel_error, a.max_rel_error);
    r.agreement.within_tolerance = r.agreement.within_tolerance && a.within_tolerance;
    r.input_shapes.push_back(inputs[i].type().to_string());
  }
  r.num_traces = traced.num_traces();
  const Graph& g = traced.graph();
  r.graph = std::shared_ptr<const Graph>(g.clone());
  r.graph_summary = str(g.num_nodes(), " nodes, input ", g.inputs().at(0)->type.to_string(),
                        ", output ", g.outputs().at(0)->type.to_string());
  return r;
}
}  // namespace

std::vector<DemoResult> run_demo(const DemoOptions& options) {
  std::vector<DemoResult> results;
  const uint64_t seed = options.seed;

  MlpParams mlp_params = make_mlp_params({64, 256, 256, 10}, seed);
  auto mlp_fn = [&](const Tensor& x) { return mlp(x, mlp_params); };
  std::vector<Tensor> mlp_inputs = {
      Tensor::from_host(HostTensor::random(DType::F32, {8, 64}, seed + 1)),
      Tensor::from_host(HostTensor::random(DType::F32, {3, 64}, seed + 2))};
  results.push_back(check_model("mlp", mlp_fn, mlp_inputs, {{0, 0, "B"}}, options));

  BlockParams block_params = make_block_params(BlockConfig{}, seed);
  auto block_fn = [&](const Tensor& x) { return transformer_block(x, block_params); };
  std::vector<Tensor> block_inputs = {
      Tensor::from_host(HostTensor::random(DType::F32, {2, 16, 64}, seed + 3)),
      Tensor::from_host(HostTensor::random(DType::F32, {3, 7, 64}, seed + 4))};
  results.push_back(check_model("transformer_block", block_fn, block_inputs,
                                {{0, 0, "B"}, {0, 1, "T"}}, options));
  return results;
}

}  // namespace kiln::demo
