// The `sample` op on the CPU: one token per row of logits, rows spread over the OpenMP team. Why:
// a sampling step written as softmax -> sort -> cumsum -> multinomial reads and writes the whole
// vocabulary several times and sorts it; here a row is read once or twice (issue 23).
//
// Semantics are the reference kernel's (src/interp/ref_selection.cc, docs/sampling.md) and the
// token is the same: penalties, then s = logit / temperature, the top-k / top-p / min-p prefix of
// the tokens in order of s (ties by the lower token), then argmax(s + Gumbel(seed, step, token))
// over that prefix. What differs is the work:
//   - the prefix comes from a one-pass selection with a running threshold (selection.h); without
//     top-k it grows (64, then 1024 tokens) until the top-p or min-p cut falls inside it, and past
//     that (a flat row: most of it is kept) the row is radix-sorted (sort.h);
//   - without any filter, a token takes the logarithms of its Gumbel number only when its uniform
//     could beat the best score so far (most cannot), Philox runs sixteen counters at once
//     (philox_simd.h), one long row is split over the threads;
//   - f32 rows compare 16 logits with the running threshold at once.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/philox_simd.h"
#include "kernels/cpu/selection.h"
#include "kernels/cpu/sort.h"
#include "kiln/sampling.h"

namespace kiln::eager::detail {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A row at least this long draws over the threads when rows do not fill them (the draws made in
// token order: no filter, or a cut that keeps most of the row).
constexpr int64_t kSplitRow = 32768;

// The first candidate list tried when top-p or min-p cut a row without top-k (then 16 times
// longer); a list longer than kLargestSelection is the whole row, radix-sorted (sort.h).
constexpr int64_t kFirstPrefix = 64;
constexpr int64_t kLargestSelection = 4096;

struct RowSettings {
  double temperature, top_p, min_p;
  int64_t top_k;
  uint64_t seed, step;
};

template <typename T>
inline double logit(const T* row, int64_t i) {
  if constexpr (is_half_like_v<T>) return double(to_float(row[i]));
  else return double(row[i]);
}

// The largest logit of the row (-inf when every token is masked); a NaN or +inf logit is an error
// naming the row and token.
template <typename T>
double checked_max(const T* row, int64_t n, int64_t b) {
  double m = -kInf;
  bool bad = false;
  if constexpr (std::is_same_v<T, float>) {
    float mf = -std::numeric_limits<float>::infinity();
    int flags = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float v = row[i];
      flags |= !(v < std::numeric_limits<float>::infinity());
      mf = v > mf ? v : mf;
    }
    m = mf, bad = flags != 0;
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const double v = logit(row, i);
      bad |= !(v < kInf);
      m = v > m ? v : m;
    }
  }
  if (bad)
    for (int64_t i = 0; i < n; ++i) {
      const double v = logit(row, i);
      KILN_CHECK(v < kInf, "sample: row ", b, ", token ", i, ": the logit is ", v,
                 " (only finite logits and -inf, a masked token, can be sampled from)");
    }
  return m;
}

// A float no larger than the real number bound (for filters: every logit below it is below bound).
inline float float_below(double bound) {
  const double lower = bound - std::abs(bound) * 1e-12 - 1e-300;
  float f = float(lower);
  if (double(f) > lower) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
  return f;
}

// Offers every unmasked token of the row to `sel` with the order key of s = logit / temperature.
template <typename T>
void offer_row(const T* row, int64_t n, double temperature, Selection& sel) {
  auto offer = [&](int64_t i) {
    const double l = logit(row, i);
    return l != -kInf && sel.offer(float_order(l / temperature), i);
  };
  int64_t i = 0;
  if constexpr (std::is_same_v<T, float>) {
    // Once there is a threshold, a chunk's lanes below its logit-space bound are not offered.
    bool filter = false;
    float bound = 0;
    auto update = [&] {
      filter = sel.has_threshold();
      if (filter) bound = float_below(value_of_order(sel.threshold()) * temperature);
    };
    for (; i + 16 <= n; i += 16) {
      unsigned mask = filter ? passing_lanes(row + i, bound, true) : 0xffffu;
      while (mask != 0) {
        const int lane = __builtin_ctz(mask);
        mask &= mask - 1;
        if (offer(i + lane)) update();
      }
    }
  }
  for (; i < n; ++i) offer(i);
}

// The running winner of a Gumbel-max draw: the best score, the lower token on ties.
struct Best {
  int64_t token = -1;
  double score = 0;
  void offer(int64_t t, double sc) {
    if (token < 0 || sc > score || (sc == score && t < token)) token = t, score = sc;
  }
};

