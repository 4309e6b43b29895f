// Reference kernels for sort, argsort and sample (docs/sampling.md). Plain loops in double, written
// to be checked by reading: sample sorts the whole row, sums in index order and draws every token's
// Gumbel number, where the CPU kernel (src/kernels/cpu/sample.cc) selects and skips.
#include <algorithm>
#include <cmath>
#include <vector>

#include "interp/ref_kernels.h"
#include "kiln/error.h"
#include "kiln/sampling.h"

namespace kiln::interp {

namespace {

void sort_lines(const KernelArgs& a, HostTensor* values, HostTensor& indices) {
  const HostTensor& x = a.in[0];
  const int axis = normalize_axis(a.attrs.get_int("axis"), x.rank());
  const bool descending = a.attrs.get_int("descending") != 0;
  int64_t outer, dim, inner;
  split_at_axis(x.shape(), axis, outer, dim, inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * dim * inner + i;
      const std::vector<int64_t> order = sorted_positions(x, base, inner, dim, descending);
      for (int64_t s = 0; s < dim; ++s) {
        if (values) copy_element(x, base + order[size_t(s)] * inner, *values, base + s * inner);
        indices.set_i64(base + s * inner, order[size_t(s)]);
      }
    }
}

}  // namespace

void ref_Sort(const KernelArgs& a) { sort_lines(a, &a.out[0], a.out[1]); }
void ref_ArgSort(const KernelArgs& a) { sort_lines(a, nullptr, a.out[0]); }

void ref_Sample(const KernelArgs& a) {
  const HostTensor& logits = a.in[0];
  const int64_t rows = logits.shape()[0], vocab = logits.shape()[1];
  auto row_float = [&](size_t operand, int64_t b, const char* attr) {
    return a.in.size() > operand ? a.in[operand].get_f64(b) : a.attrs.get_float(attr);
  };
  for (int64_t b = 0; b < rows; ++b) {
    const uint64_t seed = uint64_t(a.in[1].get_i64(b)), step = uint64_t(a.in[2].get_i64(b));
    const double temperature = row_float(3, b, "temperature");
    const int64_t top_k = a.in.size() > 4 ? a.in[4].get_i64(b) : a.attrs.get_int("top_k");
    const double top_p = row_float(5, b, "top_p"), min_p = row_float(6, b, "min_p");
    check_sample_settings(b, temperature, top_k, top_p, min_p);

    std::vector<double> l(static_cast<size_t>(vocab));
    for (int64_t t = 0; t < vocab; ++t) {
      l[size_t(t)] = logits.get_f64(b * vocab + t);
      KILN_CHECK(!std::isnan(l[size_t(t)]) && l[size_t(t)] != INFINITY, "sample: row ", b, ", token ", t, ": the logit is ",
                 l[size_t(t)], " (only finite logits and -inf, a masked token, can be sampled from)");
    }
    if (a.in.size() > 7) {
      const HostTensor& ids = a.in[7];
      const int64_t len = ids.shape()[1];
      std::vector<int64_t> row_ids(static_cast<size_t>(len));
      for (int64_t j = 0; j < len; ++j) row_ids[size_t(j)] = ids.get_i64(b * len + j);
      apply_sample_penalties(l.data(), vocab, row_ids.data(), len,
                             {a.attrs.get_float("repetition_penalty"), a.attrs.get_float("frequency_penalty"),
                              a.attrs.get_float("presence_penalty")},
                             b);
    }
    // Greedy: the largest logit, the lower token on ties.
    if (temperature < kGreedyTemperature) {
      int64_t best = -1;
      for (int64_t t = 0; t < vocab; ++t)
        if (l[size_t(t)] != -INFINITY && (best < 0 || l[size_t(t)] > l[size_t(best)])) best = t;
      KILN_CHECK(best >= 0, "sample: row ", b, " has no finite logit");
      a.out[0].set_i64(b, best);
      continue;
    }
    std::vector<double> s(static_cast<size_t>(vocab));
    std::vector<int64_t> order;  // the unmasked tokens, largest scaled logit first, ties by lower token
    for (int64_t t = 0; t < vocab; ++t) {
      s[size_t(t)] = l[size_t(t)] / temperature;
      if (l[size_t(t)] != -INFINITY) order.push_back(t);
    }
    KILN_CHECK(!order.empty(), "sample: row ", b, " has no finite logit");
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[size_t(x)] > s[size_t(y)]; });
    const double top = s[size_t(order[0])];
    int64_t keep = top_k > 0 ? std::min<int64_t>(top_k, int64_t(order.size())) : int64_t(order.size());
    if (top_p < 1) {  // the shortest prefix whose mass reaches top_p of the top-k set's
      std::vector<int64_t> by_token(order.begin(), order.begin() + keep);
      std::sort(by_token.begin(), by_token.end());
      double mass = 0;
      for (int64_t t : by_token) mass += std::exp(s[size_t(t)] - top);
      double running = 0;
      for (int64_t j = 0; j < keep; ++j) {
        running += std::exp(s[size_t(order[size_t(j)])] - top);
        if (running >= top_p * mass) {
          keep = j + 1;
          break;
        }
      }
    }
    if (min_p > 0) {  // tokens at least min_p times as likely as the most likely one
      int64_t n = 0;
      while (n < keep && std::exp(s[size_t(order[size_t(n)])] - top) >= min_p) ++n;
      keep = n;
    }
    // Gumbel-max over the kept tokens: each token's draw depends on (seed, step, token) only.
    int64_t best = -1;
    double best_score = 0;
    for (int64_t j = 0; j < keep; ++j) {
      const int64_t t = order[size_t(j)];
      const double score = s[size_t(t)] + gumbel_of(sample_uniform(seed, step, uint64_t(t)));
      if (best < 0 || score > best_score || (score == best_score && t < best)) best = t, best_score = score;
    }
    a.out[0].set_i64(b, best);
  }
}

}  // namespace kiln::interp
