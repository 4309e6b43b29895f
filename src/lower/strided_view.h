// Strided views: a chain of index views (slice, permute, reshape, expand) that a library kernel
// taking strides reads in place. Why: the fused attention kernel's q, k and v are split from one
// projection and permuted to [B, H, T, D]; materialising those views cost a copy each (~15 us
// apiece in the GPT-2-medium block at B=8, T=1024).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "kiln/graph.h"

namespace kiln::lower {

// Where the elements of a view lie in the buffer it reads: element c of the view (c its
// coordinates) is element offset + sum_i c[i] * strides[i] of `source`'s row-major buffer.
struct StridedView {
  const Value* source = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> strides;
};

// `v` as a strided view of the first value up its chain of producers that `is_view` says is not a
// view (v itself when it is not one: row-major strides, offset 0). nullopt when a node on the way
// is not an index view, a shape on the way is not static, or the map is not affine (a reshape that
// merges dims a slice or permute left apart; checked at every corner of v's shape and along
// each axis).
std::optional<StridedView> strided_view(const Value* v, const std::function<bool(const Value*)>& is_view);

// A strided [..., H, T, D] operand as the fused attention kernel walks it: the batch dims before
// H merged into one (they must nest: each stride the next one's times its size), D contiguous.
struct BatchedRows {
  int64_t outer_stride = 0;  // elements between consecutive merged batch indices
  int64_t heads = 1;         // H, the last batch dim (1 for rank 2)
  int64_t head_stride = 0;
  int64_t row_stride = 0;    // between consecutive T
};
// nullopt unless D is contiguous and, for the kernel's 16-byte copies, the offset and every stride
// used are whole 16 bytes of `element_bytes`-byte elements.
std::optional<BatchedRows> batched_rows(const std::vector<int64_t>& shape, const StridedView& view, int element_bytes);

// A contiguous value of these (evaluated) dims as a strided view of itself: row-major strides.
StridedView row_major_view(const Value* v, const std::vector<int64_t>& dims);

}  // namespace kiln::lower
