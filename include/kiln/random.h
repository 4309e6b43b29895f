// Counter-based random numbers: element i of a random tensor depends only on (seed, i). Why: the
// interpreter, eager kernels and generated code then produce bit-identical random tensors in any
// order and on any number of threads.
#pragma once

#include <cmath>
#include <cstdint>

namespace kiln {

inline uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline uint64_t random_bits(uint64_t seed, uint64_t index) {
  return mix64(mix64(seed) ^ (index * 0xd1b54a32d192ed03ull));
}
// Uniform in [0, 1) with 53 random bits.
inline double random_uniform01(uint64_t seed, uint64_t index) {
  return double(random_bits(seed, index) >> 11) * 0x1.0p-53;
}
// Standard normal by Box-Muller over two uniform draws.
inline double random_normal01(uint64_t seed, uint64_t index) {
  double u1 = 1.0 - random_uniform01(seed, 2 * index);  // (0, 1]
  double u2 = random_uniform01(seed, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace kiln