// Gumbel-max over the given tokens (ties by the lower token).
template <typename T>
int64_t draw(const T* row, const std::vector<Candidate>& tokens, size_t count, const RowSettings& rs) {
  Best best;
  for (size_t j = 0; j < count; ++j) {
    const int64_t t = tokens[j].index;
    best.offer(t, logit(row, t) / rs.temperature + gumbel_of(sample_uniform(rs.seed, rs.step, uint64_t(t))));
  }
  return best.token;
}

// The random words of one row where blocks are partial: one Philox call per four tokens.
class RowStream {
 public:
  RowStream(uint64_t seed, uint64_t step) : seed_(seed), step_(step) {}
  // The 32-bit word behind sample_uniform(seed, step, token).
  uint32_t word(uint64_t token) {
    const uint64_t block = token >> 2;
    if (block != block_) {
      words_ = sample_block(seed_, step_, block);
      block_ = block;
    }
    return words_[token & 3];
  }

 private:
  uint64_t seed_, step_, block_ = ~uint64_t(0);
  PhiloxCounter words_{};
};

// No filter, tokens [lo, hi): every unmasked token may win, but most cannot beat the best score
// so far, B. Tokens go in blocks: with s_max the block's largest s, a token needs a Gumbel number
// above c = B - s_max, i.e. a uniform above gate = exp(-exp(-c)). A block whose c exceeds the
// largest Gumbel number is skipped without drawing; in the others a token whose uniform is at
// most the gate (computed with a margin, so rounding cannot skip a winner) takes no logarithm.
// The tokens a draw may pick: unmasked and, in order of s (ties by the lower token), not after the
// token `last` whose s is `s` (the default: every unmasked token).
struct Cut {
  double s = -kInf;
  int64_t last = std::numeric_limits<int64_t>::max();
  bool admits(double st, int64_t t) const { return st > s || (st == s && t <= last); }
};

template <typename T>
Best draw_unfiltered(const T* row, int64_t lo, int64_t hi, const RowSettings& rs, const Cut& cut) {
  constexpr int64_t kBlock = 64;  // tokens: sixteen Philox calls (philox_simd.h)
  RowStream stream(rs.seed, rs.step);
  Best best;
  uint32_t words[kBlock];
  for (int64_t b0 = lo, b1; b0 < hi; b0 = b1) {
    b1 = std::min(hi, (b0 / kBlock + 1) * kBlock);  // blocks aligned to the row, so a whole one has its 16 calls
    // Uniforms u = (w + 0.5) / 2^32 at most the gate cannot win: w <= gate * 2^32 - 0.5, exactly.
    int64_t skip_at_most = -1;
    if (best.token >= 0) {
      double block_max = -kInf;
      for (int64_t t = b0; t < b1; ++t) block_max = std::max(block_max, logit(row, t));
      if (block_max == -kInf) continue;
      const double c = best.score - block_max / rs.temperature - 1e-6 - 1e-12 * std::abs(best.score);
      if (c > kLargestGumbel) continue;
      skip_at_most = int64_t(std::floor(std::exp(-std::exp(-c)) * 0x1.0p32 - 0.5));
    }
    const bool whole = b1 - b0 == kBlock;
    if (whole) philox_16_blocks(uint64_t(b0) / 4, rs.step, rs.seed, words);
    for (int64_t t = b0; t < b1; ++t) {
      const double l = logit(row, t);
      if (l == -kInf) continue;
      const uint32_t w = whole ? words[t - b0] : stream.word(uint64_t(t));
      if (int64_t(w) <= skip_at_most) continue;
      const double st = l / rs.temperature;
      if (cut.admits(st, t)) best.offer(t, st + gumbel_of((double(w) + 0.5) * 0x1.0p-32));
    }
  }
  return best;
}

// The unfiltered draw of one long row on every thread (segments merged: the best score wins, the
// lower token on ties, as in one pass).
template <typename T>
int64_t draw_unfiltered_split(const T* row, int64_t n, const RowSettings& rs, const Cut& cut) {
  const int64_t segments = omp_get_max_threads();
  std::vector<Best> parts(static_cast<size_t>(segments));
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < segments; ++p)
    parts[size_t(p)] = draw_unfiltered(row, n * p / segments, n * (p + 1) / segments, rs, cut);
  Best best;
  for (const Best& b : parts)
    if (b.token >= 0) best.offer(b.token, b.score);
  return best.token;
}

