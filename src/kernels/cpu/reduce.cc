// Fast eager reductions (sum, mean, max, min, prod, argmax, argmin). The input is seen as
// [outer, reduced, inner] around one contiguous run of reduced dims; floats accumulate in double,
// ints in int64 (wrapping). Why: reductions are memory-bound, so one pass with wide accumulators
// is both fast and as accurate as the float64 reference within rounding of the result.
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/cpu_common.h"

namespace kiln::eager::detail {

namespace {

enum class Fold { kSum, kProd, kMax, kMin };

// double for floats, int64 for ints: the accumulator of the reference.
template <typename T> using acc_t = std::conditional_t<std::is_integral_v<T>, int64_t, double>;

template <Fold F, typename Acc> constexpr Acc fold_identity() {
  if constexpr (F == Fold::kSum) return Acc(0);
  if constexpr (F == Fold::kProd) return Acc(1);
  if constexpr (std::is_integral_v<Acc>) {
    if constexpr (F == Fold::kMax) return std::numeric_limits<Acc>::lowest();
    else return std::numeric_limits<Acc>::max();
  } else {
    if constexpr (F == Fold::kMax) return -std::numeric_limits<Acc>::infinity();
    else return std::numeric_limits<Acc>::infinity();
  }
}

// One fold step. Max/min propagate NaN: a NaN v replaces acc, and a NaN acc never compares less
// or greater, so it stays.
template <Fold F, typename Acc> inline Acc fold_step(Acc acc, Acc v) {
  if constexpr (F == Fold::kSum) {
    if constexpr (std::is_integral_v<Acc>) return Acc(uint64_t(acc) + uint64_t(v));
    else return acc + v;
  } else if constexpr (F == Fold::kProd) {
    if constexpr (std::is_integral_v<Acc>) return Acc(uint64_t(acc) * uint64_t(v));
    else return acc * v;
  } else if constexpr (F == Fold::kMax) {
    return (v > acc || v != v) ? v : acc;
  } else {
    return (v < acc || v != v) ? v : acc;
  }
}

template <typename T> inline acc_t<T> widen(T v) {
  if constexpr (is_half_like_v<T>) return double(to_float(v));
  else return acc_t<T>(v);
}

// Folds n contiguous elements with kLanes independent accumulators (which the compiler keeps in
// vector registers), then combines the lanes in a fixed order.
template <Fold F, typename T> acc_t<T> fold_contiguous(const T* x, int64_t n) {
  using Acc = acc_t<T>;
  constexpr int kLanes = 16;
  Acc lanes[kLanes];
  for (int j = 0; j < kLanes; ++j) lanes[j] = fold_identity<F, Acc>();
  auto fold_values = [&](const auto* v, int64_t count) {
    int64_t i = 0;
    for (; i + kLanes <= count; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lanes[j] = fold_step<F>(lanes[j], Acc(v[i + j]));
    for (; i < count; ++i) lanes[0] = fold_step<F>(lanes[0], Acc(v[i]));
  };
  if constexpr (is_half_like_v<T>) {
    float buf[kConvertBlock];
    for (int64_t block = 0; block < n; block += kConvertBlock) {
      int64_t m = std::min(kConvertBlock, n - block);
      load_as_float(x + block, m, buf);
      fold_values(buf, m);
    }
  } else {
    fold_values(x, n);
  }
  Acc acc = lanes[0];
  for (int j = 1; j < kLanes; ++j) acc = fold_step<F>(acc, lanes[j]);
  return acc;
}

// Writes a double/int64 result to the output type with the reference's single rounding.
template <typename T> inline T narrow(acc_t<T> v) {
  if constexpr (std::is_same_v<T, Half>) return Half::from_bits(f64_to_f16_bits(v));
  else if constexpr (std::is_same_v<T, BFloat16>) return BFloat16::from_bits(f64_to_bf16_bits(v));
  else return T(v);  // float rounds to nearest; ints wrap
}

// A long row is folded in fixed-size chunks (in parallel unless already inside a parallel
// region), so the result does not depend on the number of threads.
constexpr int64_t kRowChunk = 1 << 15;

template <Fold F, typename T> acc_t<T> fold_row(const T* x, int64_t n) {
  using Acc = acc_t<T>;
  if (n < 2 * kRowChunk) return fold_contiguous<F>(x, n);
  int64_t chunks = (n + kRowChunk - 1) / kRowChunk;
  std::vector<Acc> partial(static_cast<size_t>(chunks));
  parallel_ranges(chunks, kRowChunk, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c)
      partial[size_t(c)] = fold_contiguous<F>(x + c * kRowChunk, std::min(kRowChunk, n - c * kRowChunk));
  });
  Acc acc = fold_identity<F, Acc>();
  for (Acc p : partial) acc = fold_step<F>(acc, p);
  return acc;
}

struct ReduceShape {
  int64_t outer = 1, reduced = 1, inner = 1;
};

// [outer, reduced, inner] when the reduced dims form one contiguous run (size-1 dims ignored);
// nullopt-like `ok=false` otherwise.
bool view_as_one_run(const std::vector<int64_t>& shape, const std::vector<bool>& is_reduced,
                     ReduceShape& view) {
  int first = -1, last = -1;
  for (int d = 0; d < int(shape.size()); ++d) {
    if (!is_reduced[size_t(d)] || shape[size_t(d)] == 1) continue;
    if (first < 0) first = d;
    last = d;
  }
  view = ReduceShape{};
  for (int d = 0; d < int(shape.size()); ++d) {
    int64_t size = shape[size_t(d)];
    if (size == 1) continue;
    if (first >= 0 && d >= first && d <= last) {
      if (!is_reduced[size_t(d)]) return false;  // a kept dim inside the reduced run
      view.reduced *= size;
    } else if (first < 0 || d < first) {
      view.outer *= size;
    } else {
      view.inner *= size;
    }
  }
  return true;
}

template <Fold F, typename T>
void reduce_typed(const HostTensor& x, HostTensor& out, const ReduceShape& v, bool mean) {
  using Acc = acc_t<T>;
  const T* in = x.data<T>();
  T* o = out.data<T>();
  const double count = double(v.reduced);
  auto finish = [&](Acc acc) -> T {
    if constexpr (std::is_floating_point_v<Acc>) return narrow<T>(mean ? acc / count : acc);
    else return narrow<T>(acc);
  };
  if (v.inner == 1) {  // rows: each output folds one contiguous row
    if (v.outer < omp_get_max_threads()) {  // few long rows: split each row instead
      for (int64_t r = 0; r < v.outer; ++r) o[r] = finish(fold_row<F>(in + r * v.reduced, v.reduced));
      return;
    }
    parallel_ranges(v.outer, v.reduced, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) o[r] = finish(fold_row<F>(in + r * v.reduced, v.reduced));
    });
    return;
  }
  // Columns: accumulators across a slice of `inner`, one pass down the reduced dim.
  constexpr int64_t kColumnChunk = 512;
  const int64_t chunks_per_outer = (v.inner + kColumnChunk - 1) / kColumnChunk;
  parallel_ranges(v.outer * chunks_per_outer, v.reduced * kColumnChunk, [&](int64_t begin, int64_t end) {
    Acc acc[kColumnChunk];
    float buf[kColumnChunk];
    for (int64_t task = begin; task < end; ++task) {
      int64_t outer = task / chunks_per_outer, i0 = (task % chunks_per_outer) * kColumnChunk;
      int64_t m = std::min(kColumnChunk, v.inner - i0);
      for (int64_t i = 0; i < m; ++i) acc[i] = fold_identity<F, Acc>();
      for (int64_t r = 0; r < v.reduced; ++r) {
        const T* row = in + (outer * v.reduced + r) * v.inner + i0;
        if constexpr (is_half_like_v<T>) {
          load_as_float(row, m, buf);
#pragma omp simd
          for (int64_t i = 0; i < m; ++i) acc[i] = fold_step<F>(acc[i], Acc(buf[i]));
        } else {
#pragma omp simd
          for (int64_t i = 0; i < m; ++i) acc[i] = fold_step<F>(acc[i], Acc(row[i]));
        }
      }
      for (int64_t i = 0; i < m; ++i) o[outer * v.inner + i0 + i] = finish(acc[i]);
    }
  });
}

