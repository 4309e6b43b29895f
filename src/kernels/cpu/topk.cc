// Top-k along an axis on the CPU: one pass over each row keeping a small candidate buffer, rows
// spread over the OpenMP team. Why: topk ran as the reference kernel, a stable sort of every row in
// doubles (a 256000-token vocabulary row sorted whole to keep 50), and selection is part of every
// decode step (issue 23). Semantics are the reference kernel's (src/interp/ref_onnx_ops.cc): k
// largest (or smallest), ties by the lower index, NaN ordered as the largest value, -0 equal to +0,
// the result sorted.
//
// Each element gets a 64-bit order key (larger = earlier in the result) and its index; a candidate
// beats another by key, then by the lower index. The row is scanned in index order with a running
// threshold (the k-th best candidate so far): an element whose key does not exceed it can never
// enter the result (an equal key comes with a higher index), so only a few elements are kept. f32
// rows compare 16-element chunks with the threshold's value at once (SSE, every x86-64 CPU).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "interp/ref_kernels.h"
#include "kernels/cpu/cpu_common.h"

namespace kiln::eager::detail {
namespace {

// A row at least this long is split over the threads when there are fewer rows than threads.
constexpr int64_t kSegmentedRow = 32768;

struct Candidate {
  uint64_t key;
  int64_t index;
};

// Whether a comes before b in the result (a functor: std::sort and nth_element inline it).
struct Before {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.key != b.key ? a.key > b.key : a.index < b.index;
  }
};

// The order of a float: bits mapped so that unsigned comparison is numeric comparison, -0 as +0,
// every NaN above +inf.
inline uint64_t float_order(double v) {
  if (v != v) return std::numeric_limits<uint64_t>::max();
  if (v == 0) v = 0;  // -0 -> +0
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return (bits >> 63) ? ~bits : bits | (uint64_t(1) << 63);
}

inline uint64_t int_order(int64_t v) { return uint64_t(v) ^ (uint64_t(1) << 63); }

// Reads element s of a row as its order key for the "largest" direction.
template <typename T>
inline uint64_t order_of(const T* row, int64_t s) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) return float_order(double(row[s]));
  else if constexpr (is_half_like_v<T>) return float_order(double(to_float(row[s])));
  else return int_order(int64_t(row[s]));
}

// The running selection of one row.
class Selection {
 public:
  Selection(int64_t k, bool largest) : k_(k), largest_(largest), cap_(k + std::max<int64_t>(64, k / 2)) {
    buf_.reserve(size_t(cap_));
  }
  void reset() { buf_.clear(), have_threshold_ = false; }
  // Offers element `index` with "largest"-direction key `key` (elements come in index order);
  // true when the threshold moved.
  bool offer(uint64_t key, int64_t index) {
    if (!largest_) key = ~key;  // smallest first; NaN (the largest key) becomes the smallest: last
    if (have_threshold_ && key <= threshold_) return false;  // an equal key has a higher index: it loses
    buf_.push_back({key, index});
    if (int64_t(buf_.size()) < cap_) return false;
    prune();
    return true;
  }
  bool has_threshold() const { return have_threshold_; }
  // The sorted result: the k best candidates.
  const std::vector<Candidate>& finish() {
    if (int64_t(buf_.size()) > k_) prune();
    std::sort(buf_.begin(), buf_.end(), Before{});
    return buf_;
  }
  // The k-th best key so far, in this selection's direction (valid when has_threshold()).
  uint64_t threshold() const { return threshold_; }

 private:
  void prune() {
    std::nth_element(buf_.begin(), buf_.begin() + (k_ - 1), buf_.end(), Before{});
    buf_.resize(size_t(k_));
    threshold_ = buf_.back().key;
    have_threshold_ = true;
  }
  int64_t k_;
  bool largest_;
  int64_t cap_;
  std::vector<Candidate> buf_;
  bool have_threshold_ = false;
  uint64_t threshold_ = 0;
};

// The value a "largest"-direction key stands for (float_order's inverse), for the f32 filter.
inline double value_of_order(uint64_t key) {
  uint64_t bits = (key >> 63) ? key & ~(uint64_t(1) << 63) : ~key;
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// The lanes of a 16-element chunk that could pass threshold value tv (bit i: chunk[i] is not below
// it for `largest`, not above it otherwise; NaN always passes), with four SSE compares.
inline unsigned passing_lanes(const float* chunk, float tv, bool largest) {
  const __m128 t = _mm_set1_ps(tv);
  unsigned mask = 0;
  for (int q = 0; q < 4; ++q) {
    const __m128 v = _mm_loadu_ps(chunk + 4 * q);
    const __m128 pass = largest ? _mm_cmpnlt_ps(v, t) : _mm_cmpngt_ps(v, t);
    mask |= unsigned(_mm_movemask_ps(pass)) << (4 * q);
  }
  return mask;
}

// One contiguous f32 row. Once there is a threshold, each 16-element chunk is compared with its
// value at once and only the lanes that pass are offered (most chunks have none).
void select_f32_row(const float* row, int64_t n, bool largest, Selection& sel) {
  bool filter = false;  // tv is the threshold's value (not NaN)
  float tv = 0;
  auto update = [&] {
    const uint64_t t = largest ? sel.threshold() : ~sel.threshold();  // the "largest"-direction key
    filter = sel.has_threshold() && t != std::numeric_limits<uint64_t>::max();
    if (filter) tv = float(value_of_order(t));
  };
  int64_t s = 0;
  for (; s + 16 <= n; s += 16) {
    unsigned mask = filter ? passing_lanes(row + s, tv, largest) : 0xffffu;
    while (mask != 0) {
      const int i = __builtin_ctz(mask);
      mask &= mask - 1;
      if (sel.offer(order_of(row, s + i), s + i)) update();
    }
  }
  for (; s < n; ++s) sel.offer(order_of(row, s), s);
}

// Scans row[0, n) into `sel` (indices relative to row).
template <typename T>
void select_row(const T* row, int64_t n, bool largest, Selection& sel) {
  if constexpr (std::is_same_v<T, float>) {
    select_f32_row(row, n, largest, sel);
  } else {
    for (int64_t s = 0; s < n; ++s) sel.offer(order_of(row, s), s);
  }
}

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