// Every unmasked token of the row in order: the largest s first, ties by the lower token (a stable
// radix sort of the complemented order keys). Float logits sort by their own 32-bit keys: s =
// logit / temperature keeps their order (distinct floats differ by at least 2^-24 relative, far
// more than a double's rounding) while the temperature neither overflows nor underflows the
// quotient, so four passes do; doubles (and penalised rows) sort by s's 64-bit keys.
template <typename T>
std::vector<Candidate> sorted_row(const T* row, int64_t n, double temperature) {
  std::vector<uint32_t> tokens;
  tokens.reserve(size_t(n));
  if constexpr (!std::is_same_v<T, double>) {
    if (temperature >= kGreedyTemperature && temperature <= 1e6) {
      std::vector<uint32_t> keys;
      keys.reserve(size_t(n));
      for (int64_t t = 0; t < n; ++t) {
        const double l = logit(row, t);
        if (l == -kInf) continue;
        keys.push_back(~float_sort_key(float(l)));
        tokens.push_back(uint32_t(t));
      }
      radix_sort_keys(keys, tokens);
      std::vector<Candidate> list(tokens.size());
      for (size_t j = 0; j < tokens.size(); ++j) list[j] = {0, int64_t(tokens[j])};  // keys unused from here
      return list;
    }
  }
  std::vector<uint64_t> keys;
  keys.reserve(size_t(n));
  for (int64_t t = 0; t < n; ++t) {
    const double l = logit(row, t);
    if (l == -kInf) continue;
    keys.push_back(~float_order(l / temperature));
    tokens.push_back(uint32_t(t));
  }
  radix_sort_keys(keys, tokens);
  std::vector<Candidate> list(keys.size());
  for (size_t j = 0; j < keys.size(); ++j) list[j] = {~keys[j], int64_t(tokens[j])};
  return list;
}

// One row: the token, or an error naming the row.
template <typename T>
int64_t sample_row(const T* row, int64_t n, double max_logit, const RowSettings& rs, int64_t b, bool split) {
  if (rs.temperature < kGreedyTemperature) {
    KILN_CHECK(max_logit != -kInf, "sample: row ", b, " has no finite logit");
    for (int64_t i = 0; i < n; ++i)
      if (logit(row, i) == max_logit) return i;
  }
  KILN_CHECK(max_logit != -kInf, "sample: row ", b, " has no finite logit");
  if (rs.top_k == 0 && rs.top_p >= 1 && rs.min_p <= 0)
    return split ? draw_unfiltered_split(row, n, rs, Cut{}) : draw_unfiltered(row, 0, n, rs, Cut{}).token;

  const double top = max_logit / rs.temperature;
  auto weight = [&](int64_t t) { return std::exp(logit(row, t) / rs.temperature - top); };
  // Without top-k, top-p's mass is the whole row's, summed in token order like the reference.
  double row_mass = 0;
  if (rs.top_k == 0 && rs.top_p < 1)
    for (int64_t t = 0; t < n; ++t)
      if (logit(row, t) != -kInf) row_mass += weight(t);
  for (int64_t prefix = rs.top_k > 0 ? rs.top_k : kFirstPrefix;; prefix *= 16) {
    std::vector<Candidate> list;
    if (prefix > kLargestSelection) {  // most of the row: sort it
      list = sorted_row(row, n, rs.temperature);
      if (rs.top_k > 0 && int64_t(list.size()) > rs.top_k) list.resize(size_t(rs.top_k));
      prefix = n;
    } else {
      Selection sel(std::min(prefix, n), true);
      offer_row(row, n, rs.temperature, sel);
      list = sel.finish();
    }
    const size_t got = std::min(list.size(), size_t(std::min(prefix, n)));
    const bool whole = rs.top_k > 0 || int64_t(got) < prefix || int64_t(got) == n;  // every token the cuts may keep
    size_t keep = got;
    bool cut = false;  // a top-p or min-p cut fell inside the list
    if (rs.top_p < 1) {
      double mass = row_mass;
      if (rs.top_k > 0) {
        std::vector<int64_t> by_token;
        for (size_t j = 0; j < got; ++j) by_token.push_back(list[j].index);
        std::sort(by_token.begin(), by_token.end());
        mass = 0;
        for (int64_t t : by_token) mass += weight(t);
      }
      double running = 0;
      for (size_t j = 0; j < got; ++j) {
        running += weight(list[j].index);
        if (running >= rs.top_p * mass) {
          keep = j + 1, cut = true;
          break;
        }
      }
      // A flat row: the first 64 tokens hold under a quarter of the mass wanted, so sixteen times
      // as many will not do either; sort the row next.
      if (!cut && !whole && got == size_t(kFirstPrefix) && running < 0.25 * rs.top_p * mass) prefix = kLargestSelection;
    }
    if (rs.min_p > 0) {
      size_t m = 0;
      while (m < keep && weight(list[m].index) >= rs.min_p) ++m;
      if (m < got) cut = true;
      keep = m;
    }
    if (!whole && !cut) continue;
    if (keep <= size_t(kLargestSelection)) return draw(row, list, keep, rs);
    // Most of the row is kept: draw over it in token order, where Philox runs sixteen counters at
    // once and the gate skips the logarithms (a cut instead of a list).
    const Cut kept{logit(row, list[keep - 1].index) / rs.temperature, list[keep - 1].index};
    return split ? draw_unfiltered_split(row, n, rs, kept) : draw_unfiltered(row, 0, n, rs, kept).token;
  }
}

