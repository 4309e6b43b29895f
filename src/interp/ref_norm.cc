// Reference kernels for normalisations (softmax, log_softmax, layer/rms/batch norm) and attention,
// computed in double from their textbook formulas. Why: these high-level ops also have
// decompositions; the oracle computes them directly so the two can check each other.
#include <cmath>
#include <limits>
#include <optional>

#include "interp/ref_kernels.h"
#include "kiln/error.h"

namespace kiln::interp {

namespace {

// A tensor seen as [outer, len, inner] around one axis.
struct AxisView {
  int64_t outer = 1, len = 1, inner = 1;
  int64_t at(int64_t o, int64_t k, int64_t i) const { return (o * len + k) * inner + i; }
};
AxisView view_around(const std::vector<int64_t>& shape, int axis) {
  AxisView v;
  v.len = shape[size_t(axis)];
  for (int d = 0; d < axis; ++d) v.outer *= shape[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < shape.size(); ++d) v.inner *= shape[d];
  return v;
}

// Numerically stable softmax of one row in double. A row whose max is -inf (all -inf) or +inf gives
// NaN, exactly as exp(x - max) / sum does in plain math; the decomposition behaves the same.
void softmax_row(std::vector<double>& row, bool log_form) {
  double max = -std::numeric_limits<double>::infinity();
  for (double v : row) max = (std::isnan(v) || std::isnan(max)) ? std::nan("") : std::fmax(max, v);
  double sum = 0;
  for (double v : row) sum += std::exp(v - max);
  for (double& v : row) v = log_form ? (v - max) - std::log(sum) : std::exp(v - max) / sum;
}

void softmax_along_axis(const KernelArgs& a, bool log_form) {
  const HostTensor& x = a.in[0];
  int axis = normalize_axis(a.attrs.get_int("axis"), x.rank());
  AxisView view = view_around(x.shape(), axis);
  std::vector<double> row(size_t(view.len));
  for (int64_t o = 0; o < view.outer; ++o)
    for (int64_t i = 0; i < view.inner; ++i) {
      for (int64_t k = 0; k < view.len; ++k) row[size_t(k)] = x.get_f64(view.at(o, k, i));
      softmax_row(row, log_form);
      for (int64_t k = 0; k < view.len; ++k) a.out[0].set_f64(view.at(o, k, i), row[size_t(k)]);
    }
}

// Layer and RMS norm share the layout: x seen as [rows, group] with group = dims axis..; optional
// weight and bias broadcast against the group's shape.
void normalize_groups(const KernelArgs& a, bool subtract_mean) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  int axis = normalize_axis(a.attrs.get_int("axis"), x.rank());
  double eps = a.attrs.get_float("eps");
  std::vector<int64_t> group_shape(x.shape().begin() + axis, x.shape().end());
  int64_t group = numel_of(group_shape);
  int64_t rows = group == 0 ? 0 : x.numel() / group;
  const HostTensor* weight = a.in.size() > 1 ? &a.in[1] : nullptr;
  const HostTensor* bias = a.in.size() > 2 ? &a.in[2] : nullptr;
  std::vector<int64_t> weight_index(static_cast<size_t>(group)), bias_index(static_cast<size_t>(group));
  if (weight) {
    BroadcastIndex bi(weight->shape(), group_shape);
    for (int64_t j = 0; j < group; ++j) weight_index[size_t(j)] = bi(j);
  }
  if (bias) {
    BroadcastIndex bi(bias->shape(), group_shape);
    for (int64_t j = 0; j < group; ++j) bias_index[size_t(j)] = bi(j);
  }
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0;
    if (subtract_mean) {
      for (int64_t j = 0; j < group; ++j) mean += x.get_f64(r * group + j);
      mean /= double(group);
    }
    double sq = 0;  // biased variance (layer_norm) or mean square (rms_norm)
    for (int64_t j = 0; j < group; ++j) {
      double d = x.get_f64(r * group + j) - mean;
      sq += d * d;
    }
    double inv_std = 1.0 / std::sqrt(sq / double(group) + eps);
    for (int64_t j = 0; j < group; ++j) {
      double y = (x.get_f64(r * group + j) - mean) * inv_std;
      if (weight) y *= weight->get_f64(weight_index[size_t(j)]);
      if (bias) y += bias->get_f64(bias_index[size_t(j)]);
      out.set_f64(r * group + j, y);
    }
  }
}

}  // namespace

void ref_Softmax(const KernelArgs& a) { softmax_along_axis(a, false); }
void ref_LogSoftmax(const KernelArgs& a) { softmax_along_axis(a, true); }
void ref_LayerNorm(const KernelArgs& a) { normalize_groups(a, true); }
void ref_RmsNorm(const KernelArgs& a) { normalize_groups(a, false); }

