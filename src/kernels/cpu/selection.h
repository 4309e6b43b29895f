// The running selection shared by the CPU's top-k and sampling kernels: 64-bit order keys, a
// candidate buffer pruned to the k best at a running threshold, and a 16-lane SSE filter for f32
// rows. Why: sample's top-k and the top-p / min-p prefix are the same one-pass selection as topk.
//
// Each element gets a 64-bit order key (larger = earlier in the result) and its index; a candidate
// beats another by key, then by the lower index. The row is scanned in index order with a running
// threshold (the k-th best candidate so far): an element whose key does not exceed it can never
// enter the result (an equal key comes with a higher index), so only a few elements are kept.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_common.h"

namespace kiln::eager::detail {

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
inline void select_f32_row(const float* row, int64_t n, bool largest, Selection& sel) {
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
inline void select_row(const T* row, int64_t n, bool largest, Selection& sel) {
  if constexpr (std::is_same_v<T, float>) {
    select_f32_row(row, n, largest, sel);
  } else {
    for (int64_t s = 0; s < n; ++s) sel.offer(order_of(row, s), s);
  }
}

}  // namespace kiln::eager::detail
