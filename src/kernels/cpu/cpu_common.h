// Shared machinery of the eager CPU kernels: the fast-kernel family interface, OpenMP chunking
// with exception transport, 16-bit float block conversion that vectorises, and broadcast plans.
// Why: every kernel family needs the same few building blocks, and they must agree on rounding.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <exception>
#include <vector>

#include <omp.h>

#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/host_tensor.h"
#include "kiln/interp.h"
#include "kiln/ops.h"

namespace kiln::eager::detail {

using interp::KernelArgs;

// What a fast kernel did with a call.
enum class Ran {
  kNotHandled,  // outside this kernel's fast paths: the reference kernel runs instead
  kNative,      // a hand-written loop in src/kernels/cpu
  kOpenBlas,    // a library call (recorded as "<op>(openblas)")
  kView,        // output shares the input's storage: nothing was read or written
};

// A family of fast kernels (one source file): `supports` answers has_fast_kernel for the op's
// data dtype; `run` may still decline a particular call (Ran::kNotHandled).
struct KernelFamily {
  bool (*supports)(Op op, DType dtype);
  Ran (*run)(const KernelArgs& args);
};

// One entry per source file, defined there.
extern const KernelFamily kElementwiseUnaryFamily;
extern const KernelFamily kElementwiseBinaryFamily;
extern const KernelFamily kReduceFamily;
extern const KernelFamily kMatmulFamily;
extern const KernelFamily kSoftmaxNormFamily;
extern const KernelFamily kMovementFamily;
extern const KernelFamily kConvFamily;
extern const KernelFamily kAttentionFamily;
extern const KernelFamily kPoolFamily;
extern const KernelFamily kTopKFamily;
extern const KernelFamily kSortFamily;
extern const KernelFamily kSampleFamily;

// Ops whose fast kernel returns the input's storage under a new shape (Ran::kView), so run_op
// does not allocate their outputs (movement.cc).
bool is_storage_view(Op op);

// ---- parallel loops ----

// Below this many elements of work a loop runs on the calling thread: starting an OpenMP team
// costs a few microseconds, which is more than small loops take.
inline constexpr int64_t kParallelThreshold = 32768;

// Calls body(begin, end) over [0, n) in contiguous chunks, in parallel when n * work_per_item
// reaches kParallelThreshold. The first exception thrown by any chunk is rethrown on the caller
// (an exception must never escape an OpenMP region).
template <typename Body>
void parallel_ranges(int64_t n, int64_t work_per_item, Body&& body) {
  if (n <= 0) return;
  int threads = omp_get_max_threads();
  if (threads <= 1 || n < 2 || n * work_per_item < kParallelThreshold || omp_in_parallel()) {
    body(int64_t(0), n);
    return;
  }
  int64_t chunks = std::min<int64_t>(n, int64_t(threads) * 4);
  std::exception_ptr error;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    try {
      body(begin, end);
    } catch (...) {
#pragma omp critical(kiln_eager_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// ---- 16-bit floats: branch-free conversions (the compiler vectorises loops over them) ----
// They round exactly like kiln's f32_to_f16_bits / f64_to_bf16_bits (nearest even, canonical
// quiet NaN keeping the sign), which the tests check over every f16 and many f32 values.

inline float half_bits_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t magnitude = h & 0x7fffu;
  uint32_t normal = (magnitude << 13) + 0x38000000u;        // rebias 15 -> 127
  if (magnitude >= 0x7c00u) normal += 0x38000000u;         // inf/NaN: exponent all ones
  float subnormal = float(magnitude) * 0x1p-24f;           // exact for magnitude < 1024
  uint32_t bits = magnitude < 0x400u ? std::bit_cast<uint32_t>(subnormal) : normal;
  return std::bit_cast<float>(bits | sign);
}

inline uint16_t float_to_half_bits(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  // Normal results: drop 13 mantissa bits with round-to-nearest-even; a carry moves into the
  // exponent correctly.
  uint32_t normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
  // Subnormal results: adding 0.5 puts the value's 2^-24 quantum at the last mantissa bit, so
  // the FPU's own nearest-even rounding does the work.
  uint32_t subnormal =
      std::bit_cast<uint32_t>(std::bit_cast<float>(a) + 0.5f) - 0x3f000000u;
  uint32_t h = a < 0x38800000u ? subnormal : normal;
  if (a >= 0x477ff000u) h = 0x7c00u;  // rounds to >= 65536: infinity
  if (a > 0x7f800000u) h = 0x7e00u;   // NaN
  return uint16_t(h | sign);
}

inline float bf16_bits_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

// Element types the float path computes in: float for the 16-bit floats, the type itself else.
template <typename T> struct ComputeType { using type = T; };
template <> struct ComputeType<Half> { using type = float; };
template <> struct ComputeType<BFloat16> { using type = float; };
template <typename T> using compute_t = typename ComputeType<T>::type;

template <typename T> inline constexpr bool is_half_like_v =
    std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

inline float to_float(Half h) { return half_bits_to_float(h.bits); }
inline float to_float(BFloat16 h) { return bf16_bits_to_float(h.bits); }
template <typename T> inline T from_float(float f) {
  if constexpr (std::is_same_v<T, Half>) return Half::from_bits(float_to_half_bits(f));
  else return BFloat16::from_bits(float_to_bf16_bits(f));
}

// dispatch_dtype for the eager kernels: calls fn(T{}) for the dtypes they compute natively and
// returns kNotHandled (the reference kernel runs) for u64 and the 8- and 4-bit types, whose
// order, wrapping and rounding differ from any C++ arithmetic type.
template <typename Fn> Ran dispatch_eager(DType t, Fn&& fn) {
  switch (t) {
    case DType::F32: return fn(float{});
    case DType::F64: return fn(double{});
    case DType::F16: return fn(Half{});
    case DType::BF16: return fn(BFloat16{});
    case DType::I8: return fn(int8_t{});
    case DType::I16: return fn(int16_t{});
    case DType::I32: return fn(int32_t{});
    case DType::I64: return fn(int64_t{});
    case DType::U8: return fn(uint8_t{});
    case DType::U16: return fn(uint16_t{});
    case DType::U32: return fn(uint32_t{});
    case DType::Bool: return fn(bool{});
    default: return Ran::kNotHandled;
  }
}

// Block size for 16-bit floats converted to float scratch buffers on the stack.
inline constexpr int64_t kConvertBlock = 512;

template <typename T> void load_as_float(const T* src, int64_t n, float* dst) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = to_float(src[i]);
}
template <typename T> void store_from_float(const float* src, int64_t n, T* dst) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = from_float<T>(src[i]);
}

