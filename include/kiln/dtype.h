// Element types Kiln tensors can hold. Why: every stage (IR, interpreter, kernels, codegen) must
// agree on the same small closed set, its sizes and its conversions, including the 16-bit floats.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

// X-macro: enum name, text name, size in bytes, is_float, is_signed_int
#define KILN_DTYPES(X)                 \
  X(F32, "f32", 4, true, false)        \
  X(F64, "f64", 8, true, false)        \
  X(F16, "f16", 2, true, false)        \
  X(BF16, "bf16", 2, true, false)      \
  X(I8, "i8", 1, false, true)          \
  X(I16, "i16", 2, false, true)        \
  X(I32, "i32", 4, false, true)        \
  X(I64, "i64", 8, false, true)        \
  X(U8, "u8", 1, false, false)         \
  X(U16, "u16", 2, false, false)       \
  X(U32, "u32", 4, false, false)       \
  X(Bool, "bool", 1, false, false)

enum class DType : uint8_t {
#define KILN_X(e, s, n, f, si) e,
  KILN_DTYPES(KILN_X)
#undef KILN_X
};

inline constexpr int kNumDTypes = 12;

std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view s);
int dtype_size(DType t);
bool is_float(DType t);
inline bool is_integer(DType t) { return !is_float(t) && t != DType::Bool; }
bool is_signed_int(DType t);

// ---- 16-bit float conversions (round to nearest, ties to even; NaN stays NaN) ----
uint16_t f32_to_f16_bits(float f);
float f16_bits_to_f32(uint16_t h);
uint16_t f32_to_bf16_bits(float f);
inline float bf16_bits_to_f32(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Correct rounding straight from double (avoids double rounding through f32).
uint16_t f64_to_f16_bits(double d);
uint16_t f64_to_bf16_bits(double d);

// Storage types for the 16-bit floats, usable as element types in kernels.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float f) : bits(f32_to_f16_bits(f)) {}
  operator float() const { return f16_bits_to_f32(bits); }
  static Half from_bits(uint16_t b) { Half h; h.bits = b; return h; }
};
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) : bits(f32_to_bf16_bits(f)) {}
  operator float() const { return bf16_bits_to_f32(bits); }
  static BFloat16 from_bits(uint16_t b) { BFloat16 h; h.bits = b; return h; }
};

// C++ element type for each DType, and the dispatch helper used by kernels.
template <DType D> struct CType;
template <> struct CType<DType::F32> { using type = float; };
template <> struct CType<DType::F64> { using type = double; };
template <> struct CType<DType::F16> { using type = Half; };
template <> struct CType<DType::BF16> { using type = BFloat16; };
template <> struct CType<DType::I8> { using type = int8_t; };
template <> struct CType<DType::I16> { using type = int16_t; };
template <> struct CType<DType::I32> { using type = int32_t; };
template <> struct CType<DType::I64> { using type = int64_t; };
template <> struct CType<DType::U8> { using type = uint8_t; };
template <> struct CType<DType::U16> { using type = uint16_t; };
template <> struct CType<DType::U32> { using type = uint32_t; };
template <> struct CType<DType::Bool> { using type = bool; };

// Calls fn(T{}) with T the C++ element type of `t`.
template <typename Fn> decltype(auto) dispatch_dtype(DType t, Fn&& fn) {
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
  }
  __builtin_unreachable();
}

}  // namespace kiln