template <typename T>
void sample_rows(const KernelArgs& a) {
  const HostTensor& logits = a.in[0];
  const int64_t rows = logits.shape()[0], vocab = logits.shape()[1];
  const T* x = logits.data<T>();
  int64_t* out = a.out[0].data<int64_t>();
  const SamplePenalties pen{a.attrs.get_float("repetition_penalty"), a.attrs.get_float("frequency_penalty"),
                      a.attrs.get_float("presence_penalty")};
  auto settings = [&](int64_t b) {
    RowSettings rs;
    rs.seed = uint64_t(a.in[1].data<int64_t>()[b]), rs.step = uint64_t(a.in[2].data<int64_t>()[b]);
    rs.temperature = a.in.size() > 3 ? double(a.in[3].data<float>()[b]) : a.attrs.get_float("temperature");
    rs.top_k = a.in.size() > 4 ? a.in[4].data<int64_t>()[b] : a.attrs.get_int("top_k");
    rs.top_p = a.in.size() > 5 ? double(a.in[5].data<float>()[b]) : a.attrs.get_float("top_p");
    rs.min_p = a.in.size() > 6 ? double(a.in[6].data<float>()[b]) : a.attrs.get_float("min_p");
    check_sample_settings(b, rs.temperature, rs.top_k, rs.top_p, rs.min_p);
    return rs;
  };
  parallel_ranges(rows, vocab * 4, [&](int64_t begin, int64_t end) {
    std::vector<double> penalized;
    // Rows ran on the caller's thread (one row, say): a long row's unfiltered draw uses the team.
    const bool split = vocab >= kSplitRow && omp_get_max_threads() > 1 && !omp_in_parallel();
    for (int64_t b = begin; b < end; ++b) {
      const RowSettings rs = settings(b);
      const T* row = x + b * vocab;
      double max_logit = checked_max(row, vocab, b);
      if (a.in.size() <= 7) {
        out[b] = sample_row(row, vocab, max_logit, rs, b, split);
        continue;
      }
      // Penalties: the row in double with the penalised tokens rewritten.
      const HostTensor& ids = a.in[7];
      penalized.resize(size_t(vocab));
      for (int64_t t = 0; t < vocab; ++t) penalized[size_t(t)] = logit(row, t);
      apply_sample_penalties(penalized.data(), vocab, ids.data<int64_t>() + b * ids.shape()[1], ids.shape()[1], pen, b);
      max_logit = checked_max(penalized.data(), vocab, b);
      out[b] = sample_row(penalized.data(), vocab, max_logit, rs, b, split);
    }
  });
}

Ran run_sample(const KernelArgs& a) {
  if (a.in[0].shape()[1] == 0) {
    KILN_CHECK(a.in[0].shape()[0] == 0, "sample: the vocabulary is empty");
    return Ran::kNative;
  }
  switch (a.in[0].dtype()) {
    case DType::F32: sample_rows<float>(a); break;
    case DType::F64: sample_rows<double>(a); break;
    case DType::F16: sample_rows<Half>(a); break;
    case DType::BF16: sample_rows<BFloat16>(a); break;
    default: return Ran::kNotHandled;
  }
  return Ran::kNative;
}

bool sample_supports(Op op, DType dtype) {
  return op == Op::Sample && (dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 || dtype == DType::BF16);
}

}  // namespace

const KernelFamily kSampleFamily{sample_supports, run_sample};

}  // namespace kiln::eager::detail
