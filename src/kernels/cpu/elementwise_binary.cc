// Fast eager kernels for binary elementwise ops (arithmetic, comparisons, logic) and where, with
// numpy broadcasting planned once per call into rows of contiguous-or-broadcast operands. Why:
// the equal-shape, scalar, row-vector and column-vector cases all become one vectorised row loop.
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/cpu_common.h"

namespace kiln::eager::detail {

namespace {

template <typename T>
using wrap_t = std::conditional_t<(sizeof(T) > 4), uint64_t, uint32_t>;

// One output row: o[i] = fn(x[i * sx], y[i * sy]) with sx, sy in {0, 1}. Elements are loaded as
// compute_t<In> (float for 16-bit floats, through stack blocks) and stored as Out.
template <typename In, typename Out, typename Fn>
void binary_row(const In* x, int64_t sx, const In* y, int64_t sy, Out* o, int64_t n, Fn fn) {
  if constexpr (is_half_like_v<In>) {
    float bx[kConvertBlock], by[kConvertBlock];
    float x0 = to_float(x[0]), y0 = to_float(y[0]);
    if (!sx) std::fill(bx, bx + std::min(n, kConvertBlock), x0);
    if (!sy) std::fill(by, by + std::min(n, kConvertBlock), y0);
    for (int64_t block = 0; block < n; block += kConvertBlock) {
      int64_t m = std::min(kConvertBlock, n - block);
      if (sx) load_as_float(x + block, m, bx);
      if (sy) load_as_float(y + block, m, by);
      if constexpr (std::is_same_v<Out, In>) {
        float r[kConvertBlock];
#pragma omp simd
        for (int64_t i = 0; i < m; ++i) r[i] = fn(bx[i], by[i]);
        store_from_float(r, m, o + block);
      } else {
#pragma omp simd
        for (int64_t i = 0; i < m; ++i) o[block + i] = fn(bx[i], by[i]);
      }
    }
  } else if (sx && sy) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = fn(x[i], y[i]);
  } else if (sx) {
    const In y0 = y[0];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = fn(x[i], y0);
  } else if (sy) {
    const In x0 = x[0];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = fn(x0, y[i]);
  } else {
    const Out r = fn(x[0], y[0]);
    std::fill(o, o + n, r);
  }
}

// Runs a broadcast binary op over the whole output. Few long rows are split inside the row (the
// equal-shape case is one row); many rows are distributed whole.
template <typename In, typename Out, typename Fn>
void binary_map(const KernelArgs& a, int64_t work, Fn fn) {
  const HostTensor &x = a.in[0], &y = a.in[1];
  HostTensor& out = a.out[0];
  if (out.numel() == 0) return;
  BroadcastPlan plan = make_broadcast_plan({x.shape(), y.shape()}, out.shape());
  const In* px = x.data<In>();
  const In* py = y.data<In>();
  Out* po = out.data<Out>();
  const int64_t sx = plan.inner_stride[0], sy = plan.inner_stride[1];
  if (plan.rows < omp_get_max_threads()) {
    for_each_row<2>(plan, 0, plan.rows, [&](int64_t row, const int64_t* off) {
      parallel_ranges(plan.inner, work, [&](int64_t begin, int64_t end) {
        binary_row(px + off[0] + begin * sx, sx, py + off[1] + begin * sy, sy,
                   po + row * plan.inner + begin, end - begin, fn);
      });
    });
    return;
  }
  parallel_ranges(plan.rows, plan.inner * work, [&](int64_t begin, int64_t end) {
    for_each_row<2>(plan, begin, end, [&](int64_t row, const int64_t* off) {
      binary_row(px + off[0], sx, py + off[1], sy, po + row * plan.inner, plan.inner, fn);
    });
  });
}

// Dispatches on the operands' dtype: float_fn over compute types (float/double), int_fn over the
// integer type itself. Bool (and any dtype the op lacks) is left to the reference.
template <typename FloatFn, typename IntFn>
Ran arith(const KernelArgs& a, int64_t work, FloatFn float_fn, IntFn int_fn) {
  return dispatch_eager(a.in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      return Ran::kNotHandled;
    } else if constexpr (std::is_integral_v<T>) {
      if constexpr (std::is_same_v<IntFn, std::nullptr_t>) return Ran::kNotHandled;
      else binary_map<T, T>(a, work, [&](T p, T q) { return int_fn(p, q); });
      return Ran::kNative;
    } else {
      binary_map<T, T>(a, work, float_fn);
      return Ran::kNative;
    }
  });
}

