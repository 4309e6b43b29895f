// Fast eager kernels for unary elementwise ops and cast: one contiguous loop per (op, dtype) that
// the compiler vectorises, 16-bit floats through float blocks. Why: these are the bulk of the
// eager baseline's launches, and they must agree with the reference interpreter (exactly for
// exactly-rounded ops, within a few ulps for transcendentals).
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/cpu_common.h"

namespace kiln::eager::detail {

namespace {

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;

// Work units per element handed to parallel_ranges: transcendentals cost more than an add, so
// they go parallel at fewer elements.
constexpr int64_t kCheapOp = 1, kTranscendental = 8;

// out[i] = fn(x[i]) for a float dtype T; fn takes and returns compute_t<T> (float for f16/bf16).
template <typename T, typename Fn>
void map_float(const HostTensor& x, HostTensor& out, int64_t work, Fn fn) {
  const T* in = x.data<T>();
  T* o = out.data<T>();
  parallel_ranges(x.numel(), work, [&](int64_t begin, int64_t end) {
    if constexpr (is_half_like_v<T>) {
      float buf[kConvertBlock];
      for (int64_t block = begin; block < end; block += kConvertBlock) {
        int64_t m = std::min(kConvertBlock, end - block);
        load_as_float(in + block, m, buf);
#pragma omp simd
        for (int64_t i = 0; i < m; ++i) buf[i] = fn(buf[i]);
        store_from_float(buf, m, o + block);
      }
    } else {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) o[i] = fn(in[i]);
    }
  });
}

// out[i] = fn(x[i]) with in/out element types given explicitly (ints, bool outputs, casts).
template <typename In, typename Out, typename Fn>
void map_typed(const HostTensor& x, HostTensor& out, int64_t work, Fn fn) {
  const In* in = x.data<In>();
  Out* o = out.data<Out>();
  parallel_ranges(x.numel(), work, [&](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) o[i] = fn(in[i]);
  });
}

// Runs a float-only op on any float dtype; `fn` is a generic lambda over float or double.
template <typename Fn>
Ran float_op(const KernelArgs& a, int64_t work, Fn fn) {
  const HostTensor& x = a.in[0];
  switch (x.dtype()) {
    case DType::F32: map_float<float>(x, a.out[0], work, fn); return Ran::kNative;
    case DType::F64: map_float<double>(x, a.out[0], work, fn); return Ran::kNative;
    case DType::F16: map_float<Half>(x, a.out[0], work, fn); return Ran::kNative;
    case DType::BF16: map_float<BFloat16>(x, a.out[0], work, fn); return Ran::kNative;
    default: return Ran::kNotHandled;
  }
}

// Integer arithmetic wraps like two's complement: compute in an unsigned type at least as wide
// as int (so that uint16 * uint16 cannot overflow a promoted int), then narrow.
template <typename T>
using wrap_t = std::conditional_t<(sizeof(T) > 4), uint64_t, uint32_t>;

// A numeric op: float_fn over floats, int_fn over the integer element type itself.
template <typename FloatFn, typename IntFn>
Ran numeric_op(const KernelArgs& a, FloatFn float_fn, IntFn int_fn) {
  const HostTensor& x = a.in[0];
  if (is_float(x.dtype())) return float_op(a, kCheapOp, float_fn);
  if (x.dtype() == DType::Bool) return Ran::kNotHandled;
  return dispatch_eager(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
      map_typed<T, T>(x, a.out[0], kCheapOp, [&](T v) { return int_fn(v); });
    return Ran::kNative;
  });
}

// ---- cast ----

// Cast semantics of the reference (HostTensor::set_f64/set_i64): float -> int truncates toward
// zero and saturates, NaN -> 0; int -> narrower int wraps; anything -> bool is "!= 0"; float
// results round to nearest even straight from the exact source value.
template <typename To> To saturate_to_int(double v) {
  constexpr double lo = double(std::numeric_limits<To>::lowest());
  constexpr double hi = double(std::numeric_limits<To>::max());
  if (v != v) return To(0);
  if (v <= lo) return std::numeric_limits<To>::lowest();
  if (v >= hi) return std::numeric_limits<To>::max();
  return To(v);
}

// Source values that a float holds exactly (so rounding float -> 16-bit is a single rounding).
template <typename From> inline constexpr bool exact_in_float_v =
    std::is_same_v<From, float> || is_half_like_v<From> || std::is_same_v<From, bool> ||
    std::is_same_v<From, int8_t> || std::is_same_v<From, uint8_t> || std::is_same_v<From, int16_t>;

template <typename From> double source_as_double(From v) {
  if constexpr (is_half_like_v<From>) return double(to_float(v));
  else return double(v);
}

