// Conversions between numpy arrays (the one array type the extension sees: the Python layer turns
// torch tensors into numpy views first) and kiln::HostTensor. Why: inputs must reach compiled code
// without a copy, and outputs must leave it without one, in one place that knows both sides.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <string>
#include <vector>

#include "kiln/host_tensor.h"

namespace kiln::py {

namespace nb = nanobind;

// A read-only, C-contiguous array in CPU memory, of any dtype.
using InArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

// The Kiln dtype named `name` ("f32", "bf16", ...); throws kiln::Error naming `what` otherwise.
DType dtype_named(const std::string& name, const std::string& what);

// `a`'s memory as a HostTensor of `dtype`, without a copy. `a`'s item size must be dtype's (bf16
// arrives as 16-bit integers). The tensor does not own the memory: the caller keeps `a` alive
// while the tensor is used. Throws kiln::Error naming `what` on a size mismatch.
HostTensor borrow_array(const InArray& a, DType dtype, const std::string& what);

// A copy of `a` owned by the tensor (for constants the graph keeps).
HostTensor copy_array(const InArray& a, DType dtype, const std::string& what);

// A numpy array over `t`'s memory (no copy; the array keeps the tensor's storage alive). bf16 and
// f16 arrive as uint16 / float16; the Python layer reinterprets bf16. Narrow and string dtypes
// are refused with kiln::Error.
nb::object array_of(HostTensor t);

// Tensors whose memory lies inside one of `inputs` are copied (a compiled graph may return a view
// of its input; the caller's buffer must not be shared with what we hand back).
void unalias_outputs(std::vector<HostTensor>& outputs, const std::vector<HostTensor>& inputs);

}  // namespace kiln::py
