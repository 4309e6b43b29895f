// Reference kernels for source ops (constant, arange, full, random) and shape_of. Why: random ops
// use the counter-based generator in kiln/random.h so every backend can reproduce them bit for bit.
#include <cstring>

#include "interp/ref_kernels.h"
#include "kiln/error.h"
#include "kiln/random.h"

namespace kiln::interp {

void ref_Constant(const KernelArgs& a) {
  const HostTensor& value = a.attrs.get_tensor("value");
  HostTensor& out = a.out[0];
  KILN_ASSERT(value.dtype() == out.dtype() && value.numel() == out.numel());
  if (value.nbytes()) std::memcpy(out.raw(), value.raw(), value.nbytes());
  if (value.dtype() == DType::Str)
    for (int64_t i = 0; i < value.numel(); ++i) out.set_str(i, value.str_at(i));
}

// Element i = start + i*step, computed in double and converted to the dtype (ints truncate).
void ref_Arange(const KernelArgs& a) {
  double start = a.attrs.get_float("start"), step = a.attrs.get_float("step");
  for (int64_t i = 0; i < a.out[0].numel(); ++i) a.out[0].set_f64(i, start + double(i) * step);
}

void ref_Full(const KernelArgs& a) {
  double value = a.attrs.get_float("value");
  for (int64_t i = 0; i < a.out[0].numel(); ++i) a.out[0].set_f64(i, value);
}

// Element i = low + (high - low) * u(seed, i), rounded to the dtype.
void ref_RandomUniform(const KernelArgs& a) {
  double low = a.attrs.get_float("low"), high = a.attrs.get_float("high");
  uint64_t seed = uint64_t(a.attrs.get_int("seed"));
  for (int64_t i = 0; i < a.out[0].numel(); ++i)
    a.out[0].set_f64(i, low + (high - low) * random_uniform01(seed, uint64_t(i)));
}

// Element i = mean + std * n(seed, i), rounded to the dtype.
void ref_RandomNormal(const KernelArgs& a) {
  double mean = a.attrs.get_float("mean"), std_dev = a.attrs.get_float("std");
  uint64_t seed = uint64_t(a.attrs.get_int("seed"));
  for (int64_t i = 0; i < a.out[0].numel(); ++i)
    a.out[0].set_f64(i, mean + std_dev * random_normal01(seed, uint64_t(i)));
}

void ref_ShapeOf(const KernelArgs& a) {
  const auto& dims = a.in[0].shape();
  for (size_t d = 0; d < dims.size(); ++d) a.out[0].set_i64(int64_t(d), dims[d]);
}

}  // namespace kiln::interp
