// Max pooling over a 16-channel-blocked layout (nChw16c) with one AVX-512 register per block.
// Why: Kiln's convs hand pools nChw16c results on AVX-512 machines (onednn_conv.cc); the portable
// loop in onednn_pool.cc runs a block as four SSE vectors and was compute-bound (SqueezeNet's
// first pool: 360 us for 3 MB). NaN propagates as in the reference (a NaN, once in, stays).
#pragma once

#include <cstdint>

#include "kernels/cpu/onednn_common.h"
#include "kernels/cpu/onednn_pool.h"

namespace kiln::eager::onednn {

// The taps [k0, k1) of a pooling window starting at `origin` (taps `dilation` apart) that fall
// inside [0, extent); shared with the portable loops of onednn_pool.cc.
inline void pool_taps_inside(int64_t origin, int64_t kernel, int64_t dilation, int64_t extent, int64_t& k0,
                             int64_t& k1) {
  k0 = 0, k1 = kernel;
  while (k0 < k1 && origin + k0 * dilation < 0) ++k0;
  while (k1 > k0 && origin + (k1 - 1) * dilation >= extent) --k1;
}

// Whether this CPU runs the AVX-512 rows below.
bool max_pool_block16_available();

// Output rows [begin, end) of (image, channel block, output row), as onednn_pool.cc numbers them;
// `gx`/`gy` are the nChw16c geometries of x and y.
void max_pool_block16_rows(const PoolSpec& p, const Geometry& gx, const Geometry& gy, const float* x, float* y,
                           int64_t begin, int64_t end);
void max_pool_block16_rows(const PoolSpec& p, const Geometry& gx, const Geometry& gy, const uint16_t* x,
                           uint16_t* y, int64_t begin, int64_t end);  // bf16 bit patterns

}  // namespace kiln::eager::onednn
