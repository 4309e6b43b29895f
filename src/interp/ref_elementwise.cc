// Reference kernels for elementwise ops. Floats are computed in double and rounded once to the
// output dtype; integers in int64 (wrapping like two's complement); broadcasting is explicit index
// arithmetic. Why: the oracle must be obviously right, so every formula reads like its ops.def row.
#include <cmath>
#include <limits>

#include "interp/ref_kernels.h"
#include "kiln/error.h"

namespace kiln::interp {

namespace {

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;

// ---- unary ----

template <typename FloatFn>
void unary_float(const KernelArgs& a, FloatFn fn) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  for (int64_t i = 0; i < out.numel(); ++i) out.set_f64(i, fn(x.get_f64(i)));
}

// Ops defined for every numeric dtype: floats through double, ints through int64.
template <typename FloatFn, typename IntFn>
void unary_numeric(const KernelArgs& a, FloatFn float_fn, IntFn int_fn) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  if (computes_in_double(x.dtype())) {
    for (int64_t i = 0; i < out.numel(); ++i) out.set_f64(i, float_fn(x.get_f64(i)));
  } else {
    for (int64_t i = 0; i < out.numel(); ++i) out.set_i64(i, int_fn(x.get_i64(i)));
  }
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// The sign of x is kept (round(-0.3) is -0, as nearbyint gives: rsqrt of it is -inf).
double round_half_to_even(double x) {
  if (!std::isfinite(x)) return x;
  double lower = std::floor(x);
  double fraction = x - lower;
  double r = fraction > 0.5 ? lower + 1 : fraction < 0.5 ? lower : std::fmod(lower, 2.0) == 0 ? lower : lower + 1;
  return std::copysign(r, x);  // a tie picks the even neighbour
}

template <typename T> int64_t sign_of(T v) { return (v > 0) - (v < 0); }

}  // namespace

void ref_Neg(const KernelArgs& a) {
  unary_numeric(a, [](double x) { return -x; }, [](int64_t x) { return wrapping_sub(0, x); });
}
void ref_Abs(const KernelArgs& a) {
  unary_numeric(a, [](double x) { return std::fabs(x); },
                [](int64_t x) { return x < 0 ? wrapping_sub(0, x) : x; });
}
void ref_Exp(const KernelArgs& a) { unary_float(a, [](double x) { return std::exp(x); }); }
void ref_Log(const KernelArgs& a) { unary_float(a, [](double x) { return std::log(x); }); }
void ref_Sqrt(const KernelArgs& a) { unary_float(a, [](double x) { return std::sqrt(x); }); }
void ref_Rsqrt(const KernelArgs& a) { unary_float(a, [](double x) { return 1.0 / std::sqrt(x); }); }
void ref_Reciprocal(const KernelArgs& a) { unary_float(a, [](double x) { return 1.0 / x; }); }
void ref_Tanh(const KernelArgs& a) { unary_float(a, [](double x) { return std::tanh(x); }); }
void ref_Sigmoid(const KernelArgs& a) { unary_float(a, sigmoid); }
void ref_Erf(const KernelArgs& a) { unary_float(a, [](double x) { return std::erf(x); }); }
void ref_Relu(const KernelArgs& a) {
  // NaN stays NaN (x > 0 is false, so a plain `x > 0 ? x : 0` would turn it into 0).
  unary_numeric(a, [](double x) { return std::isnan(x) ? x : (x > 0 ? x : 0.0); },
                [](int64_t x) { return x > 0 ? x : int64_t(0); });
}
void ref_Gelu(const KernelArgs& a) {
  if (a.attrs.get_string("approximate") == "tanh") {
    // 0.5x(1 + tanh(u)) = x / (1 + exp(-2u)): the same value without 1 + tanh(u) cancelling to 0
    // for large negative x (the compiled kernels use this form too).
    unary_float(a, [](double x) { return x / (1.0 + std::exp(-2.0 * kSqrt2OverPi * (x + 0.044715 * x * x * x))); });
  } else {
    // 1 + erf(z) = erfc(-z): no cancellation where gelu(x) is tiny (x << 0).
    unary_float(a, [](double x) { return 0.5 * x * std::erfc(-x / kSqrt2); });
  }
}
void ref_Silu(const KernelArgs& a) { unary_float(a, [](double x) { return x * sigmoid(x); }); }
void ref_Sin(const KernelArgs& a) { unary_float(a, [](double x) { return std::sin(x); }); }
void ref_Cos(const KernelArgs& a) { unary_float(a, [](double x) { return std::cos(x); }); }
void ref_Floor(const KernelArgs& a) { unary_float(a, [](double x) { return std::floor(x); }); }
void ref_Ceil(const KernelArgs& a) { unary_float(a, [](double x) { return std::ceil(x); }); }
void ref_Round(const KernelArgs& a) { unary_float(a, round_half_to_even); }
void ref_Sign(const KernelArgs& a) {
  unary_numeric(a, [](double x) { return std::isnan(x) ? x : double(sign_of(x)); },
                [](int64_t x) { return sign_of(x); });
}
void ref_Not(const KernelArgs& a) {
  for (int64_t i = 0; i < a.out[0].numel(); ++i) a.out[0].set_i64(i, a.in[0].get_i64(i) == 0);
}
void ref_IsNan(const KernelArgs& a) {
  for (int64_t i = 0; i < a.out[0].numel(); ++i) a.out[0].set_i64(i, std::isnan(a.in[0].get_f64(i)));
}