template <Fold F> Ran reduce(const KernelArgs& a, bool mean) {
  const HostTensor& x = a.in[0];
  if (x.numel() == 0) return Ran::kNotHandled;  // empty folds: the reference owns the identities
  const auto& axes = a.attrs.get_ints("axes");
  std::vector<bool> is_reduced(size_t(x.rank()), axes.empty());
  for (int64_t axis : axes) is_reduced[size_t(axis < 0 ? axis + x.rank() : axis)] = true;
  ReduceShape view;
  if (!view_as_one_run(x.shape(), is_reduced, view)) return Ran::kNotHandled;
  return dispatch_eager(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) return Ran::kNotHandled;
    else reduce_typed<F, T>(x, a.out[0], view, mean);
    return Ran::kNative;
  });
}

// ---- argmax / argmin: first index of the extreme; the first NaN wins over any number ----

template <typename T> Ran arg_reduce_typed(const KernelArgs& a, bool want_max) {
  const HostTensor& x = a.in[0];
  const int rank = x.rank();
  int64_t axis = a.attrs.get_int("axis");
  if (axis < 0) axis += rank;
  ReduceShape v;
  v.reduced = x.shape()[size_t(axis)];
  for (int d = 0; d < axis; ++d) v.outer *= x.shape()[size_t(d)];
  for (int d = int(axis) + 1; d < rank; ++d) v.inner *= x.shape()[size_t(d)];
  if (v.reduced == 0) return Ran::kNotHandled;  // the reference reports the empty axis
  const T* in = x.data<T>();
  int64_t* o = a.out[0].data<int64_t>();
  parallel_ranges(v.outer * v.inner, v.reduced, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      int64_t outer = task / v.inner, i = task % v.inner;
      const T* p = in + outer * v.reduced * v.inner + i;
      using C = std::conditional_t<std::is_integral_v<T>, T, compute_t<T>>;
      auto load = [&](int64_t k) -> C {
        if constexpr (is_half_like_v<T>) return to_float(p[k * v.inner]);
        else return p[k * v.inner];
      };
      int64_t best = 0;
      C best_value = load(0);
      if (!(best_value != best_value)) {
        for (int64_t k = 1; k < v.reduced; ++k) {
          C value = load(k);
          if (value != value) { best = k; break; }
          if (want_max ? value > best_value : value < best_value) { best = k; best_value = value; }
        }
      }
      o[task] = best;
    }
  });
  return Ran::kNative;
}