// y = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c], with c = dim 1.
void ref_BatchNorm(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  const HostTensor &scale = a.in[1], &bias = a.in[2], &mean = a.in[3], &var = a.in[4];
  double eps = a.attrs.get_float("eps");
  AxisView view = view_around(x.shape(), 1);
  for (int64_t n = 0; n < view.outer; ++n)
    for (int64_t c = 0; c < view.len; ++c) {
      double inv_std = 1.0 / std::sqrt(var.get_f64(c) + eps);
      for (int64_t s = 0; s < view.inner; ++s) {
        int64_t i = view.at(n, c, s);
        a.out[0].set_f64(i, (x.get_f64(i) - mean.get_f64(c)) * inv_std * scale.get_f64(c) + bias.get_f64(c));
      }
    }
}

// out[b, i, :] = sum_j p[b, i, j] * v[b, j, :] with p = softmax_j(q[b, i] . k[b, j] * scale + mask).
// Masked-out positions (bool mask false, or causal j > i + (Tk - Tq)) score -inf, so a row with
// every key masked gives NaN, like softmax over all -inf (and like the decomposition), unless
// zero_nan_rows: then a NaN weight is 0, so such a row is sum_j 0 * v[j] (0, or NaN where v is not
// finite), as torch's exported where(isnan(softmax), 0, softmax). heads_last:
// row i of batch b = (n, h) is written at [n, i, h, :] of the [B, Tq, H, D] output.
void ref_Attention(const KernelArgs& a) {
  const HostTensor &q = a.in[0], &k = a.in[1], &v = a.in[2];
  const HostTensor* mask = a.in.size() > 3 ? &a.in[3] : nullptr;
  HostTensor& out = a.out[0];
  int r = q.rank();
  int64_t Tq = q.shape()[size_t(r - 2)], D = q.shape()[size_t(r - 1)];
  int64_t Tk = k.shape()[size_t(r - 2)], Dv = v.shape()[size_t(r - 1)];
  int64_t batches = numel_of(std::vector<int64_t>(q.shape().begin(), q.shape().end() - 2));
  double scale = a.attrs.get_float("scale");
  if (scale == 0) scale = 1.0 / std::sqrt(double(D));
  bool causal = a.attrs.get_int("causal") != 0;
  std::vector<int64_t> scores_shape(q.shape().begin(), q.shape().end() - 2);
  scores_shape.push_back(Tq);
  scores_shape.push_back(Tk);
  if (mask) {
    int offset = int(scores_shape.size()) - mask->rank();
    for (int d = 0; d < mask->rank(); ++d)
      KILN_CHECK(mask->shape()[size_t(d)] == 1 || mask->shape()[size_t(d)] == scores_shape[size_t(offset + d)],
                 "attention mask ", dims_to_string(mask->shape()), " does not broadcast to the scores ",
                 dims_to_string(scores_shape));
  }
  std::optional<BroadcastIndex> mask_index;
  if (mask) mask_index.emplace(mask->shape(), scores_shape);
  bool bool_mask = mask && mask->dtype() == DType::Bool;
  const bool heads_last = a.attrs.get_int("heads_last") != 0;
  const bool zero_nan_rows = a.attrs.get_int("zero_nan_rows") != 0;
  const int64_t H = r >= 3 ? q.shape()[size_t(r - 3)] : 1;
  auto out_row = [&](int64_t b, int64_t i) {  // the element index of out[b, i, 0]
    return heads_last ? ((b / H * Tq + i) * H + b % H) * Dv : (b * Tq + i) * Dv;
  };
  std::vector<double> row(static_cast<size_t>(Tk));
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t i = 0; i < Tq; ++i) {
      for (int64_t j = 0; j < Tk; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += q.get_f64((b * Tq + i) * D + d) * k.get_f64((b * Tk + j) * D + d);
        double s = dot * scale;
        int64_t score_index = (b * Tq + i) * Tk + j;
        if (mask && bool_mask && mask->get_i64((*mask_index)(score_index)) == 0)
          s = -std::numeric_limits<double>::infinity();
        if (mask && !bool_mask) s += mask->get_f64((*mask_index)(score_index));
        if (causal && j > i + (Tk - Tq)) s = -std::numeric_limits<double>::infinity();
        row[size_t(j)] = s;
      }
      softmax_row(row, false);
      if (zero_nan_rows)
        for (double& p : row) p = std::isnan(p) ? 0.0 : p;
      for (int64_t e = 0; e < Dv; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < Tk; ++j) acc += row[size_t(j)] * v.get_f64((b * Tk + j) * Dv + e);
        out.set_f64(out_row(b, i) + e, acc);
      }
    }
}

}  // namespace kiln::interp