// Float -> int truncates toward zero and saturates (NaN -> 0); int -> narrower int wraps; any -> bool
// is "!= 0" (NaN -> true); everything else is exact or rounds to nearest even.
void ref_Cast(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  // uint64 -> float reads the unsigned value (get_i64 would see values above 2^63 as negative).
  bool through_double = is_float(x.dtype()) || (x.dtype() == DType::U64 && is_float(out.dtype()));
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (through_double) out.set_f64(i, x.get_f64(i));
    else out.set_i64(i, x.get_i64(i));
  }
}

// For integer dtypes the effective bounds are ceil(min) and floor(max): the nearest integers that
// still satisfy min <= y <= max.
void ref_Clamp(const KernelArgs& a) {
  double lo = a.attrs.get_float("min"), hi = a.attrs.get_float("max");
  auto clamp_int_bound = [](double b) {
    if (b <= -9.2e18) return std::numeric_limits<int64_t>::lowest();
    if (b >= 9.2e18) return std::numeric_limits<int64_t>::max();
    return int64_t(b);
  };
  int64_t ilo = clamp_int_bound(std::ceil(lo)), ihi = clamp_int_bound(std::floor(hi));
  unary_numeric(
      a,
      [&](double x) {
        if (std::isnan(x)) return x;
        return x < lo ? lo : (x > hi ? hi : x);
      },
      [&](int64_t x) { return x < ilo ? ilo : (x > ihi ? ihi : x); });
}

// ---- binary (numpy broadcasting) ----

