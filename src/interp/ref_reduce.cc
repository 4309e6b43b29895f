// Reference kernels for reductions: every input element is visited once and folded into the output
// element it maps to (reduced dims dropped or kept as 1). Floats accumulate in double, ints in int64.
// Why: one visiting scheme for all reductions keeps their index logic in one place.
#include <cmath>
#include <limits>

#include "interp/ref_kernels.h"
#include "kiln/error.h"

namespace kiln::interp {

namespace {

std::vector<bool> reduced_dims(const KernelArgs& a, int rank) {
  const auto& axes = a.attrs.get_ints("axes");
  std::vector<bool> reduced(size_t(rank), axes.empty());
  for (int64_t axis : axes) reduced[size_t(normalize_axis(axis, rank, "reduction axis"))] = true;
  return reduced;
}

// For each input element, the linear index of the output element it folds into.
std::vector<int64_t> output_index_of_each_input(const std::vector<int64_t>& in_shape,
                                                const std::vector<bool>& reduced) {
  std::vector<int64_t> kept_shape;
  for (size_t d = 0; d < in_shape.size(); ++d)
    if (!reduced[d]) kept_shape.push_back(in_shape[d]);
  int64_t n = numel_of(in_shape);
  std::vector<int64_t> map(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> coords = unravel_index(i, in_shape), kept;
    for (size_t d = 0; d < in_shape.size(); ++d)
      if (!reduced[d]) kept.push_back(coords[d]);
    map[size_t(i)] = ravel_index(kept, kept_shape);
  }
  return map;
}

int64_t reduced_count(const std::vector<int64_t>& in_shape, const std::vector<bool>& reduced) {
  int64_t n = 1;
  for (size_t d = 0; d < in_shape.size(); ++d)
    if (reduced[d]) n *= in_shape[d];
  return n;
}

enum class Fold { Sum, Prod, Max, Min };

// Reductions over an empty set give the fold's identity: 0, 1, -inf (lowest int), +inf (max int).
void reduce(const KernelArgs& a, Fold fold, bool divide_by_count) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  std::vector<bool> reduced = reduced_dims(a, x.rank());
  std::vector<int64_t> target = output_index_of_each_input(x.shape(), reduced);
  size_t n_out = size_t(out.numel());
  if (computes_in_double(x.dtype())) {
    double init = fold == Fold::Sum    ? 0.0
                  : fold == Fold::Prod ? 1.0
                  : fold == Fold::Max  ? -std::numeric_limits<double>::infinity()
                                       : std::numeric_limits<double>::infinity();
    std::vector<double> acc(n_out, init);
    for (int64_t i = 0; i < x.numel(); ++i) {
      double v = x.get_f64(i);
      double& r = acc[size_t(target[size_t(i)])];
      switch (fold) {
        case Fold::Sum: r += v; break;
        case Fold::Prod: r *= v; break;
        // NaN propagates: once r is NaN it stays NaN, and a NaN v replaces r.
        case Fold::Max: if (std::isnan(v) || v > r) r = std::isnan(r) ? r : v; break;
        case Fold::Min: if (std::isnan(v) || v < r) r = std::isnan(r) ? r : v; break;
      }
    }
    double count = double(reduced_count(x.shape(), reduced));
    for (size_t o = 0; o < n_out; ++o) out.set_f64(int64_t(o), divide_by_count ? acc[o] / count : acc[o]);
  } else {
    KILN_ASSERT(!divide_by_count);
    int64_t init = fold == Fold::Sum    ? 0
                   : fold == Fold::Prod ? 1
                   : fold == Fold::Max  ? std::numeric_limits<int64_t>::lowest()
                                        : std::numeric_limits<int64_t>::max();
    std::vector<int64_t> acc(n_out, init);
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t v = x.get_i64(i);
      int64_t& r = acc[size_t(target[size_t(i)])];
      switch (fold) {
        case Fold::Sum: r = wrapping_add(r, v); break;
        case Fold::Prod: r = wrapping_mul(r, v); break;
        case Fold::Max: r = v > r ? v : r; break;
        case Fold::Min: r = v < r ? v : r; break;
      }
    }
    for (size_t o = 0; o < n_out; ++o) out.set_i64(int64_t(o), acc[o]);
  }
}

// First index of the extreme value along `axis`; a NaN counts as more extreme than any number
// (consistent with max/min propagating NaN), and the first NaN wins.
void arg_reduce(const KernelArgs& a, bool want_max) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  int axis = normalize_axis(a.attrs.get_int("axis"), x.rank());
  int64_t len = x.shape()[size_t(axis)];
  KILN_CHECK(len > 0 || out.numel() == 0, "argmax/argmin over an empty axis ", axis);
  int64_t inner = 1, outer = 1;
  for (int d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[size_t(d)];
  for (int d = 0; d < axis; ++d) outer *= x.shape()[size_t(d)];
  bool floats = computes_in_double(x.dtype());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      int64_t best = 0;
      for (int64_t k = 1; k < len; ++k) {
        int64_t cand = (o * len + k) * inner + in, cur = (o * len + best) * inner + in;
        bool better;
        if (floats) {
          double v = x.get_f64(cand), b = x.get_f64(cur);
          if (std::isnan(b)) better = false;
          else if (std::isnan(v)) better = true;
          else better = want_max ? v > b : v < b;
        } else {
          int64_t v = x.get_i64(cand), b = x.get_i64(cur);
          better = want_max ? v > b : v < b;
        }
        if (better) best = k;
      }
      out.set_i64(o * inner + in, best);
    }
  }
}

}  // namespace

void ref_ReduceSum(const KernelArgs& a) { reduce(a, Fold::Sum, false); }
void ref_ReduceMean(const KernelArgs& a) { reduce(a, Fold::Sum, true); }
void ref_ReduceMax(const KernelArgs& a) { reduce(a, Fold::Max, false); }
void ref_ReduceMin(const KernelArgs& a) { reduce(a, Fold::Min, false); }
void ref_ReduceProd(const KernelArgs& a) { reduce(a, Fold::Prod, false); }
void ref_ArgMax(const KernelArgs& a) { arg_reduce(a, true); }
void ref_ArgMin(const KernelArgs& a) { arg_reduce(a, false); }

}  // namespace kiln::interp
