// DType names, sizes and the round-to-nearest-even conversions for f16 and bf16.
#include "kiln/dtype.h"

#include <cmath>

#include "kiln/error.h"

namespace kiln {

std::string_view dtype_name(DType t) {
  switch (t) {
#define KILN_X(e, s, n, f, si) \
  case DType::e: return s;
    KILN_DTYPES(KILN_X)
#undef KILN_X
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
#define KILN_X(e, str, n, f, si) \
  if (s == str) return DType::e;
  KILN_DTYPES(KILN_X)
#undef KILN_X
  return std::nullopt;
}

int dtype_size(DType t) {
  switch (t) {
#define KILN_X(e, s, n, f, si) \
  case DType::e: return n;
    KILN_DTYPES(KILN_X)
#undef KILN_X
  }
  return 0;
}

bool is_float(DType t) {
  switch (t) {
#define KILN_X(e, s, n, f, si) \
  case DType::e: return f;
    KILN_DTYPES(KILN_X)
#undef KILN_X
  }
  return false;
}

bool is_signed_int(DType t) {
  switch (t) {
#define KILN_X(e, s, n, f, si) \
  case DType::e: return si;
    KILN_DTYPES(KILN_X)
#undef KILN_X
  }
  return false;
}

bool is_narrow_float(DType t) {
  switch (t) {
    case DType::F8E4M3FN: case DType::F8E4M3FNUZ: case DType::F8E5M2: case DType::F8E5M2FNUZ:
    case DType::F4E2M1: case DType::F8E8M0: return true;
    default: return false;
  }
}

void throw_string_has_no_numeric_type() {
  throw Error("this operation has no string (str) version: string tensors support equal and data "
              "movement only");
}

bool is_narrow(DType t) { return is_narrow_float(t) || t == DType::I4 || t == DType::U4; }

uint16_t f32_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;  // round to nearest even; overflow carries into inf correctly
  return uint16_t(u >> 16);
}

uint16_t f32_to_f16_bits(float f) { return f64_to_f16_bits(double(f)); }

float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: value = man * 2^-24, exact in f32
      float v = std::ldexp(float(man), -24);
      std::memcpy(&u, &v, 4);
      u |= sign;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 112) << 23) | (man << 13);
  }
  float out;
  std::memcpy(&out, &u, 4);
  return out;
}

// Rounds |d| to a multiple of 2^q with ties to even, where q is the quantum of the target format
// at d's magnitude. Works for normal and subnormal targets alike.
static double round_to_quantum(double a, int q) {
  double scaled = std::ldexp(a, -q);
  double r = std::nearbyint(scaled);  // default rounding mode: nearest-even
  return std::ldexp(r, q);
}

// Generic narrow-float encoder: man_bits explicit mantissa bits, exp_bits exponent bits.
static uint16_t encode_narrow(double d, int man_bits, int exp_bits) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const uint16_t sign = std::signbit(d) ? uint16_t(1u << (man_bits + exp_bits)) : 0;
  const uint16_t inf = uint16_t(((1u << exp_bits) - 1) << man_bits);
  if (std::isnan(d)) return uint16_t(sign | inf | (1u << (man_bits - 1)));
  double a = std::fabs(d);
  if (std::isinf(a)) return uint16_t(sign | inf);
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int unbiased = e - 1;
  const int emin = 1 - bias;
  int q = (unbiased < emin ? emin : unbiased) - man_bits;
  double r = round_to_quantum(a, q);
  if (r == 0) return sign;  // underflow: rounds to a signed zero
  std::frexp(r, &e);
  unbiased = e - 1;
  if (unbiased > bias) return uint16_t(sign | inf);  // overflow to infinity
  if (unbiased < emin) {                             // subnormal (or rounded to zero)
    uint32_t man = uint32_t(std::ldexp(r, -(emin - man_bits)));
    return uint16_t(sign | man);
  }
  // Recompute the quantum: rounding up may have carried into the next binade (1.9995 -> 2.0).
  uint32_t man = uint32_t(std::ldexp(r, -(unbiased - man_bits))) - (1u << man_bits);
  return uint16_t(sign | (uint32_t(unbiased + bias) << man_bits) | man);
}

uint16_t f64_to_f16_bits(double d) { return encode_narrow(d, 10, 5); }
uint16_t f64_to_bf16_bits(double d) { return encode_narrow(d, 7, 8); }

}  // namespace kiln