namespace {

template <typename Fn>
void binary_float(const KernelArgs& a, Fn fn) {
  HostTensor& out = a.out[0];
  BroadcastIndex ia(a.in[0].shape(), out.shape()), ib(a.in[1].shape(), out.shape());
  for (int64_t i = 0; i < out.numel(); ++i)
    out.set_f64(i, fn(a.in[0].get_f64(ia(i)), a.in[1].get_f64(ib(i))));
}

template <typename Fn>
void binary_int(const KernelArgs& a, Fn fn) {
  HostTensor& out = a.out[0];
  BroadcastIndex ia(a.in[0].shape(), out.shape()), ib(a.in[1].shape(), out.shape());
  for (int64_t i = 0; i < out.numel(); ++i)
    out.set_i64(i, fn(a.in[0].get_i64(ia(i)), a.in[1].get_i64(ib(i))));
}

template <typename FloatFn, typename IntFn>
void binary_numeric(const KernelArgs& a, FloatFn float_fn, IntFn int_fn) {
  if (computes_in_double(a.in[0].dtype())) binary_float(a, float_fn);
  else binary_int(a, int_fn);
}

// uint64 operands whose order or quotient matters (compare, divide, min/max) as unsigned values;
// add/sub/mul wrap identically in int64.
bool is_u64(const KernelArgs& a) { return a.in[0].dtype() == DType::U64; }
template <typename Fn>
void binary_u64(const KernelArgs& a, Fn fn) {
  HostTensor& out = a.out[0];
  BroadcastIndex ia(a.in[0].shape(), out.shape()), ib(a.in[1].shape(), out.shape());
  const uint64_t* x = a.in[0].data<uint64_t>();
  const uint64_t* y = a.in[1].data<uint64_t>();
  for (int64_t i = 0; i < out.numel(); ++i) out.set_i64(i, int64_t(fn(x[ia(i)], y[ib(i)])));
}

// Comparisons: floats compare as doubles (NaN compares unequal to everything), others as int64.
template <typename Cmp>
void compare(const KernelArgs& a, Cmp cmp) {
  HostTensor& out = a.out[0];
  BroadcastIndex ia(a.in[0].shape(), out.shape()), ib(a.in[1].shape(), out.shape());
  if (a.in[0].dtype() == DType::Str) {  // eq/ne only (the op table's kStrings): byte-wise equality
    for (int64_t i = 0; i < out.numel(); ++i)
      out.set_i64(i, cmp(a.in[0].str_at(ia(i)), a.in[1].str_at(ib(i))));
    return;
  }
  if (is_u64(a)) return binary_u64(a, [&](uint64_t x, uint64_t y) -> uint64_t { return cmp(x, y); });
  bool floats = computes_in_double(a.in[0].dtype());
  for (int64_t i = 0; i < out.numel(); ++i) {
    bool r = floats ? cmp(a.in[0].get_f64(ia(i)), a.in[1].get_f64(ib(i)))
                    : cmp(a.in[0].get_i64(ia(i)), a.in[1].get_i64(ib(i)));
    out.set_i64(i, r);
  }
}

void require_nonzero_divisor(int64_t b, const char* op) {
  KILN_CHECK(b != 0, "integer ", op, " by zero");
}

int64_t int_div_trunc(int64_t x, int64_t y) {
  require_nonzero_divisor(y, "division");
  if (y == -1) return wrapping_sub(0, x);  // INT64_MIN / -1 would trap
  return x / y;
}

int64_t int_pow(int64_t base, int64_t exponent) {
  if (exponent < 0) {
    // Integer 1 / base^|e| truncated toward zero.
    KILN_CHECK(base != 0, "integer pow: 0 to a negative power (division by zero)");
    if (base == 1) return 1;
    if (base == -1) return (exponent % 2 == 0) ? 1 : -1;
    return 0;
  }
  // Square-and-multiply; wraps modulo 2^64 like repeated multiplication would.
  int64_t result = 1, power = base;
  for (uint64_t e = uint64_t(exponent); e != 0; e >>= 1) {
    if (e & 1) result = wrapping_mul(result, power);
    power = wrapping_mul(power, power);
  }
  return result;
}

}  // namespace

