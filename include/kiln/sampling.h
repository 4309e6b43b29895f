// The numbers the `sample` op draws and the constants of its semantics (docs/sampling.md). Why: the
// interpreter, the CPU kernel and a GPU kernel must pick the same token for the same (seed, step),
// whatever else shares the batch; they all read these definitions.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>

#include "kiln/error.h"
#include "kiln/philox.h"

namespace kiln {

// The four words `sample` draws for tokens 4 * block .. 4 * block + 3 of a row with `seed` at
// `step`: Philox4x32-10 at counter (block, step) under key seed, 64-bit values low word first.
inline PhiloxCounter sample_block(uint64_t seed, uint64_t step, uint64_t block) {
  return philox4x32_10({uint32_t(block), uint32_t(block >> 32), uint32_t(step), uint32_t(step >> 32)},
                       {uint32_t(seed), uint32_t(seed >> 32)});
}

// The uniform in (0, 1) that `sample` draws for `token`: its word w of sample_block, as
// (w + 0.5) / 2^32.
inline double sample_uniform(uint64_t seed, uint64_t step, uint64_t token) {
  return (double(sample_block(seed, step, token >> 2)[token & 3]) + 0.5) * 0x1.0p-32;
}

// A standard Gumbel variate from a uniform in (0, 1): token argmax(s + g) is a draw from softmax(s).
inline double gumbel_of(double u) { return -std::log(-std::log(u)); }

// An upper bound of gumbel_of over sample_uniform's values (u <= 1 - 2^-33 gives at most 22.874): a
// token whose scaled logit plus this is below the best score so far cannot win the draw, so
// kernels may skip its logarithms.
inline constexpr double kLargestGumbel = 22.875;

// Temperatures below this sample greedily (the largest logit), as vLLM does: dividing by a smaller
// one only overflows.
inline constexpr double kGreedyTemperature = 1e-5;

// A row's settings, checked when the row is sampled (per-row operands arrive only then); the
// errors name the row.
inline void check_sample_settings(int64_t row, double temperature, int64_t top_k, double top_p, double min_p) {
  KILN_CHECK(temperature >= 0 && !std::isinf(temperature), "sample: row ", row, ": temperature must be finite and >= 0, got ", temperature);
  KILN_CHECK(top_k >= 0, "sample: row ", row, ": top_k must be >= 0, got ", top_k);
  KILN_CHECK(top_p > 0 && top_p <= 1, "sample: row ", row, ": top_p must be in (0, 1], got ", top_p);
  KILN_CHECK(min_p >= 0 && min_p <= 1, "sample: row ", row, ": min_p must be in [0, 1], got ", min_p);
}

struct SamplePenalties {
  double repetition = 1, frequency = 0, presence = 0;
};

// Applies the penalties to one row of logits in double, in place: for each distinct token t of
// ids[0, len) (negative ids are padding, an id >= vocab is an error), with c its count,
// repetition divides a positive logit and multiplies a negative one, then frequency * c + presence
// is subtracted. A penalty that makes a logit NaN or +inf is an error naming the row and token.
inline void apply_sample_penalties(double* logits, int64_t vocab, const int64_t* ids, int64_t len,
                                   const SamplePenalties& pen, int64_t row) {
  std::map<int64_t, int64_t> count;
  for (int64_t j = 0; j < len; ++j) {
    KILN_CHECK(ids[j] < vocab, "sample: row ", row, ": penalty_ids[", j, "] = ", ids[j], " is not below the vocabulary size ", vocab);
    if (ids[j] >= 0) ++count[ids[j]];
  }
  for (auto [t, c] : count) {
    double& v = logits[t];
    if (pen.repetition != 1) v = v > 0 ? v / pen.repetition : v * pen.repetition;
    v -= pen.frequency * double(c) + pen.presence;
    KILN_CHECK(!std::isnan(v) && v != INFINITY, "sample: row ", row, ", token ", t, ": the penalties made the logit ", v);
  }
}

}  // namespace kiln