template <typename From, typename To> To cast_one(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    if constexpr (is_half_like_v<From>) return to_float(v) != 0.0f;
    else return v != From(0);
  } else if constexpr (std::is_integral_v<To>) {
    if constexpr (std::is_integral_v<From>) return To(int64_t(v));  // wraps
    else return saturate_to_int<To>(source_as_double(v));
  } else if constexpr (std::is_same_v<To, float> || std::is_same_v<To, double>) {
    if constexpr (std::is_integral_v<From> && sizeof(From) >= 4)
      return To(double(v));  // i64 -> f32 rounds once through double, like the reference
    else return To(source_as_double(v));
  } else if constexpr (!is_half_like_v<To>) {  // 8- and 4-bit floats: run_cast leaves them to the reference
    return To(float(source_as_double(v)));
  } else {  // To is Half or BFloat16
    if constexpr (exact_in_float_v<From>) {
      if constexpr (is_half_like_v<From>) return from_float<To>(to_float(v));
      else return from_float<To>(float(v));
    } else {
      // f64 and wide ints: round straight from double (going through float would round twice).
      double d = double(v);
      if constexpr (std::is_same_v<To, Half>) return Half::from_bits(f64_to_f16_bits(d));
      else return BFloat16::from_bits(f64_to_bf16_bits(d));
    }
  }
}

Ran run_cast(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  if (x.dtype() == out.dtype()) {
    if (x.nbytes()) std::memcpy(out.raw(), x.raw(), x.nbytes());
    return Ran::kNative;
  }
  if (is_narrow(x.dtype()) || is_narrow(out.dtype())) return Ran::kNotHandled;
  return dispatch_eager(x.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    return dispatch_eager(out.dtype(), [&](auto to_tag) {
      using To = decltype(to_tag);
      map_typed<From, To>(x, out, kCheapOp, [](From v) { return cast_one<From, To>(v); });
      return Ran::kNative;
    });
  });
}

// ---- clamp: bounds are doubles; results equal a bound (rounded once) or the input itself ----

template <typename T> Ran clamp_typed(const KernelArgs& a, double lo, double hi) {
  const HostTensor& x = a.in[0];
  if constexpr (std::is_integral_v<T>) {
    auto int_bound = [](double b) {
      if (b <= -9.2e18) return std::numeric_limits<int64_t>::lowest();
      if (b >= 9.2e18) return std::numeric_limits<int64_t>::max();
      return int64_t(b);
    };
    int64_t ilo = int_bound(std::ceil(lo)), ihi = int_bound(std::floor(hi));
    map_typed<T, T>(x, a.out[0], kCheapOp, [=](T v) {
      int64_t w = int64_t(v);
      return T(w < ilo ? ilo : (w > ihi ? ihi : w));
    });
  } else if constexpr (is_half_like_v<T>) {
    // Select on bits: the bounds round straight from double, the input passes through untouched.
    uint16_t lo_bits = std::is_same_v<T, Half> ? f64_to_f16_bits(lo) : f64_to_bf16_bits(lo);
    uint16_t hi_bits = std::is_same_v<T, Half> ? f64_to_f16_bits(hi) : f64_to_bf16_bits(hi);
    float lo_f = float(lo), hi_f = float(hi);
    // Comparing in float is exact when the bound is a float; otherwise compare in double.
    bool bounds_are_floats = double(lo_f) == lo && double(hi_f) == hi;
    map_typed<T, T>(x, a.out[0], kCheapOp, [=](T v) {
      float f = to_float(v);
      bool below = bounds_are_floats ? f < lo_f : double(f) < lo;
      bool above = bounds_are_floats ? f > hi_f : double(f) > hi;
      return T::from_bits(below ? lo_bits : (above ? hi_bits : v.bits));
    });
  } else {
    T lo_t = T(lo), hi_t = T(hi);
    map_typed<T, T>(x, a.out[0], kCheapOp, [=](T v) {
      double d = double(v);
      return d < lo ? lo_t : (d > hi ? hi_t : v);  // NaN compares false: stays NaN
    });
  }
  return Ran::kNative;
}

Ran run_clamp(const KernelArgs& a) {
  double lo = a.attrs.get_float("min"), hi = a.attrs.get_float("max");
  if (a.in[0].dtype() == DType::Bool) return Ran::kNotHandled;
  return dispatch_eager(a.in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) return Ran::kNotHandled;
    else return clamp_typed<T>(a, lo, hi);
  });
}

// ---- the op switch ----

template <typename T> T sign_of_int(T v) { return T((v > 0) - (v < 0)); }