template <typename Cmp> Ran compare(const KernelArgs& a, Cmp cmp) {
  return dispatch_eager(a.in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    binary_map<T, bool>(a, 1, cmp);
    return Ran::kNative;
  });
}

template <typename Fn> Ran logical(const KernelArgs& a, Fn fn) {
  binary_map<bool, bool>(a, 1, fn);
  return Ran::kNative;
}

// Integer division and modulo by zero are user errors; find them before any thread starts.
void require_no_zero_divisor(const KernelArgs& a, const char* what) {
  if (a.out[0].numel() == 0) return;
  dispatch_eager(a.in[1].dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* y = a.in[1].data<T>();
    for (int64_t i = 0; i < a.in[1].numel(); ++i)
      KILN_CHECK(!(y[i] == T(0)), "integer ", what, " by zero (operand b, element ", i, ")");
    return Ran::kNative;
  });
}

template <typename C> C nan_of() { return std::numeric_limits<C>::quiet_NaN(); }

Ran run_binary(const KernelArgs& a) {
  switch (a.op) {
    case Op::Add:
      return arith(a, 1, [](auto p, auto q) { return p + q; },
                   [](auto p, auto q) { using T = decltype(p); return T(wrap_t<T>(p) + wrap_t<T>(q)); });
    case Op::Sub:
      return arith(a, 1, [](auto p, auto q) { return p - q; },
                   [](auto p, auto q) { using T = decltype(p); return T(wrap_t<T>(p) - wrap_t<T>(q)); });
    case Op::Mul:
      return arith(a, 1, [](auto p, auto q) { return p * q; },
                   [](auto p, auto q) { using T = decltype(p); return T(wrap_t<T>(p) * wrap_t<T>(q)); });
    case Op::Div:
      if (is_integer(a.in[0].dtype())) require_no_zero_divisor(a, "division");
      return arith(a, 1, [](auto p, auto q) { return p / q; }, [](auto p, auto q) {
        using T = decltype(p);
        // Truncates toward zero; MIN / -1 wraps to MIN instead of trapping.
        if constexpr (std::is_signed_v<T>)
          if (q == T(-1)) return T(wrap_t<T>(0) - wrap_t<T>(p));
        return T(p / q);
      });
    case Op::Pow:
      return arith(a, 8, [](auto p, auto q) { return std::pow(p, q); }, nullptr);
    case Op::Maximum:
      return arith(
          a, 1,
          [](auto p, auto q) {
            using C = decltype(p);
            return (p != p || q != q) ? nan_of<C>() : (p > q ? p : q);  // NaN propagates
          },
          [](auto p, auto q) { return p > q ? p : q; });
    case Op::Minimum:
      return arith(
          a, 1,
          [](auto p, auto q) {
            using C = decltype(p);
            return (p != p || q != q) ? nan_of<C>() : (p < q ? p : q);
          },
          [](auto p, auto q) { return p < q ? p : q; });
    case Op::Mod: {
      // Python-style remainder (sign of the divisor) unless fmod=1 (C fmod, sign of dividend).
      bool c_fmod = a.attrs.get_int("fmod") != 0;
      if (is_integer(a.in[0].dtype())) require_no_zero_divisor(a, "modulo");
      return arith(
          a, 4,
          [c_fmod](auto p, auto q) {
            using C = decltype(p);
            C r = std::fmod(p, q);
            if (c_fmod || r != r) return r;
            if (r == 0) return std::copysign(C(0), q);
            if ((r < 0) != (q < 0)) r += q;
            return r;
          },
          [c_fmod](auto p, auto q) {
            using T = decltype(p);
            if constexpr (std::is_signed_v<T>)
              if (q == T(-1)) return T(0);  // MIN % -1 would trap
            T r = T(p % q);
            if (!c_fmod && r != 0 && ((r < 0) != (q < 0))) r = T(r + q);
            return r;
          });
    }
    case Op::Eq: return compare(a, [](auto p, auto q) { return p == q; });
    case Op::Ne: return compare(a, [](auto p, auto q) { return p != q; });
    case Op::Lt: return compare(a, [](auto p, auto q) { return p < q; });
    case Op::Le: return compare(a, [](auto p, auto q) { return p <= q; });
    case Op::Gt: return compare(a, [](auto p, auto q) { return p > q; });
    case Op::Ge: return compare(a, [](auto p, auto q) { return p >= q; });
    case Op::And: return logical(a, [](bool p, bool q) { return p && q; });
    case Op::Or: return logical(a, [](bool p, bool q) { return p || q; });
    case Op::Xor: return logical(a, [](bool p, bool q) { return p != q; });
    default: return Ran::kNotHandled;
  }
}

