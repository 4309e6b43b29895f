// The numbers the `sample` op draws and the constants of its semantics (docs/sampling.md). Why: the
// interpreter, the CPU kernel and a GPU kernel must pick the same token for the same (seed, step),
// whatever else shares the batch; they all read these definitions.
#pragma once

#include <cmath>
#include <cstdint>

#include "kiln/philox.h"

namespace kiln {

// The uniform in (0, 1) that `sample` draws for `token` of a row with `seed` at `step`: word
// token % 4 of Philox4x32-10 at counter (token / 4, step) under key seed, as (w + 0.5) / 2^32.
inline double sample_uniform(uint64_t seed, uint64_t step, uint64_t token) {
  const uint64_t block = token >> 2;
  const PhiloxCounter out = philox4x32_10({uint32_t(block), uint32_t(block >> 32), uint32_t(step), uint32_t(step >> 32)},
                                          {uint32_t(seed), uint32_t(seed >> 32)});
  return (double(out[token & 3]) + 0.5) * 0x1.0p-32;
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

}  // namespace kiln