Ran run_unary(const KernelArgs& a) {
  switch (a.op) {
    case Op::Neg:
      return numeric_op(a, [](auto x) { return -x; },
                        [](auto v) { using T = decltype(v); return T(wrap_t<T>(0) - wrap_t<T>(v)); });
    case Op::Abs:
      return numeric_op(a, [](auto x) { return std::fabs(x); }, [](auto v) {
        using T = decltype(v);
        return v < 0 ? T(wrap_t<T>(0) - wrap_t<T>(v)) : v;
      });
    case Op::Relu:
      // NaN stays NaN (x > 0 is false for NaN, so test it first); -0 becomes +0.
      return numeric_op(a, [](auto x) { return x != x ? x : (x > 0 ? x : decltype(x)(0)); },
                        [](auto v) { return v > 0 ? v : decltype(v)(0); });
    case Op::Sign:
      return numeric_op(
          a, [](auto x) { using C = decltype(x); return x != x ? x : C((x > 0) - (x < 0)); },
          [](auto v) { return sign_of_int(v); });
    case Op::Clamp: return run_clamp(a);
    case Op::Exp: return float_op(a, kTranscendental, [](auto x) { return std::exp(x); });
    case Op::Log: return float_op(a, kTranscendental, [](auto x) { return std::log(x); });
    case Op::Sqrt: return float_op(a, kCheapOp, [](auto x) { return std::sqrt(x); });
    case Op::Rsqrt:
      return float_op(a, kCheapOp, [](auto x) { return decltype(x)(1) / std::sqrt(x); });
    case Op::Reciprocal: return float_op(a, kCheapOp, [](auto x) { return decltype(x)(1) / x; });
    case Op::Tanh: return float_op(a, kTranscendental, [](auto x) { return std::tanh(x); });
    case Op::Sigmoid:
      return float_op(a, kTranscendental,
                      [](auto x) { using C = decltype(x); return C(1) / (C(1) + std::exp(-x)); });
    case Op::Silu:
      return float_op(a, kTranscendental,
                      [](auto x) { using C = decltype(x); return x * (C(1) / (C(1) + std::exp(-x))); });
    case Op::Erf: return float_op(a, kTranscendental, [](auto x) { return std::erf(x); });
    case Op::Gelu:
      // In double even for f32: 1 + erf (or 1 + tanh) cancels for negative x, and float would
      // lose most of the result's digits there.
      if (a.attrs.get_string("approximate") == "tanh")
        return float_op(a, kTranscendental, [](auto x) {
          double d = double(x);
          return decltype(x)(0.5 * d * (1.0 + std::tanh(kSqrt2OverPi * (d + 0.044715 * d * d * d))));
        });
      return float_op(a, kTranscendental, [](auto x) {
        double d = double(x);
        return decltype(x)(0.5 * d * std::erfc(-d / kSqrt2));
      });
    case Op::Sin: return float_op(a, kTranscendental, [](auto x) { return std::sin(x); });
    case Op::Cos: return float_op(a, kTranscendental, [](auto x) { return std::cos(x); });
    case Op::Floor: return float_op(a, kCheapOp, [](auto x) { return std::floor(x); });
    case Op::Ceil: return float_op(a, kCheapOp, [](auto x) { return std::ceil(x); });
    // nearbyint rounds half to even in the default rounding mode, which Kiln never changes.
    case Op::Round: return float_op(a, kCheapOp, [](auto x) { return std::nearbyint(x); });
    case Op::Not:
      map_typed<bool, bool>(a.in[0], a.out[0], kCheapOp, [](bool v) { return !v; });
      return Ran::kNative;
    case Op::IsNan:
      return dispatch_eager(a.in[0].dtype(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (is_half_like_v<T>)  // NaN: exponent all ones and a nonzero mantissa
          map_typed<T, bool>(a.in[0], a.out[0], kCheapOp, [](T v) {
            constexpr uint16_t kInfBits = std::is_same_v<T, Half> ? 0x7c00 : 0x7f80;
            return (v.bits & 0x7fff) > kInfBits;
          });
        else if constexpr (std::is_floating_point_v<T>)
          map_typed<T, bool>(a.in[0], a.out[0], kCheapOp, [](T v) { return v != v; });
        else return Ran::kNotHandled;
        return Ran::kNative;
      });
    case Op::Cast: return run_cast(a);
    default: return Ran::kNotHandled;
  }
}

bool unary_supports(Op op, DType dtype) {
  switch (op) {
    case Op::Cast: return true;
    case Op::Not: return dtype == DType::Bool;
    case Op::Neg: case Op::Abs: case Op::Relu: case Op::Sign: case Op::Clamp:
      return dtype != DType::Bool;
    case Op::Exp: case Op::Log: case Op::Sqrt: case Op::Rsqrt: case Op::Reciprocal: case Op::Tanh:
    case Op::Sigmoid: case Op::Silu: case Op::Erf: case Op::Gelu: case Op::Sin: case Op::Cos:
    case Op::Floor: case Op::Ceil: case Op::Round: case Op::IsNan:
      return is_float(dtype);
    default: return false;
  }
}

}  // namespace

const KernelFamily kElementwiseUnaryFamily{unary_supports, run_unary};

}  // namespace kiln::eager::detail
