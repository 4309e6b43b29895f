// Element types Kiln tensors can hold. Why: every stage (IR, interpreter, kernels, codegen) must
// agree on the same small closed set, its sizes and its conversions, including the 16-bit floats.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

// X-macro: enum name, text name, size in bytes, is_float, is_signed_int. `str` (ONNX STRING) has
// no bytes in the storage: HostTensor keeps its elements as std::strings beside it.
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
  X(Bool, "bool", 1, false, false)     \
  X(U64, "u64", 8, false, false)       \
  X(I4, "i4", 1, false, true)          \
  X(U4, "u4", 1, false, false)         \
  X(F8E4M3FN, "f8e4m3fn", 1, true, false)     \
  X(F8E4M3FNUZ, "f8e4m3fnuz", 1, true, false) \
  X(F8E5M2, "f8e5m2", 1, true, false)         \
  X(F8E5M2FNUZ, "f8e5m2fnuz", 1, true, false) \
  X(F4E2M1, "f4e2m1", 1, true, false)         \
  X(F8E8M0, "f8e8m0", 1, true, false)         \
  X(Str, "str", 0, false, false)

enum class DType : uint8_t {
#define KILN_X(e, s, n, f, si) e,
  KILN_DTYPES(KILN_X)
#undef KILN_X
};

inline constexpr int kNumDTypes = 22;

std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view s);
int dtype_size(DType t);
bool is_float(DType t);
inline bool is_integer(DType t) { return !is_float(t) && t != DType::Bool && t != DType::Str; }
inline bool is_string(DType t) { return t == DType::Str; }
// Thrown where numeric code is asked for the element type of a string tensor.
[[noreturn]] void throw_string_has_no_numeric_type();
bool is_signed_int(DType t);
// The 8- and 4-bit floats (f8e4m3fn, f8e4m3fnuz, f8e5m2, f8e5m2fnuz, f4e2m1, f8e8m0) and the 4-bit
// integers (i4, u4): storage formats held one element per byte, computed in float / int64.
bool is_narrow(DType t);
bool is_narrow_float(DType t);
inline bool is_4bit(DType t) { return t == DType::I4 || t == DType::U4 || t == DType::F4E2M1; }

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

// ---- 8- and 4-bit floats (ONNX FLOAT8E4M3FN/FNUZ, FLOAT8E5M2/FNUZ, FLOAT4E2M1, FLOAT8E8M0) ----
// f32 -> code, round to nearest even; values beyond the largest finite one (and infinities) give
// the format's overflow value: NaN (e4m3fn, the FNUZ types), inf (e5m2), +-6 (f4e2m1, which has
// neither). FNUZ types have no -0. NaN -> NaN (f4e2m1: +0). f8e8m0 (2^(c-127), no sign) rounds
// |x| up to a power of two; above 2^127 is NaN. Saturation is the caller's clamp (as the ONNX
// importer does). The code sits in the low bits (4-bit types: the low nibble).
uint8_t f32_to_narrow_bits(DType t, float f);
float narrow_bits_to_f32(DType t, uint8_t code);
// The largest finite value of a narrow float type.
double narrow_float_max(DType t);
// 4-bit integers: the low nibble, sign-extended for i4 (wraps like a narrowing integer cast).
inline int8_t wrap_i4(int64_t v) { return int8_t(int8_t((v & 0xf) ^ 0x8) - 8); }
inline uint8_t wrap_u4(int64_t v) { return uint8_t(v & 0xf); }

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

// Storage type for the 8- and 4-bit floats: one code per byte.
template <DType D> struct NarrowFloat {
  uint8_t bits = 0;
  NarrowFloat() = default;
  explicit NarrowFloat(float f) : bits(f32_to_narrow_bits(D, f)) {}
  operator float() const { return narrow_bits_to_f32(D, bits); }
  static NarrowFloat from_bits(uint8_t b) { NarrowFloat h; h.bits = b; return h; }
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
template <> struct CType<DType::U64> { using type = uint64_t; };
template <> struct CType<DType::I4> { using type = int8_t; };
template <> struct CType<DType::U4> { using type = uint8_t; };
template <> struct CType<DType::F8E4M3FN> { using type = NarrowFloat<DType::F8E4M3FN>; };
template <> struct CType<DType::F8E4M3FNUZ> { using type = NarrowFloat<DType::F8E4M3FNUZ>; };
template <> struct CType<DType::F8E5M2> { using type = NarrowFloat<DType::F8E5M2>; };
template <> struct CType<DType::F8E5M2FNUZ> { using type = NarrowFloat<DType::F8E5M2FNUZ>; };
template <> struct CType<DType::F4E2M1> { using type = NarrowFloat<DType::F4E2M1>; };
template <> struct CType<DType::F8E8M0> { using type = NarrowFloat<DType::F8E8M0>; };

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
    case DType::U64: return fn(uint64_t{});
    case DType::I4: return fn(int8_t{});   // values kept in [-8, 7]
    case DType::U4: return fn(uint8_t{});  // values kept in [0, 15]
    case DType::F8E4M3FN: return fn(NarrowFloat<DType::F8E4M3FN>{});
    case DType::F8E4M3FNUZ: return fn(NarrowFloat<DType::F8E4M3FNUZ>{});
    case DType::F8E5M2: return fn(NarrowFloat<DType::F8E5M2>{});
    case DType::F8E5M2FNUZ: return fn(NarrowFloat<DType::F8E5M2FNUZ>{});
    case DType::F4E2M1: return fn(NarrowFloat<DType::F4E2M1>{});
    case DType::F8E8M0: return fn(NarrowFloat<DType::F8E8M0>{});
    case DType::Str: throw_string_has_no_numeric_type();
  }
  __builtin_unreachable();
}

}  // namespace kiln
