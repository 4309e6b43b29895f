// The 8- and 4-bit float formats of ONNX (OCP FP8 E4M3/E5M2, their FNUZ variants, MX FP4 E2M1 and
// the E8M0 scale type), decoded and encoded exactly from their definitions. Why: the interpreter is
// the oracle, so this is written with frexp/ldexp on doubles, independently of the bit-twiddling
// helpers the C prelude uses for compiled kernels; the unit tests hold the two against each other.
#include <cmath>
#include <limits>

#include "kiln/dtype.h"

namespace kiln {

namespace {

// One sign bit, exp_bits exponent bits with the given bias, man_bits mantissa bits.
struct Format {
  int exp_bits, man_bits, bias;
  bool ieee_specials;  // e5m2: an all-ones exponent holds inf/NaN
  bool fn;             // e4m3fn: only S.1111.111 is NaN, no inf
  bool fnuz;           // 0x80 is the single NaN; no -0, no inf
  bool saturates;      // f4e2m1: no NaN or inf, overflow clamps to the largest value
};

Format format_of(DType t) {
  switch (t) {
    case DType::F8E4M3FN: return {4, 3, 7, false, true, false, false};
    case DType::F8E4M3FNUZ: return {4, 3, 8, false, false, true, false};
    case DType::F8E5M2: return {5, 2, 15, true, false, false, false};
    case DType::F8E5M2FNUZ: return {5, 2, 16, false, false, true, false};
    case DType::F4E2M1: return {2, 1, 1, false, false, false, true};
    default: break;
  }
  return {0, 0, 0, false, false, false, false};
}

int sign_bit(const Format& f) { return 1 << (f.exp_bits + f.man_bits); }

// Largest finite magnitude: the top exponent field unless it is reserved (IEEE), with the top
// mantissa unless that is the NaN code (fn).
double max_of(const Format& f) {
  int top_field = (1 << f.exp_bits) - 1 - (f.ieee_specials ? 1 : 0);
  int top_man = (1 << f.man_bits) - 1 - (f.fn ? 1 : 0);
  return std::ldexp(1.0 + double(top_man) / double(1 << f.man_bits), top_field - f.bias);
}

uint8_t nan_code(const Format& f, bool negative) {
  if (f.fnuz) return 0x80;
  if (f.saturates) return 0;
  int all = sign_bit(f) - 1;  // exponent and mantissa all ones
  if (f.ieee_specials) all -= (1 << (f.man_bits - 1)) - 1;  // quiet NaN: top mantissa bit only
  return uint8_t(all | (negative ? sign_bit(f) : 0));
}

uint8_t overflow_code(const Format& f, bool negative) {
  int sign = negative ? sign_bit(f) : 0;
  if (f.ieee_specials) return uint8_t(sign | (((1 << f.exp_bits) - 1) << f.man_bits));  // inf
  if (f.saturates) return uint8_t(sign | (sign_bit(f) - 1));
  return nan_code(f, negative);
}

uint8_t encode(const Format& f, double x) {
  bool negative = std::signbit(x);
  if (std::isnan(x)) return nan_code(f, negative);
  double a = std::fabs(x);
  if (std::isinf(a) || a > max_of(f) * 2) return overflow_code(f, negative);
  const int emin = 1 - f.bias;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int quantum = std::max(e - 1, emin) - f.man_bits;
  double count = std::nearbyint(std::ldexp(a, -quantum));  // ties to even (default mode)
  double value = std::ldexp(count, quantum);
  if (value > max_of(f)) return overflow_code(f, negative);
  int sign = negative ? sign_bit(f) : 0;
  if (value == 0) return uint8_t(f.fnuz ? 0 : sign);  // FNUZ: no -0
  int field, man;
  if (value < std::ldexp(1.0, emin)) {
    field = 0;
    man = int(std::ldexp(value, f.man_bits - emin));
  } else {
    std::frexp(value, &e);
    field = e - 1 + f.bias;
    man = int(std::ldexp(value, f.man_bits - (e - 1))) - (1 << f.man_bits);
  }
  return uint8_t(sign | (field << f.man_bits) | man);
}

double decode(const Format& f, uint8_t code) {
  int mask = (sign_bit(f) << 1) - 1;
  code = uint8_t(code & mask);
  bool negative = (code & sign_bit(f)) != 0;
  int field = (code >> f.man_bits) & ((1 << f.exp_bits) - 1), man = code & ((1 << f.man_bits) - 1);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (f.fnuz && code == 0x80) return nan;
  if (f.fn && field == (1 << f.exp_bits) - 1 && man == (1 << f.man_bits) - 1) return negative ? -nan : nan;
  if (f.ieee_specials && field == (1 << f.exp_bits) - 1) {
    if (man != 0) return negative ? -nan : nan;
    return negative ? -HUGE_VAL : HUGE_VAL;
  }
  double mag = field == 0 ? std::ldexp(double(man), 1 - f.bias - f.man_bits)
                          : std::ldexp(1.0 + double(man) / double(1 << f.man_bits), field - f.bias);
  return negative ? -mag : mag;
}

// f8e8m0: the smallest power of two 2^k >= |x|, k in [-127, 127]; code k + 127; 0xff is NaN.
uint8_t encode_e8m0(double x) {
  double a = std::fabs(x);
  if (std::isnan(a) || std::isinf(a)) return 0xff;
  if (a == 0) return 0;
  int e;
  double m = std::frexp(a, &e);
  int k = m == 0.5 ? e - 1 : e;
  if (k < -127) k = -127;
  if (k > 127) return 0xff;
  return uint8_t(k + 127);
}

}  // namespace

uint8_t f32_to_narrow_bits(DType t, float f) {
  if (t == DType::F8E8M0) return encode_e8m0(double(f));
  return encode(format_of(t), double(f));
}

float narrow_bits_to_f32(DType t, uint8_t code) {
  if (t == DType::F8E8M0) {
    if (code == 0xff) return std::numeric_limits<float>::quiet_NaN();
    return float(std::ldexp(1.0, int(code) - 127));  // 2^-127 is an f32 subnormal: exact
  }
  return float(decode(format_of(t), code));
}

double narrow_float_max(DType t) {
  if (t == DType::F8E8M0) return std::ldexp(1.0, 127);
  return max_of(format_of(t));
}

}  // namespace kiln
