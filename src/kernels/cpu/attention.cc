// Eager attention for f32 without a mask (causal or not): per (batch, head), scores = q k^T * scale
// by sgemm, a float softmax per row, out = p v by sgemm; heads spread over the OpenMP team. Why:
// the eager baseline ran the reference loop here, 159 ms of the GPT block's 170 ms (d512 T128 B1),
// so eager-vs-compiled compared against a straw man. Masked calls keep the reference kernel.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/gemm.h"

namespace kiln::eager::detail {

namespace {

// Softmax of one row in place; like the reference, a row that is all -inf (or holds a NaN) gives
// NaN everywhere.
void softmax_row(float* row, int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
  bool nan = false;
  for (int64_t j = 0; j < n; ++j) {
    nan |= std::isnan(row[j]);
    max = std::max(max, row[j]);
  }
  if (nan || max == -std::numeric_limits<float>::infinity()) {
    std::fill(row, row + n, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  float sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += row[j] = std::exp(row[j] - max);
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
}

Ran run_attention(const KernelArgs& args) {
  // A mask, the [B, Tq, H, D] layout and zero_nan_rows: the reference kernel.
  if (args.in.size() > 3 || args.in[0].dtype() != DType::F32 || args.attrs.get_int("heads_last") != 0 ||
      args.attrs.get_int("zero_nan_rows") != 0)
    return Ran::kNotHandled;
  const HostTensor &q = args.in[0], &k = args.in[1], &v = args.in[2];
  HostTensor& out = args.out[0];
  const int r = q.rank();
  const int64_t tq = q.shape()[size_t(r - 2)], d = q.shape()[size_t(r - 1)];
  const int64_t tk = k.shape()[size_t(r - 2)], dv = v.shape()[size_t(r - 1)];
  const int64_t heads = numel_of(std::vector<int64_t>(q.shape().begin(), q.shape().end() - 2));
  if (out.numel() == 0) return Ran::kNative;
  if (tk == 0 || tq * tk > INT32_MAX || d > INT32_MAX || dv > INT32_MAX) return Ran::kNotHandled;
  double scale = args.attrs.get_float("scale");
  if (scale == 0) scale = 1.0 / std::sqrt(double(d));
  const bool causal = args.attrs.get_int("causal") != 0;
  const float *qp = q.data<float>(), *kp = k.data<float>(), *vp = v.data<float>();
  float* op = out.data<float>();
  use_single_threaded_blas();
  parallel_ranges(heads, tq * tk * (d + dv), [&](int64_t begin, int64_t end) {
    std::vector<float> scores(size_t(tq * tk));
    for (int64_t h = begin; h < end; ++h) {
      gemm_serial_bt(tq, tk, d, float(scale), qp + h * tq * d, d, kp + h * tk * d, d, scores.data(), tk);
      for (int64_t i = 0; i < tq; ++i) {
        float* row = scores.data() + i * tk;
        if (causal)  // j > i + (tk - tq) is masked
          for (int64_t j = std::max<int64_t>(0, i + (tk - tq) + 1); j < tk; ++j)
            row[j] = -std::numeric_limits<float>::infinity();
        softmax_row(row, tk);
      }
      gemm_serial(tq, dv, tk, scores.data(), tk, vp + h * tk * dv, dv, 0.0f, op + h * tq * dv, dv);
    }
  });
  return Ran::kOpenBlas;
}

bool attention_supports(Op op, DType dtype) { return op == Op::Attention && dtype == DType::F32; }

}  // namespace

const KernelFamily kAttentionFamily{attention_supports, run_attention};

}  // namespace kiln::eager::detail
