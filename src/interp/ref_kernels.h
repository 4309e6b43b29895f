// Reference kernels, one per row of ops.def, plus the small index helpers they share. Why: the
// declarations are generated from the op table, so an op without a reference kernel is a link
// error rather than a silent gap in the oracle.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/host_tensor.h"
#include "kiln/interp.h"
#include "kiln/ops.h"

namespace kiln::interp {

// ref_<Enum>(args) for every op. `args.out` is pre-allocated from the node's output types with the
// symbols bound; a kernel fills it and throws kiln::Error for bad data (index out of range, integer
// division by zero). The interpreter prefixes such messages with the node's name.
#define OP(e, ...) void ref_##e(const KernelArgs& a);
#include "ir/ops.def"
#undef OP

// ---- helpers shared by the kernel families (ref_common.cc) ----

// Maps an output linear index to the linear index of an input that numpy-broadcasts to the output
// shape (dims aligned from the right; size-1 and missing dims repeat).
class BroadcastIndex {
 public:
  BroadcastIndex(const std::vector<int64_t>& in_shape, const std::vector<int64_t>& out_shape);
  int64_t operator()(int64_t out_index) const;

 private:
  std::vector<int64_t> out_shape_;
  std::vector<int64_t> in_strides_;  // per output dim; 0 where the input is broadcast
};

// Row-major coordinates of a linear index, and back.
std::vector<int64_t> unravel_index(int64_t index, const std::vector<int64_t>& shape);
int64_t ravel_index(const std::vector<int64_t>& coords, const std::vector<int64_t>& shape);

// Normalises a possibly negative axis; throws kiln::Error naming `what` when out of range.
int normalize_axis(int64_t axis, int rank, const char* what = "axis");

// Copies one element bit-exactly between tensors of the same dtype.
void copy_element(const HostTensor& src, int64_t src_index, HostTensor& dst, int64_t dst_index);

// Splits a shape around `axis` into (outer, dim, inner) extents.
void split_at_axis(const std::vector<int64_t>& shape, int axis, int64_t& outer, int64_t& dim, int64_t& inner);

// The positions 0..dim-1 of one line of x (element s at x[base + s * stride]) in sorted order:
// largest first (or smallest first), ties by the lower position, NaN as the largest value, -0 equal
// to +0, integers compared exactly. Shared by topk and sort.
std::vector<int64_t> sorted_positions(const HostTensor& x, int64_t base, int64_t stride, int64_t dim, bool largest);

// Floats compute in double; everything else (ints, bool) in int64.
inline bool computes_in_double(DType t) { return is_float(t); }

// Integer arithmetic that wraps like two's complement instead of overflowing (signed overflow is
// undefined in C++); results are then narrowed to the dtype by set_i64, which wraps too.
inline int64_t wrapping_add(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }
inline int64_t wrapping_sub(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }
inline int64_t wrapping_mul(int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); }

}  // namespace kiln::interp