void ref_Add(const KernelArgs& a) {
  binary_numeric(a, [](double x, double y) { return x + y; }, wrapping_add);
}
void ref_Sub(const KernelArgs& a) {
  binary_numeric(a, [](double x, double y) { return x - y; }, wrapping_sub);
}
void ref_Mul(const KernelArgs& a) {
  binary_numeric(a, [](double x, double y) { return x * y; }, wrapping_mul);
}
void ref_Div(const KernelArgs& a) {
  if (is_u64(a))
    return binary_u64(a, [](uint64_t x, uint64_t y) {
      require_nonzero_divisor(int64_t(y != 0), "division");
      return x / y;
    });
  binary_numeric(a, [](double x, double y) { return x / y; }, int_div_trunc);
}
void ref_Pow(const KernelArgs& a) {
  binary_numeric(a, [](double x, double y) { return std::pow(x, y); }, int_pow);
}
void ref_Maximum(const KernelArgs& a) {
  if (is_u64(a)) return binary_u64(a, [](uint64_t x, uint64_t y) { return x > y ? x : y; });
  binary_numeric(
      a,
      [](double x, double y) {
        if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<double>::quiet_NaN();
        return x > y ? x : y;
      },
      [](int64_t x, int64_t y) { return x > y ? x : y; });
}
void ref_Minimum(const KernelArgs& a) {
  if (is_u64(a)) return binary_u64(a, [](uint64_t x, uint64_t y) { return x < y ? x : y; });
  binary_numeric(
      a,
      [](double x, double y) {
        if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<double>::quiet_NaN();
        return x < y ? x : y;
      },
      [](int64_t x, int64_t y) { return x < y ? x : y; });
}

// Python-style remainder (sign of the divisor) by default; fmod=1 gives C's fmod (sign of the
// dividend). Float division by zero gives NaN; integer division by zero throws.
void ref_Mod(const KernelArgs& a) {
  bool c_fmod = a.attrs.get_int("fmod") != 0;
  if (is_u64(a))  // no negative operands: both conventions agree
    return binary_u64(a, [](uint64_t x, uint64_t y) {
      require_nonzero_divisor(int64_t(y != 0), "modulo");
      return x % y;
    });
  binary_numeric(
      a,
      [c_fmod](double x, double y) {
        double r = std::fmod(x, y);
        if (c_fmod || std::isnan(r)) return r;
        if (r == 0) return std::copysign(0.0, y);
        if ((r < 0) != (y < 0)) r += y;
        return r;
      },
      [c_fmod](int64_t x, int64_t y) {
        require_nonzero_divisor(y, "modulo");
        if (y == -1) return int64_t(0);  // INT64_MIN % -1 would trap
        int64_t r = x % y;
        if (!c_fmod && r != 0 && ((r < 0) != (y < 0))) r += y;
        return r;
      });
}

void ref_Eq(const KernelArgs& a) { compare(a, [](auto x, auto y) { return x == y; }); }
void ref_Ne(const KernelArgs& a) { compare(a, [](auto x, auto y) { return x != y; }); }
void ref_Lt(const KernelArgs& a) { compare(a, [](auto x, auto y) { return x < y; }); }
void ref_Le(const KernelArgs& a) { compare(a, [](auto x, auto y) { return x <= y; }); }
void ref_Gt(const KernelArgs& a) { compare(a, [](auto x, auto y) { return x > y; }); }
void ref_Ge(const KernelArgs& a) { compare(a, [](auto x, auto y) { return x >= y; }); }

void ref_And(const KernelArgs& a) { binary_int(a, [](int64_t x, int64_t y) -> int64_t { return x && y; }); }
void ref_Or(const KernelArgs& a) { binary_int(a, [](int64_t x, int64_t y) -> int64_t { return x || y; }); }
void ref_Xor(const KernelArgs& a) { binary_int(a, [](int64_t x, int64_t y) -> int64_t { return (x != 0) != (y != 0); }); }

void ref_Where(const KernelArgs& a) {
  HostTensor& out = a.out[0];
  BroadcastIndex ic(a.in[0].shape(), out.shape()), ia(a.in[1].shape(), out.shape()),
      ib(a.in[2].shape(), out.shape());
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (a.in[0].get_i64(ic(i)) != 0) copy_element(a.in[1], ia(i), out, i);
    else copy_element(a.in[2], ib(i), out, i);
  }
}

}  // namespace kiln::interp
