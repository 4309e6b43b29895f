// Fast eager softmax, log_softmax, layer_norm, rms_norm and batch_norm: rows (or [len, inner]
// slabs) in parallel, 16-bit floats through float scratch. Softmax computes in the element's
// float type with a double sum; the norms compute in double like the reference. Why: these
// high-level ops are one kernel each in eager mode, and their decompositions would be five.
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_common.h"

namespace kiln::eager::detail {

namespace {

struct AxisView {
  int64_t outer = 1, len = 1, inner = 1;
};
AxisView view_around(const std::vector<int64_t>& shape, int axis) {
  AxisView v;
  v.len = shape[size_t(axis)];
  for (int d = 0; d < axis; ++d) v.outer *= shape[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < shape.size(); ++d) v.inner *= shape[d];
  return v;
}
int normalized_axis(const KernelArgs& a, const char* name = "axis") {
  int64_t axis = a.attrs.get_int(name);
  return int(axis < 0 ? axis + a.in[0].rank() : axis);
}

// ---- softmax over one slab [len, inner] in compute type C (float or double) ----

template <typename C> C nan_propagating_max(C acc, C v) { return (v > acc || v != v) ? v : acc; }

template <typename C> void softmax_slab(const C* x, C* y, int64_t len, int64_t inner, bool log_form,
                                        std::vector<C>& max, std::vector<double>& sum) {
  max.assign(size_t(inner), -std::numeric_limits<C>::infinity());
  sum.assign(size_t(inner), 0.0);
  C* mx = max.data();
  double* sm = sum.data();
  for (int64_t k = 0; k < len; ++k) {
    const C* row = x + k * inner;
#pragma omp simd
    for (int64_t i = 0; i < inner; ++i) mx[i] = nan_propagating_max(mx[i], row[i]);
  }
  // A row whose max is infinite gives NaN, as exp(x - max) / sum does in plain math.
  for (int64_t k = 0; k < len; ++k) {
    const C* row = x + k * inner;
    C* out = y + k * inner;
    for (int64_t i = 0; i < inner; ++i) {
      C e = std::exp(row[i] - mx[i]);
      sm[i] += double(e);
      out[i] = e;
    }
  }
  for (int64_t i = 0; i < inner; ++i) sm[i] = log_form ? std::log(sm[i]) : 1.0 / sm[i];
  for (int64_t k = 0; k < len; ++k) {
    const C* row = x + k * inner;
    C* out = y + k * inner;
    if (log_form) {
      for (int64_t i = 0; i < inner; ++i) out[i] = (row[i] - mx[i]) - C(sm[i]);
    } else {
      for (int64_t i = 0; i < inner; ++i) out[i] = C(double(out[i]) * sm[i]);
    }
  }
}

template <typename T> void softmax_typed(const KernelArgs& a, bool log_form) {
  using C = compute_t<T>;
  const HostTensor& x = a.in[0];
  AxisView v = view_around(x.shape(), normalized_axis(a));
  const int64_t slab = v.len * v.inner;
  const T* in = x.data<T>();
  T* out = a.out[0].data<T>();
  parallel_ranges(v.outer, slab * 8, [&](int64_t begin, int64_t end) {
    std::vector<C> max, scratch_in, scratch_out;
    std::vector<double> sum;
    for (int64_t o = begin; o < end; ++o) {
      if constexpr (is_half_like_v<T>) {
        scratch_in.resize(size_t(slab));
        scratch_out.resize(size_t(slab));
        load_as_float(in + o * slab, slab, scratch_in.data());
        softmax_slab(scratch_in.data(), scratch_out.data(), v.len, v.inner, log_form, max, sum);
        store_from_float(scratch_out.data(), slab, out + o * slab);
      } else {
        softmax_slab(in + o * slab, out + o * slab, v.len, v.inner, log_form, max, sum);
      }
    }
  });
}

// ---- layer_norm / rms_norm: rows of `group` elements (dims axis..) ----

// weight/bias broadcast against the group's shape, expanded to one double per group element.
std::vector<double> expand_to_group(const HostTensor& t, const std::vector<int64_t>& group_shape) {
  std::vector<double> out(size_t(numel_of(group_shape)));
  if (out.empty()) return out;
  BroadcastPlan plan = make_broadcast_plan({t.shape()}, group_shape);
  for_each_row<1>(plan, 0, plan.rows, [&](int64_t row, const int64_t* off) {
    for (int64_t i = 0; i < plan.inner; ++i)
      out[size_t(row * plan.inner + i)] = t.get_f64(off[0] + i * plan.inner_stride[0]);
  });
  return out;
}

template <typename T> void normalize_rows(const KernelArgs& a, bool subtract_mean) {
  const HostTensor& x = a.in[0];
  const int axis = normalized_axis(a);
  const double eps = a.attrs.get_float("eps");
  std::vector<int64_t> group_shape(x.shape().begin() + axis, x.shape().end());
  const int64_t group = numel_of(group_shape);
  if (group == 0) return;
  const int64_t rows = x.numel() / group;
  const bool has_weight = a.in.size() > 1, has_bias = a.in.size() > 2;
  std::vector<double> weight = has_weight ? expand_to_group(a.in[1], group_shape) : std::vector<double>{};
  std::vector<double> bias = has_bias ? expand_to_group(a.in[2], group_shape) : std::vector<double>{};
  const T* in = x.data<T>();
  T* out = a.out[0].data<T>();
  parallel_ranges(rows, group * 8, [&](int64_t begin, int64_t end) {
    std::vector<double> row(static_cast<size_t>(group));
    std::vector<float> buf(is_half_like_v<T> ? size_t(group) : 0);
    for (int64_t r = begin; r < end; ++r) {
      const T* src = in + r * group;
      double* d = row.data();
      if constexpr (is_half_like_v<T>) {
        load_as_float(src, group, buf.data());
#pragma omp simd
        for (int64_t j = 0; j < group; ++j) d[j] = double(buf[size_t(j)]);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < group; ++j) d[j] = double(src[j]);
      }
      double mean = 0;
      if (subtract_mean) {
#pragma omp simd reduction(+ : mean)
        for (int64_t j = 0; j < group; ++j) mean += d[j];
        mean /= double(group);
      }
      double sq = 0;
#pragma omp simd reduction(+ : sq)
      for (int64_t j = 0; j < group; ++j) sq += (d[j] - mean) * (d[j] - mean);
      const double inv_std = 1.0 / std::sqrt(sq / double(group) + eps);
#pragma omp simd
      for (int64_t j = 0; j < group; ++j) {
        double y = (d[j] - mean) * inv_std;
        if (has_weight) y *= weight[size_t(j)];
        if (has_bias) y += bias[size_t(j)];
        d[j] = y;
      }
      if constexpr (is_half_like_v<T>) {
        for (int64_t j = 0; j < group; ++j) buf[size_t(j)] = float(d[j]);
        store_from_float(buf.data(), group, out + r * group);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < group; ++j) out[r * group + j] = T(d[j]);
      }
    }
  });
}

