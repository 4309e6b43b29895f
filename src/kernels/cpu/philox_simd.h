// Philox4x32-10 for many consecutive counters at once (AVX2 where the CPU has it). Why: sampling
// without a filter draws a number for every token of a 256000-token row, and one scalar Philox call
// (ten dependent rounds of 32x32-bit multiplies) per four tokens dominated it.
#pragma once

#include <cstdint>

namespace kiln::eager::detail {

// The words of Philox4x32-10 at counters (block, step) for blocks first_block .. first_block + 15
// under key seed: words[4 * i + j] is word j of block first_block + i, i.e. the number of token
// 4 * (first_block + i) + j in sample_uniform's layout (kiln/sampling.h). Identical to calling
// philox4x32_10 sixteen times.
void philox_16_blocks(uint64_t first_block, uint64_t step, uint64_t seed, uint32_t words[64]);

}  // namespace kiln::eager::detail
