// Row statistics of softmax, log_softmax, layer_norm and rms_norm outputs (row_statistics.h).
#include "common/row_statistics.h"

#include <cmath>
#include <functional>

#include "common/compare.h"
#include "kiln/error.h"

namespace kiln::testing {

namespace {

// The graph input feeding `v` directly, if any.
const HostTensor* input_tensor(const Graph& g, const std::vector<HostTensor>& inputs, const Value* v) {
  for (size_t i = 0; i < g.inputs().size() && i < inputs.size(); ++i)
    if (g.inputs()[i] == v) return &inputs[i];
  return nullptr;
}

int normalized_axis(int64_t axis, int rank) { return int(axis < 0 ? axis + rank : axis); }

// Rows of `shape` reduced over dim `axis` alone: calls fn(row, element offsets of the row).
void for_each_axis_row(const std::vector<int64_t>& shape, int axis,
                       const std::function<void(int64_t, const std::vector<int64_t>&)>& fn) {
  int64_t outer = 1, inner = 1, n = shape[size_t(axis)];
  for (int d = 0; d < axis; ++d) outer *= shape[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<int64_t> offsets(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t k = 0; k < n; ++k) offsets[size_t(k)] = (o * n + k) * inner + i;
      fn(o * inner + i, offsets);
    }
}

// Unit roundoff of the result's dtype, the scale of every bound below.
double roundoff(DType d) { return ulp_of(d, 1.0) / 2; }

std::string check_softmax(const Node& n, const HostTensor& got, bool log) {
  const double tol = compiled_tolerance(got.dtype()).rtol;
  std::string bad;
  int axis = normalized_axis(n.attrs.get_int("axis"), got.rank());
  for_each_axis_row(got.shape(), axis, [&](int64_t row, const std::vector<int64_t>& offsets) {
    if (!bad.empty()) return;
    double sum = 0;
    for (int64_t k : offsets) {
      double y = got.get_f64(k);
      if (std::isnan(y)) return;  // a NaN row (NaN input) has no statistic
      if (!log && (y < 0 || y > 1 + tol)) {
        bad = str("softmax element ", k, " is ", y, ", outside [0, 1]");
        return;
      }
      sum += log ? std::exp(y) : y;
    }
    if (std::fabs(sum - 1) > tol)
      bad = str(log ? "log_softmax row " : "softmax row ", row, " sums to ", sum, log ? " after exp" : "",
                ", not 1 (within ", tol, ")");
  });
  return bad;
}

// layer_norm (rms = false) or rms_norm over dims axis.. of x, each row one contiguous block.
std::string check_norm(const Graph& g, const std::vector<HostTensor>& inputs, const Node& n, const HostTensor& got,
                       bool rms) {
  int axis = normalized_axis(n.attrs.get_int("axis"), got.rank());
  int64_t width = 1;
  for (size_t d = size_t(axis); d < got.shape().size(); ++d) width *= got.shape()[d];
  if (width < 8 || got.numel() == 0) return "";
  const double eps = n.attrs.get_float("eps");
  const HostTensor* x = input_tensor(g, inputs, n.inputs[0]);
  const HostTensor* w = n.inputs.size() > 1 && n.inputs[1] ? input_tensor(g, inputs, n.inputs[1]) : nullptr;
  const HostTensor* b = !rms && n.inputs.size() > 2 && n.inputs[2] ? input_tensor(g, inputs, n.inputs[2]) : nullptr;
  if ((n.inputs.size() > 1 && n.inputs[1] && (!w || w->numel() != width)) ||
      (!rms && n.inputs.size() > 2 && n.inputs[2] && (!b || b->numel() != width)))
    return "";  // weights that are computed or broadcast: not judged here
  const double u = roundoff(got.dtype()), mean_tol = 16 * u + 1e-4, spread_tol = 32 * u + 1e-3;
  for (int64_t row = 0; row < got.numel() / width; ++row) {
    double sum = 0, sum_sq = 0;
    int64_t count = 0;
    bool nan = false;
    for (int64_t j = 0; j < width; ++j) {
      double wj = w ? w->get_f64(j) : 1, bj = b ? b->get_f64(j) : 0;
      if (std::fabs(wj) < 0.25) return "";  // a weight near 0 amplifies rounding: no judgement
      double z = (got.get_f64(row * width + j) - bj) / wj;
      nan |= std::isnan(z);
      sum += z, sum_sq += z * z, ++count;
    }
    if (nan) continue;
    // The spread the op promises: var/(var+eps) of the input row (1 when x is computed).
    double expect = 1;
    if (x) {
      double xs = 0, xss = 0;
      for (int64_t j = 0; j < width; ++j) xs += x->get_f64(row * width + j), xss += x->get_f64(row * width + j) * x->get_f64(row * width + j);
      double spread = rms ? xss / double(width) : xss / double(width) - (xs / double(width)) * (xs / double(width));
      if (!std::isfinite(spread)) continue;
      expect = spread / (spread + eps);
    }
    double mean = sum / double(count), spread = rms ? sum_sq / double(count) : sum_sq / double(count) - mean * mean;
    if (!rms && std::fabs(mean) > mean_tol)
      return str("layer_norm row ", row, " has mean ", mean, " after weight and bias are undone, not 0 (within ",
                 mean_tol, ")");
    if (std::fabs(spread - expect) > spread_tol * std::max(1.0, expect))
      return str(rms ? "rms_norm" : "layer_norm", " row ", row, " has ", rms ? "mean square " : "variance ", spread,
                 " after weight", rms ? "" : " and bias", " are undone, not ", expect, " (within ", spread_tol, ")");
  }
  return "";
}

}  // namespace

std::string check_row_statistics(const Graph& g, const std::vector<HostTensor>& inputs, size_t index,
                                 const HostTensor& got) {
  if (index >= g.outputs().size() || !got.is_tensor() || !is_float(got.dtype()) || ulp_of(got.dtype(), 1) == 0) return "";
  const Node* n = g.outputs()[index]->producer;
  if (!n) return "";
  switch (n->op) {
    case Op::Softmax: return check_softmax(*n, got, false);
    case Op::LogSoftmax: return check_softmax(*n, got, true);
    case Op::LayerNorm: return check_norm(g, inputs, *n, got, false);
    case Op::RmsNorm: return check_norm(g, inputs, *n, got, true);
    default: return "";
  }
}

}  // namespace kiln::testing