// ---- batch_norm: per (n, c) slab, y = (x - mean[c]) * inv_std[c] * scale[c] + bias[c] ----

template <typename T> void batch_norm_typed(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  const double eps = a.attrs.get_float("eps");
  AxisView v = view_around(x.shape(), 1);
  std::vector<double> scale(size_t(v.len)), bias(size_t(v.len)), mean(size_t(v.len)), inv_std(size_t(v.len));
  for (int64_t c = 0; c < v.len; ++c) {
    scale[size_t(c)] = a.in[1].get_f64(c);
    bias[size_t(c)] = a.in[2].get_f64(c);
    mean[size_t(c)] = a.in[3].get_f64(c);
    inv_std[size_t(c)] = 1.0 / std::sqrt(a.in[4].get_f64(c) + eps);
  }
  const T* in = x.data<T>();
  T* out = a.out[0].data<T>();
  parallel_ranges(v.outer * v.len, v.inner * 4, [&](int64_t begin, int64_t end) {
    float buf[kConvertBlock];
    for (int64_t slab = begin; slab < end; ++slab) {
      const size_t c = size_t(slab % v.len);
      const double m = mean[c], is = inv_std[c], s = scale[c], b = bias[c];
      const T* src = in + slab * v.inner;
      T* dst = out + slab * v.inner;
      if constexpr (is_half_like_v<T>) {
        for (int64_t block = 0; block < v.inner; block += kConvertBlock) {
          int64_t n = std::min(kConvertBlock, v.inner - block);
          load_as_float(src + block, n, buf);
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) buf[i] = float((double(buf[i]) - m) * is * s + b);
          store_from_float(buf, n, dst + block);
        }
      } else {
#pragma omp simd
        for (int64_t i = 0; i < v.inner; ++i) dst[i] = T((double(src[i]) - m) * is * s + b);
      }
    }
  });
}

template <typename Fn> Ran for_float_dtype(DType dtype, Fn fn) {
  switch (dtype) {
    case DType::F32: fn(float{}); return Ran::kNative;
    case DType::F64: fn(double{}); return Ran::kNative;
    case DType::F16: fn(Half{}); return Ran::kNative;
    case DType::BF16: fn(BFloat16{}); return Ran::kNative;
    default: return Ran::kNotHandled;
  }
}

Ran run_softmax_norm(const KernelArgs& a) {
  DType dtype = a.in[0].dtype();
  if (a.in[0].numel() == 0) return Ran::kNative;
  switch (a.op) {
    case Op::Softmax:
    case Op::LogSoftmax: {
      bool log_form = a.op == Op::LogSoftmax;
      return for_float_dtype(dtype, [&](auto tag) { softmax_typed<decltype(tag)>(a, log_form); });
    }
    case Op::LayerNorm:
    case Op::RmsNorm: {
      bool subtract_mean = a.op == Op::LayerNorm;
      return for_float_dtype(dtype, [&](auto tag) { normalize_rows<decltype(tag)>(a, subtract_mean); });
    }
    case Op::BatchNorm:
      return for_float_dtype(dtype, [&](auto tag) { batch_norm_typed<decltype(tag)>(a); });
    default: return Ran::kNotHandled;
  }
}

bool softmax_norm_supports(Op op, DType dtype) {
  switch (op) {
    case Op::Softmax: case Op::LogSoftmax: case Op::LayerNorm: case Op::RmsNorm: case Op::BatchNorm:
      return is_float(dtype);
    default: return false;
  }
}

}  // namespace

const KernelFamily kSoftmaxNormFamily{softmax_norm_supports, run_softmax_norm};

}  // namespace kiln::eager::detail
