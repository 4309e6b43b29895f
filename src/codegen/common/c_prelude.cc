// The helper prelude of generated C++: conversions and the few scalar operations whose reference
// semantics (NaN propagation, wrapping, saturation, Python-style remainder) need more than an
// operator. Why: keeping them as small inline functions makes the emitted kernels readable.
#include "codegen/common/c_emitter.h"

namespace kiln::codegen {

// Integer division, remainder and power with the reference kernels' semantics (a zero divisor sets
// *status; INT_MIN / -1 wraps), shared word for word by the CUDA prelude.
std::string c_integer_helpers(const std::string& qualifier) {
  std::string text = R"KILN(template <typename T> KILN_QUALIFIER T kiln_idiv(T x, T y, int* status) {
  if (y == T(0)) { *status = 1; return T(0); }
  if (int64_t(y) == -1) return T(uint64_t(0) - uint64_t(x));
  return T(int64_t(x) / int64_t(y));
}
template <typename T> KILN_QUALIFIER T kiln_imod(T x, T y, bool c_fmod, int* status) {
  if (y == T(0)) { *status = 1; return T(0); }
  if (int64_t(y) == -1) return T(0);
  int64_t r = int64_t(x) % int64_t(y);
  if (!c_fmod && r != 0 && ((r < 0) != (int64_t(y) < 0))) r += int64_t(y);
  return T(r);
}
template <typename T> KILN_QUALIFIER T kiln_ipow(T base_in, T exp_in, int* status) {
  int64_t base = int64_t(base_in), e = int64_t(exp_in);
  if (e < 0) {
    if (base == 0) { *status = 1; return T(0); }
    if (base == 1) return T(1);
    if (base == -1) return T(e % 2 == 0 ? 1 : -1);
    return T(0);
  }
  uint64_t result = 1, power = uint64_t(base);
  for (uint64_t k = uint64_t(e); k != 0; k >>= 1) {
    if (k & 1) result *= power;
    power *= power;
  }
  return T(result);
}
// uint64 values above 2^63 do not fit int64: divide and take remainders unsigned.
template <> KILN_QUALIFIER uint64_t kiln_idiv<uint64_t>(uint64_t x, uint64_t y, int* status) {
  if (y == 0u) { *status = 1; return 0u; }
  return x / y;
}
template <> KILN_QUALIFIER uint64_t kiln_imod<uint64_t>(uint64_t x, uint64_t y, bool c_fmod, int* status) {
  (void)c_fmod;  // no negative operands: both conventions agree
  if (y == 0u) { *status = 1; return 0u; }
  return x % y;
}
KILN_QUALIFIER int64_t kiln_imax(int64_t a, int64_t b) { return a > b ? a : b; }
// Index floordiv and mod (the IR's // and %, rounding toward -inf) for dividends that can be
// negative (a slice with a negative step read through a reshape); C's / and % truncate.
KILN_QUALIFIER int64_t kiln_index_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
KILN_QUALIFIER int64_t kiln_index_mod(int64_t a, int64_t b) { return a - kiln_index_div(a, b) * b; }
KILN_QUALIFIER int64_t kiln_wrap4(int64_t v, bool is_signed) {  // i4/u4: the low nibble
  int64_t n = v & 15;
  return is_signed ? (n ^ 8) - 8 : n;
}
)KILN";
  const std::string marker = "KILN_QUALIFIER";
  for (size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + qualifier.size()))
    text.replace(at, marker.size(), qualifier);
  return text;
}

