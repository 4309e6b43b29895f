// Reference kernels for the ops added for ONNX conformance (issue #3): inverse and hyperbolic
// trig, bitwise integer ops and det. Why: each is one formula from <cmath> or an integer operator
// (det: LU with partial pivoting in double), kept obvious since this is the oracle.
#include <cmath>
#include <utility>

#include "interp/ref_kernels.h"
#include "kiln/error.h"

namespace kiln::interp {

namespace {

template <typename Fn>
void unary_float(const KernelArgs& a, Fn fn) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  for (int64_t i = 0; i < out.numel(); ++i) out.set_f64(i, fn(x.get_f64(i)));
}

template <typename Fn>
void binary_int(const KernelArgs& a, Fn fn) {
  HostTensor& out = a.out[0];
  BroadcastIndex ia(a.in[0].shape(), out.shape()), ib(a.in[1].shape(), out.shape());
  for (int64_t i = 0; i < out.numel(); ++i) out.set_i64(i, fn(a.in[0].get_i64(ia(i)), a.in[1].get_i64(ib(i))));
}

}  // namespace

void ref_Asin(const KernelArgs& a) { unary_float(a, [](double x) { return std::asin(x); }); }
void ref_Acos(const KernelArgs& a) { unary_float(a, [](double x) { return std::acos(x); }); }
void ref_Atan(const KernelArgs& a) { unary_float(a, [](double x) { return std::atan(x); }); }
void ref_Sinh(const KernelArgs& a) { unary_float(a, [](double x) { return std::sinh(x); }); }
void ref_Cosh(const KernelArgs& a) { unary_float(a, [](double x) { return std::cosh(x); }); }
void ref_Asinh(const KernelArgs& a) { unary_float(a, [](double x) { return std::asinh(x); }); }
void ref_Acosh(const KernelArgs& a) { unary_float(a, [](double x) { return std::acosh(x); }); }
void ref_Atanh(const KernelArgs& a) { unary_float(a, [](double x) { return std::atanh(x); }); }

// Integers are read widened to int64 (unsigned values stay non-negative), so ~x, &, |, ^ and
// shifts computed in int64 and narrowed back by set_i64 give the dtype's own result.
void ref_BitNot(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  for (int64_t i = 0; i < a.out[0].numel(); ++i) a.out[0].set_i64(i, ~x.get_i64(i));
}
void ref_BitAnd(const KernelArgs& a) { binary_int(a, [](int64_t x, int64_t y) { return x & y; }); }
void ref_BitOr(const KernelArgs& a) { binary_int(a, [](int64_t x, int64_t y) { return x | y; }); }
void ref_BitXor(const KernelArgs& a) { binary_int(a, [](int64_t x, int64_t y) { return x ^ y; }); }
void ref_BitShift(const KernelArgs& a) {
  bool left = a.attrs.get_int("left") != 0;
  int64_t width = int64_t(dtype_size(a.in[0].dtype())) * 8;
  binary_int(a, [&](int64_t x, int64_t s) -> int64_t {
    if (s < 0) throw Error(str("bit_shift by a negative amount (", s, ")"));
    if (left) return s >= width ? 0 : int64_t(uint64_t(x) << s);
    if (s >= 64) return x < 0 ? -1 : 0;
    return x >> s;  // arithmetic for negative signed values; unsigned values are non-negative here
  });
}

void ref_Det(const KernelArgs& a) {
  const HostTensor& x = a.in[0];
  HostTensor& out = a.out[0];
  int64_t n = x.shape().back();
  for (int64_t b = 0; b < out.numel(); ++b) {
    std::vector<double> m(size_t(n * n));
    for (int64_t i = 0; i < n * n; ++i) m[size_t(i)] = x.get_f64(b * n * n + i);
    double det = 1;
    for (int64_t col = 0; col < n; ++col) {
      int64_t pivot = col;
      for (int64_t r = col + 1; r < n; ++r)
        if (std::fabs(m[size_t(r * n + col)]) > std::fabs(m[size_t(pivot * n + col)])) pivot = r;
      if (m[size_t(pivot * n + col)] == 0) {
        det = 0;
        break;
      }
      if (pivot != col) {
        for (int64_t k = 0; k < n; ++k) std::swap(m[size_t(pivot * n + k)], m[size_t(col * n + k)]);
        det = -det;
      }
      double p = m[size_t(col * n + col)];
      det *= p;
      for (int64_t r = col + 1; r < n; ++r) {
        double f = m[size_t(r * n + col)] / p;
        for (int64_t k = col; k < n; ++k) m[size_t(r * n + k)] -= f * m[size_t(col * n + k)];
      }
    }
    out.set_f64(b, det);
  }
}

}  // namespace kiln::interp