Ran arg_reduce(const KernelArgs& a, bool want_max) {
  return dispatch_eager(a.in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) return Ran::kNotHandled;
    else return arg_reduce_typed<T>(a, want_max);
  });
}

Ran run_reduce(const KernelArgs& a) {
  switch (a.op) {
    case Op::ReduceSum: return reduce<Fold::kSum>(a, false);
    case Op::ReduceMean: return reduce<Fold::kSum>(a, true);
    case Op::ReduceProd: return reduce<Fold::kProd>(a, false);
    case Op::ReduceMax: return reduce<Fold::kMax>(a, false);
    case Op::ReduceMin: return reduce<Fold::kMin>(a, false);
    case Op::ArgMax: return arg_reduce(a, true);
    case Op::ArgMin: return arg_reduce(a, false);
    default: return Ran::kNotHandled;
  }
}

bool reduce_supports(Op op, DType dtype) {
  switch (op) {
    case Op::ReduceSum: case Op::ReduceProd: case Op::ReduceMax: case Op::ReduceMin:
    case Op::ArgMax: case Op::ArgMin:
      return dtype != DType::Bool;
    case Op::ReduceMean: return is_float(dtype);
    default: return false;
  }
}

}  // namespace

const KernelFamily kReduceFamily{reduce_supports, run_reduce};

}  // namespace kiln::eager::detail