// The 8- and 4-bit floats by bit arithmetic alone (no libm, no std::), so that the CPU and CUDA
// preludes share the text; kiln_f32_bits/kiln_bits_f32 are each target's bit casts. kind: 0
// e4m3fn, 1 e4m3fnuz, 2 e5m2, 3 e5m2fnuz, 4 e2m1 (see f32_to_narrow_bits in include/kiln/dtype.h).
std::string c_narrow_float_helpers(const std::string& qualifier) {
  std::string text = R"KILN(KILN_QUALIFIER uint8_t kiln_f32_to_narrow(float f, int kind) {
  const int man = kind == 2 || kind == 3 ? 2 : (kind == 4 ? 1 : 3);
  const int bias = kind == 0 ? 7 : kind == 1 ? 8 : kind == 2 ? 15 : kind == 3 ? 16 : 1;
  const uint32_t max_mag = kind == 0 ? 0x7eu : kind == 2 ? 0x7bu : kind == 4 ? 0x7u : 0x7fu;
  const bool fnuz = kind == 1 || kind == 3;
  uint32_t x = kiln_f32_bits(f), a = x & 0x7fffffffu;
  uint32_t sign = (x >> 31) ? (kind == 4 ? 0x8u : 0x80u) : 0u;
  if (a > 0x7f800000u) return uint8_t(fnuz ? 0x80u : kind == 4 ? 0u : (sign | (kind == 2 ? 0x7eu : 0x7fu)));
  uint32_t mag = 0u;  // |code|: (exponent field - 1) << man plus the rounded significand
  if (a == 0x7f800000u) {
    mag = max_mag + 1u;
  } else if ((a >> 23) != 0u) {  // f32 subnormals are far below half the smallest code
    const int e = int(a >> 23) - 127, emin = 1 - bias, te = e > emin ? e : emin;
    const int shift = te - man - e + 23;  // significand bits below the target's quantum
    const uint32_t sig = (a & 0x7fffffu) | 0x800000u;
    uint32_t q = 0u;
    if (shift <= 25) {
      const uint32_t rest = sig & ((1u << shift) - 1u), half = 1u << (shift - 1);
      q = sig >> shift;
      if (rest > half || (rest == half && (q & 1u))) ++q;  // ties to even
    }
    mag = (uint32_t(te - emin) << man) + q;
  }
  if (mag > max_mag) return uint8_t(kind == 2 ? (sign | 0x7cu) : kind == 4 ? (sign | 0x7u) : fnuz ? 0x80u : (sign | 0x7fu));
  if (mag == 0u && fnuz) return 0u;
  return uint8_t(sign | mag);
}
KILN_QUALIFIER float kiln_narrow_to_f32(uint8_t c, int kind) {
  const int man = kind == 2 || kind == 3 ? 2 : (kind == 4 ? 1 : 3);
  const int bias = kind == 0 ? 7 : kind == 1 ? 8 : kind == 2 ? 15 : kind == 3 ? 16 : 1;
  const uint32_t sign_bit = kind == 4 ? 0x8u : 0x80u, code = c & (sign_bit * 2u - 1u), mag = code & (sign_bit - 1u);
  const uint32_t sign = (code & sign_bit) ? 0x80000000u : 0u;
  if ((kind == 1 || kind == 3) && code == 0x80u) return kiln_bits_f32(0x7fc00000u);
  if (kind == 0 && mag == 0x7fu) return kiln_bits_f32(sign | 0x7fc00000u);
  if (kind == 2 && mag >= 0x7cu) return kiln_bits_f32(sign | (mag == 0x7cu ? 0x7f800000u : 0x7fc00000u));
  const uint32_t field = mag >> man, m = mag & ((1u << man) - 1u);
  const uint32_t sig = field ? (1u << man) + m : m;
  const int exp2 = int(field ? field : 1u) - bias - man;  // -17..13: a normal power of two
  const float v = float(sig) * kiln_bits_f32(uint32_t(exp2 + 127) << 23);
  return kiln_bits_f32(kiln_f32_bits(v) | sign);
}
KILN_QUALIFIER float kiln_e8m0_to_f32(uint8_t c) {  // 2^(c - 127); 0xff is NaN
  if (c == 0xffu) return kiln_bits_f32(0x7fc00000u);
  return kiln_bits_f32(c == 0u ? 0x400000u : uint32_t(c) << 23);
}
KILN_QUALIFIER uint8_t kiln_f32_to_e8m0(float f) {  // |f| up to a power of two; above 2^127: NaN
  const uint32_t a = kiln_f32_bits(f) & 0x7fffffffu;
  if (a >= 0x7f800000u) return 0xffu;
  const uint32_t e = a >> 23;
  if (e == 0u) return a > 0x400000u ? 1u : 0u;  // subnormal: up to 2^-127 or 2^-126
  const uint32_t c = e + ((a & 0x7fffffu) != 0u ? 1u : 0u);
  return c > 254u ? 0xffu : uint8_t(c);
}
)KILN";
  const std::string marker = "KILN_QUALIFIER";
  for (size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + qualifier.size()))
    text.replace(at, marker.size(), qualifier);
  return text;
}