// ---- where: a bit-exact select, so one loop per element width serves every dtype ----

template <typename B> void where_rows(const KernelArgs& a) {
  HostTensor& out = a.out[0];
  if (out.numel() == 0) return;
  BroadcastPlan plan = make_broadcast_plan({a.in[0].shape(), a.in[1].shape(), a.in[2].shape()}, out.shape());
  const bool* pc = a.in[0].data<bool>();
  const B* px = static_cast<const B*>(a.in[1].raw());
  const B* py = static_cast<const B*>(a.in[2].raw());
  B* po = static_cast<B*>(out.raw());
  const int64_t sc = plan.inner_stride[0], sx = plan.inner_stride[1], sy = plan.inner_stride[2];
  auto row = [&](const bool* c, const B* x, const B* y, B* o, int64_t n) {
    if (sc && sx && sy) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? x[i] : y[i];
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] = c[i * sc] ? x[i * sx] : y[i * sy];
    }
  };
  if (plan.rows < omp_get_max_threads()) {
    for_each_row<3>(plan, 0, plan.rows, [&](int64_t r, const int64_t* off) {
      parallel_ranges(plan.inner, 1, [&](int64_t begin, int64_t end) {
        row(pc + off[0] + begin * sc, px + off[1] + begin * sx, py + off[2] + begin * sy,
            po + r * plan.inner + begin, end - begin);
      });
    });
    return;
  }
  parallel_ranges(plan.rows, plan.inner, [&](int64_t begin, int64_t end) {
    for_each_row<3>(plan, begin, end, [&](int64_t r, const int64_t* off) {
      row(pc + off[0], px + off[1], py + off[2], po + r * plan.inner, plan.inner);
    });
  });
}

Ran run_where_or_binary(const KernelArgs& a) {
  if (a.op != Op::Where) return run_binary(a);
  dispatch_bits(a.in[1].dtype(), [&](auto tag) { where_rows<decltype(tag)>(a); });
  return Ran::kNative;
}

bool binary_supports(Op op, DType dtype) {
  switch (op) {
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Maximum: case Op::Minimum:
    case Op::Mod:
      return dtype != DType::Bool;
    case Op::Pow: return is_float(dtype);
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: case Op::Where:
      return true;
    case Op::And: case Op::Or: case Op::Xor: return dtype == DType::Bool;
    default: return false;
  }
}

}  // namespace

const KernelFamily kElementwiseBinaryFamily{binary_supports, run_where_or_binary};

}  // namespace kiln::eager::detail