// ---- broadcasting ----

// Operands numpy-broadcast to an output shape, with dims collapsed as far as the operands allow:
// the output is walked as rows of `inner` elements; in each row operand k advances by
// inner_stride[k] (1, or 0 when broadcast along the row). Row r's start offsets come from its
// coordinates in outer_shape times outer_strides.
struct BroadcastPlan {
  std::vector<int64_t> outer_shape;
  std::vector<std::vector<int64_t>> outer_strides;  // [operand][dim]
  std::vector<int64_t> inner_stride;                // [operand]: 0 or 1
  int64_t inner = 1;
  int64_t rows = 1;
};
BroadcastPlan make_broadcast_plan(const std::vector<std::vector<int64_t>>& in_shapes,
                                  const std::vector<int64_t>& out_shape);

// Walks rows [begin, end) of a plan: calls row_fn(row, offsets) with offsets[k] the element offset
// of operand k at the start of the row. Coordinates advance incrementally (no divisions per row).
template <int N, typename RowFn>
void for_each_row(const BroadcastPlan& plan, int64_t begin, int64_t end, RowFn&& row_fn) {
  int rank = int(plan.outer_shape.size());
  std::vector<int64_t> coord(size_t(rank), 0);
  int64_t offsets[N] = {};
  int64_t rest = begin;
  for (int d = rank - 1; d >= 0; --d) {
    coord[size_t(d)] = rest % plan.outer_shape[size_t(d)];
    rest /= plan.outer_shape[size_t(d)];
    for (int k = 0; k < N; ++k) offsets[k] += coord[size_t(d)] * plan.outer_strides[size_t(k)][size_t(d)];
  }
  for (int64_t row = begin; row < end; ++row) {
    row_fn(row, offsets);
    for (int d = rank - 1; d >= 0; --d) {  // odometer increment
      for (int k = 0; k < N; ++k) offsets[k] += plan.outer_strides[size_t(k)][size_t(d)];
      if (++coord[size_t(d)] < plan.outer_shape[size_t(d)]) break;
      for (int k = 0; k < N; ++k)
        offsets[k] -= plan.outer_shape[size_t(d)] * plan.outer_strides[size_t(k)][size_t(d)];
      coord[size_t(d)] = 0;
    }
  }
}

// Unsigned type of the same width, for bit copies that do not care about the element type.
template <int Bytes> struct BitsOf;
template <> struct BitsOf<1> { using type = uint8_t; };
template <> struct BitsOf<2> { using type = uint16_t; };
template <> struct BitsOf<4> { using type = uint32_t; };
template <> struct BitsOf<8> { using type = uint64_t; };

// Calls fn(B{}) with B the unsigned integer type as wide as `dtype`.
template <typename Fn> decltype(auto) dispatch_bits(DType dtype, Fn&& fn) {
  switch (dtype_size(dtype)) {
    case 1: return fn(uint8_t{});
    case 2: return fn(uint16_t{});
    case 4: return fn(uint32_t{});
    default: return fn(uint64_t{});
  }
}

}  // namespace kiln::eager::detail