std::string c_prelude() {
  return std::string(R"KILN(// Generated by Kiln (src/codegen). Do not edit: regenerate from the graph.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <omp.h>

namespace {

inline float kiln_h2f(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    float f = float(mant) * 5.9604644775390625e-08f;  // subnormal: mant * 2^-24
    return sign ? -f : f;
  }
  if (exp == 31) bits = sign | 0x7f800000u | (mant << 13);
  else bits = sign | ((exp + 112u) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t kiln_f2h(float f) {  // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return uint16_t(sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);
  if (a < 0x38800000u) return uint16_t(sign | uint32_t(std::nearbyint(std::fabs(f) * 16777216.0f)));
  uint32_t h = (((a >> 23) - 112u) << 10) | ((a & 0x7fffffu) >> 13), rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return uint16_t(sign | h);
}
inline float kiln_b2f(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t kiln_f2b(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t(((x >> 16) & 0x8000u) | 0x7fc0u);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
// exp on float that GCC vectorises on baseline x86-64 (libm's expf is a scalar call): x = n*ln2 + r
// with |r| <= ln2/2 (Cody-Waite split of ln2), e^r by its degree-7 Taylor polynomial (truncation
// < 0.05 ulp), then scaled by 2^n as two exact power-of-two factors so that results in the
// denormal range are rounded once. No float->int conversion: n comes from the bits of a
// round-to-nearest magic-number sum, so NaN/inf inputs are well defined (NaN stays NaN, -inf -> 0,
// +inf -> inf). Accurate to a few ulp (tests/unit/compile/vector_exp_test.cc).
inline float kiln_exp(float x) {
  float xc = x < -104.0f ? -104.0f : x;  // below: 0 after rounding; above: inf
  xc = xc > 89.0f ? 89.0f : xc;
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer in the low bits
  float t = xc * 1.44269504088896341f + magic;
  float n = t - magic;
  int32_t tb;
  std::memcpy(&tb, &t, 4);
  int32_t ni = tb - 0x4b400000;  // n as an integer, from the bits of the magic sum
  float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666672f + r * (0.0416666679f +
            r * (0.00833333377f + r * (0.00138888892f + r * 0.000198412701f))))));
  int32_t h = ni >> 1;
  // 2^h and 2^(n-h), both normal; shifted unsigned, as a NaN x (whose result is x) gives an n whose
  // exponent bits a signed shift could not hold.
  uint32_t b1 = uint32_t(h + 127) << 23, b2 = uint32_t(ni - h + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, 4);
  std::memcpy(&s2, &b2, 4);
  float y = p * s1 * s2;
  return x == x ? y : x;
}
inline double kiln_exp(double x) { return std::exp(x); }  // f64 keeps libm
template <typename T> inline T kiln_exp(T x) { return T(std::exp(double(x))); }
// gelu on float without libm's scalar erf, so the matmul epilogue vectorises. 1 + erf(z) is
// 2 - erfc(z) for z >= 0 and erfc(-z) for z < 0; erfc(z >= 0) = t*exp(-z^2 + P(t)),
// t = 1/(1 + z/2), with the classic Chebyshev fit P whose erfc has relative error < 1.2e-7. Using
// erfc on the negative side keeps the relative error small where gelu(x) is tiny.
inline float kiln_gelu(float x) {
  float z = x * 0.707106781186547524f;
  float a = z < 0.0f ? -z : z;
  float t = 1.0f / (1.0f + 0.5f * a);
  float p = -1.26551223f + t * (1.00002368f + t * (0.37409196f + t * (0.09678418f + t * (-0.18628806f +
            t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f))))))));
  float erfc = t * kiln_exp(p - a * a);
  float one_plus_erf = z < 0.0f ? erfc : 2.0f - erfc;
  return 0.5f * x * one_plus_erf;
}
// erf on float, vectorisable: |x| < 0.5 by its Taylor series through x^13 (error < 2e-8 relative),
// else sign(x) * (1 - erfc(|x|)) with the same erfc fit as kiln_gelu (absolute error < 7e-8 there,
// where |erf| > 0.52). NaN stays NaN, +-inf -> +-1.
inline float kiln_erf(float x) {
  float a = x < 0.0f ? -x : x, z = x * x;
  float small = x * (1.12837917f + z * (-0.376126389f + z * (0.112837917f + z * (-0.0268661706f +
                z * (0.00522397765f + z * (-0.000854832702f + z * 0.000120552902f))))));
  float t = 1.0f / (1.0f + 0.5f * a);
  float p = -1.26551223f + t * (1.00002368f + t * (0.37409196f + t * (0.09678418f + t * (-0.18628806f +
            t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f))))))));
  float large = 1.0f - t * kiln_exp(p - a * a);
  large = x < 0.0f ? -large : large;
  return a < 0.5f ? small : (x == x ? large : x);
}
inline double kiln_erf(double x) { return std::erf(x); }
template <typename T> inline T kiln_erf(T x) { return T(std::erf(double(x))); }
inline double kiln_gelu(double x) { return 0.5 * x * std::erfc(-x / 1.4142135623730951); }
// gelu's tanh form: 0.5*x*(1 + tanh(u)) = x / (1 + exp(-2u)), u = sqrt(2/pi)*(x + 0.044715 x^3):
// no tanh call and no cancellation.
template <typename T> inline T kiln_gelu_tanh(T x) {
  T u = T(0.7978845608028654) * (x + T(0.044715) * x * x * x);
  return x / (T(1) + kiln_exp(T(-2) * u));
}
inline float kiln_round_h(float f) { return kiln_h2f(kiln_f2h(f)); }
inline float kiln_round_b(float f) { return kiln_b2f(kiln_f2b(f)); }
// A float flushed to a signed zero where the 16-bit type would round it to one (f16: |x| < 2^-25;
// bf16: |x| <= 2^-134), else unchanged (every float bit kept). Where sqrt/rsqrt/reciprocal/log/
// mod/pow read a fused intermediate.
inline float kiln_flush_h(float f) { return (f < 0.0f ? -f : f) < 2.98023224e-8f ? f * 0.0f : f; }
inline float kiln_flush_b(float f) { return (f < 0.0f ? -f : f) <= 4.59177481e-41f ? f * 0.0f : f; }
inline uint32_t kiln_f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float kiln_bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
)KILN" + c_narrow_float_helpers("inline") + R"KILN(
// With -fno-math-errno GCC folds sin(atan(x)) and cos(atan(x)) into algebra that gives +-1 and +-0
// for a NaN x; the NaN branch keeps NaN out of the fold (tests/fuzz/regressions/cos-atan-nan.kir).
// The empty asm makes atan's result opaque: GCC would otherwise fold cos(atan(x)) into
// 1/sqrt(1 + x*x), which is 0 (or NaN for a NaN x) where cos of the rounded atan is not.
template <typename T> inline T kiln_atan(T x) {
  if (std::isnan(x)) return x;
  T r = std::atan(x);
  __asm__("" : "+g"(r));
  return r;
}
template <typename T> inline T kiln_relu(T x) { return std::isnan(x) ? x : (x > T(0) ? x : T(0)); }
template <typename T> inline T kiln_sign(T x) { return std::isnan(x) ? x : T((x > T(0)) - (x < T(0))); }
template <typename T> inline T kiln_fmax(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  return a > b ? a : b;
}
template <typename T> inline T kiln_fmin(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  return a < b ? a : b;
}
// Accumulator folds: a NaN operand replaces the accumulator, and a NaN accumulator stays.
template <typename T> inline T kiln_acc_max(T acc, T v) {
  return (std::isnan(v) || v > acc) ? (std::isnan(acc) ? acc : v) : acc;
}
template <typename T> inline T kiln_acc_min(T acc, T v) {
  return (std::isnan(v) || v < acc) ? (std::isnan(acc) ? acc : v) : acc;
}
}  // namespace
// NaN-propagating max/min are order-independent, so OpenMP may combine them across lanes/threads.
#pragma omp declare reduction(kiln_max : float : omp_out = kiln_acc_max(omp_out, omp_in)) initializer(omp_priv = -std::numeric_limits<float>::infinity())
#pragma omp declare reduction(kiln_max : double : omp_out = kiln_acc_max(omp_out, omp_in)) initializer(omp_priv = -std::numeric_limits<double>::infinity())
#pragma omp declare reduction(kiln_min : float : omp_out = kiln_acc_min(omp_out, omp_in)) initializer(omp_priv = std::numeric_limits<float>::infinity())
#pragma omp declare reduction(kiln_min : double : omp_out = kiln_acc_min(omp_out, omp_in)) initializer(omp_priv = std::numeric_limits<double>::infinity())
namespace {
template <typename T> inline T kiln_clamp(T x, double lo, double hi) {
  if (std::isnan(x)) return x;
  return double(x) < lo ? T(lo) : (double(x) > hi ? T(hi) : x);
}
// Float -> integer: truncate toward zero, saturate, NaN -> 0 (as HostTensor::set_f64).
template <typename T, typename F> inline T kiln_f2i(F v) {
  if (std::isnan(v)) return T(0);
  constexpr double lo = double(std::numeric_limits<T>::lowest()), hi = double(std::numeric_limits<T>::max());
  if (double(v) <= lo) return std::numeric_limits<T>::lowest();
  if (double(v) >= hi) return std::numeric_limits<T>::max();
  return T(v);
}
template <typename T> inline T kiln_pymod(T x, T y) {
  T r = std::fmod(x, y);
  if (std::isnan(r)) return r;
  if (r == T(0)) return std::copysign(T(0), y);
  if ((r < T(0)) != (y < T(0))) r += y;
  return r;
}
)KILN" + c_integer_helpers("inline") + R"KILN(
}  // namespace
)KILN");
}

}  // namespace kiln::codegen
