// oneDNN pooling primitives (see onednn_pool.h). The destination is created with format `any`, so
// it takes the source's (blocked) layout. ceil_mode's larger output is oneDNN's formula with a
// larger right/bottom padding, which max pooling ignores and exclude-padding averages do not count.
// Max pooling runs Kiln's own loop over the same layouts (max_pool_blocked below): oneDNN 2.6's
// JIT max pool drops NaN (vmaxps keeps one operand; Kiln's max pool propagates it), and on AVX2 it
// took 410 us for SqueezeNet's first pool where a loop over the 8-channel blocks takes ~110.
#include "kernels/cpu/onednn_pool.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/max_pool_block16.h"
#include "kernels/cpu/onednn_common.h"
#include "kiln/error.h"

namespace kiln::eager::onednn {

using dnnl::memory;
using tag = memory::format_tag;

namespace {

// The right/bottom padding that makes oneDNN's output size (floor) the spec's: dim 0 = H, 1 = W.
int64_t effective_pad_end(const PoolSpec& s, int d) {
  const int64_t span = (s.kernel[d] - 1) * s.dilations[d] + 1;
  return (s.y[2 + d] - 1) * s.strides[d] + span - s.x[2 + d] - s.pads[d];
}

// Four lanes of f32 (GCC vector extensions: one SSE register, which every x86-64 build has; wider
// generic vectors are lowered lane by lane without AVX).
typedef float Lanes __attribute__((vector_size(16)));
typedef int32_t LaneMask __attribute__((vector_size(16)));

Lanes load4(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
Lanes load4(const uint16_t* p) {  // bf16 -> f32: the bits moved up
  typedef uint32_t Bits __attribute__((vector_size(16)));
  Bits b = {p[0], p[1], p[2], p[3]};
  b <<= 16;
  Lanes v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}
void store4(float* p, Lanes v) { std::memcpy(p, &v, sizeof v); }
void store4(uint16_t* p, Lanes v) {  // exact: every lane is one of the bf16 inputs, or -inf
  uint32_t b[4];
  std::memcpy(b, &v, sizeof b);
  for (int i = 0; i < 4; ++i) p[i] = uint16_t(b[i] >> 16);
}
float load1(const float* p) { return *p; }
float load1(const uint16_t* p) { return detail::bf16_bits_to_float(*p); }
void store1(float* p, float v) { *p = v; }
void store1(uint16_t* p, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  *p = uint16_t(bits >> 16);
}

// y = max over each window, NaN when the window holds one (as the reference); -inf never escapes,
// as every window starts inside the input (supports()). The lanes of a channel block (B = 8 or 16)
// are independent and run as vectors; a plain layout (B = 1) walks one channel at a time.
template <int B, typename T>
__attribute__((target_clones("avx2", "default"))) void max_pool_rows(const PoolSpec& p, const Geometry& gx, const Geometry& gy, const T* x, T* y, int64_t begin,
                   int64_t end) {
  const int64_t blocks = (p.y[1] + B - 1) / B, OH = p.y[2], OW = p.y[3];
  constexpr int V = B >= 4 ? B / 4 : 1;  // vectors per block
  for (int64_t row = begin; row < end; ++row) {
    const int64_t oy = row % OH, nb = row / OH, n = nb / blocks, cb = nb % blocks;
    const T* xplane = x + n * gx.stride[0] + cb * gx.stride[1];
    T* yrow = y + n * gy.stride[0] + cb * gy.stride[1] + oy * gy.stride[2];
    const int64_t y0 = oy * p.strides[0] - p.pads[0];
    int64_t ky0, ky1;  // the window's rows inside the input
    pool_taps_inside(y0, p.kernel[0], p.dilations[0], p.x[2], ky0, ky1);
    for (int64_t ox = 0; ox < OW; ++ox) {
      const int64_t x0 = ox * p.strides[1] - p.pads[1];
      int64_t kx0, kx1;
      pool_taps_inside(x0, p.kernel[1], p.dilations[1], p.x[3], kx0, kx1);
      T* out = yrow + ox * gy.stride[3];
      if constexpr (B == 1) {
        float acc = -std::numeric_limits<float>::infinity();
        for (int64_t ky = ky0; ky < ky1; ++ky)
          for (int64_t kx = kx0; kx < kx1; ++kx) {
            const float e = load1(xplane + (y0 + ky * p.dilations[0]) * gx.stride[2] + (x0 + kx * p.dilations[1]) * gx.stride[3]);
            acc = (e > acc || e != e) ? e : acc;
          }
        store1(out, acc);
      } else {
        Lanes acc[V];
        for (int v = 0; v < V; ++v) acc[v] = Lanes{} - std::numeric_limits<float>::infinity();
        for (int64_t ky = ky0; ky < ky1; ++ky) {
          const T* src_row = xplane + (y0 + ky * p.dilations[0]) * gx.stride[2];
          for (int64_t kx = kx0; kx < kx1; ++kx) {
            const T* src = src_row + (x0 + kx * p.dilations[1]) * B;
            for (int v = 0; v < V; ++v) {
              const Lanes e = load4(src + 4 * v);
              const LaneMask take = (e > acc[v]) | (e != e);  // a NaN, once in, stays
              // A bitwise select (SSE2 has no blend; GCC lowers `take ? e : acc` to branches).
              acc[v] = Lanes((LaneMask(e) & take) | (LaneMask(acc[v]) & ~take));
            }
          }
        }
        for (int v = 0; v < V; ++v) store4(out + 4 * v, acc[v]);
      }
    }
  }
}

// y = max over each window, NaN when the window holds one (as the reference); -inf never escapes,
// as every window starts inside the input (supports()). The lanes of a channel block (B = 8 or 16)
// are independent and run as vectors; a plain layout (B = 1) walks one channel at a time.
template <int B, typename T>
void max_pool_blocked(const PoolSpec& p, const Geometry& gx, const Geometry& gy, const T* x, T* y) {
  const int64_t rows = p.y[0] * ((p.y[1] + B - 1) / B) * p.y[2];
  const bool avx512 = B == 16 && max_pool_block16_available();
  detail::parallel_ranges(rows, p.y[3] * p.kernel[0] * p.kernel[1] * B, [&](int64_t begin, int64_t end) {
    if (avx512) max_pool_block16_rows(p, gx, gy, x, y, begin, end);
    else max_pool_rows<B>(p, gx, gy, x, y, begin, end);
  });
}

// The same over a channels-last layout (nhwc: the channels of a pixel adjacent, oneDNN's choice for
// its AVX-512 convs): one output row (n, oy) at a time, every window element read as a run of
// channels, four lanes per vector; walking one channel at a time there strides by C per element.
template <typename T>
__attribute__((target_clones("avx2", "default"))) void max_pool_channels_last_rows(
    const PoolSpec& p, const Geometry& gx, const Geometry& gy, const T* x, T* y, int64_t begin, int64_t end) {
  const int64_t C = p.y[1], OH = p.y[2], OW = p.y[3], vec_c = C / 4 * 4;
  for (int64_t row = begin; row < end; ++row) {
    const int64_t oy = row % OH, n = row / OH;
    const T* ximage = x + n * gx.stride[0];
    const int64_t y0 = oy * p.strides[0] - p.pads[0];
    int64_t ky0, ky1;  // the window's rows inside the input
    pool_taps_inside(y0, p.kernel[0], p.dilations[0], p.x[2], ky0, ky1);
    for (int64_t ox = 0; ox < OW; ++ox) {
      const int64_t x0 = ox * p.strides[1] - p.pads[1];
      int64_t kx0, kx1;
      pool_taps_inside(x0, p.kernel[1], p.dilations[1], p.x[3], kx0, kx1);
      T* out = y + n * gy.stride[0] + oy * gy.stride[2] + ox * gy.stride[3];
      for (int64_t c = 0; c < vec_c; c += 4) {
        Lanes acc = Lanes{} - std::numeric_limits<float>::infinity();
        for (int64_t ky = ky0; ky < ky1; ++ky)
          for (int64_t kx = kx0; kx < kx1; ++kx) {
            const Lanes e = load4(ximage + (y0 + ky * p.dilations[0]) * gx.stride[2] +
                                  (x0 + kx * p.dilations[1]) * gx.stride[3] + c);
            const LaneMask take = (e > acc) | (e != e);  // a NaN, once in, stays
            acc = Lanes((LaneMask(e) & take) | (LaneMask(acc) & ~take));
          }
        store4(out + c, acc);
      }
      for (int64_t c = vec_c; c < C; ++c) {
        float acc = -std::numeric_limits<float>::infinity();
        for (int64_t ky = ky0; ky < ky1; ++ky)
          for (int64_t kx = kx0; kx < kx1; ++kx) {
            const float e = load1(ximage + (y0 + ky * p.dilations[0]) * gx.stride[2] +
                                  (x0 + kx * p.dilations[1]) * gx.stride[3] + c);
            acc = (e > acc || e != e) ? e : acc;
          }
        store1(out + c, acc);
      }
    }
  }
}

template <typename T>
void max_pool_any(const PoolSpec& p, const Geometry& gx, const Geometry& gy, const T* x, T* y) {
  if (gx.block == 1 && gx.stride[1] == 1 && gy.stride[1] == 1) {  // channels last
    detail::parallel_ranges(p.y[0] * p.y[2], p.y[3] * p.kernel[0] * p.kernel[1] * p.y[1],
                            [&](int64_t begin, int64_t end) { max_pool_channels_last_rows(p, gx, gy, x, y, begin, end); });
    return;
  }
  if (gx.block == 16) max_pool_blocked<16>(p, gx, gy, x, y);
  else if (gx.block == 8) max_pool_blocked<8>(p, gx, gy, x, y);
  else max_pool_blocked<1>(p, gx, gy, x, y);
}
}  // namespace

bool supports(const PoolSpec& s) {
  if (!supports_dtype(s.dtype)) return false;
  for (int i = 0; i < 4; ++i)
    if (s.x[i] <= 0 || s.y[i] <= 0) return false;
  if (s.x[0] != s.y[0] || s.x[1] != s.y[1]) return false;
  for (int d = 0; d < 2; ++d) {
    if (s.kernel[d] < 1 || s.strides[d] < 1 || s.dilations[d] < 1) return false;
    const int64_t end = effective_pad_end(s, d);
    if (end < 0) return false;
    if (!s.max && s.count_include_pad && end > s.pads[2 + d]) return false;  // ceil_mode's border counted
    if (!s.max && s.dilations[d] != 1) return false;
    // every window must start inside the padded input (oneDNN's formula assumes it)
    if ((s.y[2 + d] - 1) * s.strides[d] >= s.x[2 + d] + s.pads[d] + std::max(end, s.pads[2 + d])) return false;
  }
  return true;
}

struct PreparedPool::State {
  PoolSpec spec;
  dnnl::pooling_v2_forward::primitive_desc pd;
  dnnl::pooling_v2_forward prim;
  dnnl::stream stream{cpu_engine()};
  std::optional<Geometry> gx, gy;  // max pools: the layouts Kiln's loop walks
};

PreparedPool::PreparedPool(const PoolSpec& spec, const BlockedIo* source_like) : s_(std::make_unique<State>()) {
  KILN_CHECK(supports(spec), "oneDNN pool: unsupported spec");
  State& s = *s_;
  s.spec = spec;
  const auto dt = data_type_of(spec.dtype);
  const memory::dims xd{spec.x[0], spec.x[1], spec.x[2], spec.x[3]}, yd{spec.y[0], spec.y[1], spec.y[2], spec.y[3]};
  const memory::desc x_plain(xd, dt, tag::nchw), y_plain(yd, dt, tag::nchw);
  // The source's layout: the producer's blocked one when it may hand it over; else, since oneDNN's
  // only NCHW pool is a slow reference loop (4 ms for SqueezeNet's 128x55x55 max pool, 20x the
  // blocked JIT kernel), the first blocked layout with a JIT kernel, the plain source reordered in.
  std::vector<memory::desc> candidates;
  bool producers = false;
  if (source_like) {
    const memory::desc like = io_of(*source_like).y_mem.get_desc();
    if (like.dims() == xd && like.data_type() == dt) candidates.push_back(like), producers = true;
  }
  if (!producers)
    for (tag t : {tag::nChw16c, tag::nChw8c}) candidates.emplace_back(xd, dt, t);
  candidates.push_back(x_plain);
  const dnnl::algorithm alg = spec.max ? dnnl::algorithm::pooling_max
                              : spec.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                                       : dnnl::algorithm::pooling_avg_exclude_padding;
  std::string refusal;
  for (const memory::desc& x_desc : candidates) {
    try {
      dnnl::pooling_v2_forward::desc desc(
          dnnl::prop_kind::forward_inference, alg, x_desc, memory::desc(yd, dt, tag::any),
          {spec.strides[0], spec.strides[1]}, {spec.kernel[0], spec.kernel[1]},
          {spec.dilations[0] - 1, spec.dilations[1] - 1}, {spec.pads[0], spec.pads[1]},
          {effective_pad_end(spec, 0), effective_pad_end(spec, 1)});
      dnnl::pooling_v2_forward::primitive_desc pd(desc, cpu_engine());
      // A layout of our choosing is taken only with a JIT kernel; the producer's or NCHW always.
      const bool chosen = !(x_desc == x_plain) && !(producers && x_desc == candidates.front());
      if (chosen && std::string(pd.impl_info_str()).find("jit") == std::string::npos) continue;
      s.pd = pd;
      break;
    } catch (const dnnl::error& e) {
      refusal = e.what();
    }
  }
  if (!s.pd) throw Error(str("oneDNN has no pooling for this shape: ", refusal));
  s.prim = dnnl::pooling_v2_forward(s.pd);
  if (spec.max) {
    s.gx = geometry_of(s.pd.src_desc());
    s.gy = geometry_of(s.pd.dst_desc());
    if (!s.gx || !s.gy || s.gx->block != s.gy->block || (s.gx->block != 1 && s.gx->block != 8 && s.gx->block != 16) ||
        (s.gx->block > 1 && (s.gx->stride[3] != s.gx->block || s.gy->stride[3] != s.gy->block)))
      throw Error("oneDNN pool: the max pool's layouts are not plain or channel-blocked");
  }
  io_->init(x_plain, y_plain, s.pd.src_desc(), s.pd.dst_desc());
}

PreparedPool::~PreparedPool() = default;

std::string PreparedPool::implementation() const { return s_->pd.impl_info_str(); }

void PreparedPool::run(const void* x, void* y) {
  State& s = *s_;
  io_->begin(s.stream, x, y);
  if (s.spec.max) {
    s.stream.wait();
    if (s.spec.dtype == DType::F32)
      max_pool_any(s.spec, *s.gx, *s.gy, static_cast<const float*>(io_->x_mem.get_data_handle()),
                       static_cast<float*>(io_->y_mem.get_data_handle()));
    else
      max_pool_any(s.spec, *s.gx, *s.gy, static_cast<const uint16_t*>(io_->x_mem.get_data_handle()),
                       static_cast<uint16_t*>(io_->y_mem.get_data_handle()));
  } else {
    s.prim.execute(s.stream, {{DNNL_ARG_SRC, io_->x_mem}, {DNNL_ARG_DST, io_->y_mem}});
  }
  io_->end(s.stream);
  s.stream.wait();
}

}  // namespace kiln::eager::onednn
