// Top-k along an axis on the CPU: one pass over each row keeping a small candidate buffer
// (selection.h), rows spread over the OpenMP team. Why: topk ran as the reference kernel, a stable
// sort of every row in doubles (a 256000-token vocabulary row sorted whole to keep 50), and
// selection is part of every decode step (issue 23). Semantics are the reference kernel's
// (src/interp/ref_onnx_ops.cc): k largest (or smallest), ties by the lower index, NaN ordered as the
// largest value, -0 equal to +0, the result sorted.
#include <algorithm>
#include <vector>

#include "interp/ref_kernels.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/selection.h"
#include "kernels/cpu/sort.h"

namespace kiln::eager::detail {
namespace {

// topk of a whole line at least this long runs the radix sort (sort.h).
constexpr int64_t kSortInstead = 64;

// A row at least this long is split over the threads when there are fewer rows than threads.
constexpr int64_t kSegmentedRow = 32768;

template <typename T>
void write_row(const std::vector<Candidate>& best, const T* row, int64_t k, int64_t o, int64_t i, int64_t inner,
               T* values, int64_t* indices) {
  for (int64_t j = 0; j < k; ++j) {
    const int64_t at = (o * k + j) * inner + i;
    values[at] = row[best[size_t(j)].index];
    indices[at] = best[size_t(j)].index;
  }
}

// Fewer rows than threads (a decode step's one row of logits): each contiguous row is cut into
// segments selected in parallel, then the segments' candidates are merged. The order of (key,
// index) is global, so the merge gives the one-pass result.
template <typename T>
void topk_segmented(const T* x, T* values, int64_t* indices, int64_t rows, int64_t dim, int64_t k, bool largest,
                    int64_t segments) {
  std::vector<std::vector<Candidate>> parts(size_t(rows * segments));
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < rows * segments; ++p) {
    const int64_t r = p / segments, seg = p % segments;
    const int64_t lo = dim * seg / segments, hi = dim * (seg + 1) / segments;
    Selection sel(std::min(k, hi - lo), largest);
    select_row(x + r * dim + lo, hi - lo, largest, sel);
    parts[size_t(p)] = sel.finish();
    for (Candidate& c : parts[size_t(p)]) c.index += lo;
  }
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<Candidate> all;
    for (int64_t seg = 0; seg < segments; ++seg) {
      const std::vector<Candidate>& part = parts[size_t(r * segments + seg)];
      all.insert(all.end(), part.begin(), part.end());
    }
    std::nth_element(all.begin(), all.begin() + (k - 1), all.end(), Before{});
    all.resize(size_t(k));
    std::sort(all.begin(), all.end(), Before{});
    write_row(all, x + r * dim, k, r, 0, 1, values, indices);
  }
}

template <typename T>
void topk_rows(const KernelArgs& a, int64_t outer, int64_t dim, int64_t inner, int64_t k, bool largest) {
  const T* x = a.in[0].data<T>();
  T* values = a.out[0].data<T>();
  int64_t* indices = a.out[1].data<int64_t>();
  const int64_t threads = omp_get_max_threads(), rows = outer * inner;
  if (inner == 1 && rows < threads && dim >= kSegmentedRow && k * threads * 8 <= dim && !omp_in_parallel()) {
    topk_segmented(x, values, indices, rows, dim, k, largest, (threads + rows - 1) / rows);
    return;
  }
  parallel_ranges(rows, dim, [&](int64_t begin, int64_t end) {
    Selection sel(k, largest);
    std::vector<T> strided;  // a row along a non-innermost axis, gathered
    for (int64_t r = begin; r < end; ++r) {
      const int64_t o = r / inner, i = r % inner;
      const T* row = x + o * dim * inner + i;
      if (inner != 1) {
        strided.resize(size_t(dim));
        for (int64_t s = 0; s < dim; ++s) strided[size_t(s)] = row[s * inner];
        row = strided.data();
      }
      sel.reset();
      select_row(row, dim, largest, sel);
      write_row(sel.finish(), row, k, o, i, inner, values, indices);
    }
  });
}

Ran run_topk(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  const int axis = interp::normalize_axis(a.attrs.get_int("axis"), x.rank());
  const int64_t k = a.attrs.get_int("k");
  const bool largest = a.attrs.get_int("largest") != 0;
  int64_t outer = 1, dim = x.shape()[size_t(axis)], inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x.shape()[size_t(d)];
  for (int d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[size_t(d)];
  if (k < 1 || k > dim || dim >= (int64_t(1) << 62)) return Ran::kNotHandled;  // the reference reports it
  if (k == dim && dim >= kSortInstead) {  // every element: a sort in the same order
    const Ran ran = sort_along(x, axis, largest, &a.out[0], a.out[1]);
    if (ran != Ran::kNotHandled) return ran;
  }
  switch (x.dtype()) {
    case DType::F32: topk_rows<float>(a, outer, dim, inner, k, largest); break;
    case DType::F64: topk_rows<double>(a, outer, dim, inner, k, largest); break;
    case DType::I32: topk_rows<int32_t>(a, outer, dim, inner, k, largest); break;
    case DType::I64: topk_rows<int64_t>(a, outer, dim, inner, k, largest); break;
    case DType::F16: topk_rows<Half>(a, outer, dim, inner, k, largest); break;
    case DType::BF16: topk_rows<BFloat16>(a, outer, dim, inner, k, largest); break;
    default: return Ran::kNotHandled;
  }
  return Ran::kNative;
}

bool topk_supports(Op op, DType dtype) {
  return op == Op::TopK && (dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 || dtype == DType::BF16 ||
                            dtype == DType::I32 || dtype == DType::I64);
}

}  // namespace

const KernelFamily kTopKFamily{topk_supports, run_topk};

}  // namespace kiln::eager::detail
