// oneDNN pooling primitives (see onednn_pool.h). The destination is created with format `any`, so
// it takes the source's (blocked) layout. ceil_mode's larger output is oneDNN's formula with a
// larger right/bottom padding, which max pooling ignores and exclude-padding averages do not count.
// oneDNN's max drops NaN (vmaxps keeps one operand); Kiln's max pool propagates it, so a max pool
// scans its source (all_finite, one vectorised read) and, only when it is not all finite, writes
// NaN into every output whose window holds one.
#include "kernels/cpu/onednn_pool.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <vector>

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

// Whether a dense buffer of `count` f32 or bf16 values holds a NaN (blocked padding is zeros).
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
};

PreparedPool::PreparedPool(const PoolSpec& spec, const BlockedIo* source_like) : s_(std::make_unique<State>()) {
  KILN_CHECK(supports(spec), "oneDNN pool: unsupported spec");
  State& s = *s_;
  s.spec = spec;
  const auto dt = data_type_of(spec.dtype);
  const memory::dims xd{spec.x[0], spec.x[1], spec.x[2], spec.x[3]}, yd{spec.y[0], spec.y[1], spec.y[2], spec.y[3]};
  const memory::desc x_plain(xd, dt, tag::nchw), y_plain(yd, dt, tag::nchw);
  memory::desc x_desc = x_plain;
  if (source_like) {
    const memory::desc like = io_of(*source_like).y_mem.get_desc();
    if (like.dims() == xd && like.data_type() == dt) x_desc = like;
  }
  const dnnl::algorithm alg = spec.max ? dnnl::algorithm::pooling_max
                              : spec.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                                       : dnnl::algorithm::pooling_avg_exclude_padding;
  try {
    dnnl::pooling_v2_forward::desc desc(
        dnnl::prop_kind::forward_inference, alg, x_desc, memory::desc(yd, dt, tag::any),
        {spec.strides[0], spec.strides[1]}, {spec.kernel[0], spec.kernel[1]},
        {spec.dilations[0] - 1, spec.dilations[1] - 1}, {spec.pads[0], spec.pads[1]},
        {effective_pad_end(spec, 0), effective_pad_end(spec, 1)});
    s.pd = dnnl::pooling_v2_forward::primitive_desc(desc, cpu_engine());
    s.prim = dnnl::pooling_v2_forward(s.pd);
  } catch (const dnnl::error& e) {
    throw Error(str("oneDNN has no pooling for this shape: ", e.what()));
  }
  io_->init(x_plain, y_plain, s.pd.src_desc(), s.pd.dst_desc());
}

PreparedPool::~PreparedPool() = default;

std::string PreparedPool::implementation() const { return s_->pd.impl_info_str(); }

void PreparedPool::run(const void* x, void* y) {
  State& s = *s_;
  io_->begin(s.stream, x, y);
  s.prim.execute(s.stream, {{DNNL_ARG_SRC, io_->x_mem}, {DNNL_ARG_DST, io_->y_mem}});
  io_->end(s.stream);
  s.stream.wait();
  const PoolSpec& p = s.spec;
  if (!p.max) return;
  const size_t elem = p.dtype == DType::F32 ? 4 : 2;
  // all_finite: an infinity also sends the run here, where only NaN windows are rewritten.
  if (all_finite(io_->x_mem.get_data_handle(), int64_t(io_->x_mem.get_desc().get_size() / elem), p.dtype)) return;
  // Rare: put NaN back. Plain copies of the source and result (reordered from blocked ones).
  std::vector<float> xs(size_t(p.x[0] * p.x[1] * p.x[2] * p.x[3])), ys(size_t(p.y[0] * p.y[1] * p.y[2] * p.y[3]));
  auto to_plain_f32 = [&](const dnnl::memory& m, const dnnl::memory::desc& plain, std::vector<float>& out) {
    const memory::desc f32_desc(plain.dims(), memory::data_type::f32, tag::nchw);
    dnnl::memory dst(f32_desc, cpu_engine(), out.data());
    dnnl::reorder(m, dst).execute(s.stream, const_cast<dnnl::memory&>(m), dst);
    s.stream.wait();
  };
  to_plain_f32(io_->x_mem, io_->x_plain, xs);
  to_plain_f32(io_->y_mem, io_->y_plain, ys);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t nc = 0; nc < p.y[0] * p.y[1]; ++nc)
    for (int64_t oy = 0; oy < p.y[2]; ++oy)
      for (int64_t ox = 0; ox < p.y[3]; ++ox) {
        bool found = false;
        for (int64_t ky = 0; ky < p.kernel[0] && !found; ++ky)
          for (int64_t kx = 0; kx < p.kernel[1] && !found; ++kx) {
            const int64_t iy = oy * p.strides[0] - p.pads[0] + ky * p.dilations[0];
            const int64_t ix = ox * p.strides[1] - p.pads[1] + kx * p.dilations[1];
            if (iy < 0 || ix < 0 || iy >= p.x[2] || ix >= p.x[3]) continue;
            const float v = xs[size_t((nc * p.x[2] + iy) * p.x[3] + ix)];
            found = v != v;
          }
        if (found) ys[size_t((nc * p.y[2] + oy) * p.y[3] + ox)] = nan;
      }
  // Back into the result's own layout (blocked or plain) and, unless kept blocked, the plain y.
  const memory::desc f32_plain(io_->y_plain.dims(), memory::data_type::f32, tag::nchw);
  dnnl::memory fixed(f32_plain, cpu_engine(), ys.data());
  dnnl::reorder(fixed, io_->y_mem).execute(s.stream, fixed, io_->y_mem);
  if (!io_->y_kept && !(io_->y_mem == io_->y_user)) io_->y_out.execute(s.stream, io_->y_mem, io_->y_user);
  s.stream.wait();
}

}  // namespace kiln::eager::onednn
