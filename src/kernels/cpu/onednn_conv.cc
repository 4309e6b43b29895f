// oneDNN convolution primitives with fused post-ops (see onednn_conv.h). The primitive is created
// with format `any` for source, weights and destination, so oneDNN picks its fastest (blocked)
// layouts; Kiln's tensors are plain NCHW, so the source is reordered in and the destination out
// around the conv (a pass each, far cheaper than the conv), and constant weights are reordered once.
#include "kernels/cpu/onednn_conv.h"

#include <cstring>
#include <unordered_map>

#include "kernels/cpu/onednn_common.h"
#include "kiln/error.h"

namespace kiln::eager::onednn {

using dnnl::memory;
using tag = memory::format_tag;

namespace {

memory::dims dims4(const int64_t* d) { return {d[0], d[1], d[2], d[3]}; }

}  // namespace

bool supports(const ConvSpec& spec) {
  if (!supports_dtype(spec.dtype)) return false;
  if (spec.groups < 1 || spec.x[1] % spec.groups != 0 || spec.y[1] % spec.groups != 0) return false;
  for (int i = 0; i < 4; ++i)
    if (spec.x[i] <= 0 || spec.w[i] <= 0 || spec.y[i] <= 0) return false;
  return true;
}

struct PreparedConv::State {
  ConvSpec spec;
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward conv;
  dnnl::stream stream{cpu_engine()};
  memory::desc w_plain;
  memory w_user, bias;  // handles set per run
  memory w_mem;         // the primitive's weights layout (maybe the user's)
  std::vector<memory> channel_mems;
  dnnl::reorder w_in;   // created once, where the layouts differ
  bool weights_ready = false;
  bool weights_finite = true;        // of the constant weights
  bool gemm_over_padding = false;    // see mishandles_nonfinite
  int64_t weight_count() const { return spec.w[0] * spec.w[1] * spec.w[2] * spec.w[3]; }
};

PreparedConv::PreparedConv(const ConvSpec& spec) : s_(std::make_unique<State>()) {
  KILN_CHECK(supports(spec), "oneDNN conv: unsupported spec");
  State& s = *s_;
  s.spec = spec;
  const auto dt = data_type_of(spec.dtype);
  const dnnl::engine& eng = cpu_engine();
  memory::dims wdims = spec.groups == 1
                           ? memory::dims{spec.w[0], spec.w[1], spec.w[2], spec.w[3]}
                           : memory::dims{spec.groups, spec.w[0] / spec.groups, spec.w[1], spec.w[2], spec.w[3]};
  s.w_plain = memory::desc(wdims, dt, spec.groups == 1 ? tag::oihw : tag::goihw);
  memory::desc x_any(dims4(spec.x), dt, tag::any), y_any(dims4(spec.y), dt, tag::any), w_any(wdims, dt, tag::any);
  memory::desc bias_md({spec.y[1]}, dt, tag::x);

  memory::desc channel_md({1, spec.y[1], 1, 1}, dt, tag::nchw);
  dnnl::primitive_attr attr;
  attr.set_post_ops(make_post_ops(spec.post_ops, channel_md));
  const memory::dims strides{spec.strides[0], spec.strides[1]};
  const memory::dims dilations{spec.dilations[0] - 1, spec.dilations[1] - 1};
  const memory::dims pad_l{spec.pads[0], spec.pads[1]}, pad_r{spec.pads[2], spec.pads[3]};
  auto make_pd = [&](const memory::desc& x_md, const memory::desc& y_md) {
    auto desc = spec.has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                                dnnl::algorithm::convolution_direct, x_md, w_any,
                                                                bias_md, y_md, strides, dilations, pad_l, pad_r)
                              : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                                dnnl::algorithm::convolution_direct, x_md, w_any,
                                                                y_md, strides, dilations, pad_l, pad_r);
    return dnnl::convolution_forward::primitive_desc(desc, attr, eng);
  };
  try {
    s.pd = make_pd(x_any, y_any);
  } catch (const dnnl::error& e) {
    throw Error(str("oneDNN has no convolution for this shape: ", e.what()));
  }
  // A channel-blocked destination (nChw16c on AVX-512, nChw8c below) where oneDNN picked another
  // layout (channels-last on AVX-512) and has a JIT kernel for it. For dense convs with channels a
  // multiple of 16 it is as fast (SqueezeNet's: within 3%), and it is the layout in which a channel
  // concat of two convs is no copy at all (onednn_concat.h) and pools read whole vectors. The
  // source is blocked too (a chain of convs stays blocked; oneDNN would read 8 channels plain),
  // except an image's few channels, which oneDNN reads plain into the first conv. Depthwise convs and odd
  // channel counts run slower blocked (MobileNetV3-small: 1.5 -> 2.0 ms), hence the planner's choice.
  if (channel_blocks_wanted(spec.channel_blocked_dst)) {
    const memory::format_tag blocked = channel_block() == 16 ? tag::nChw16c : tag::nChw8c;
    const memory::desc y_md(dims4(spec.y), dt, blocked), x_md(dims4(spec.x), dt, blocked);
    // Blocked source first, then oneDNN's pick for it; the first with a JIT kernel wins.
    std::vector<memory::desc> sources{x_any};
    if (spec.x[1] > 4) sources.insert(sources.begin(), x_md);
    for (const memory::desc& x_try : sources) {
      if (s.pd.dst_desc() == y_md && (x_try == x_any || s.pd.src_desc() == x_try)) break;  // already so
      try {
        auto pd = make_pd(x_try, y_md);
        const std::string impl = pd.impl_info_str();
        if (impl.find("ref") != std::string::npos || impl.find("gemm") != std::string::npos) continue;
        s.pd = pd;
        break;
      } catch (const dnnl::error&) {
        // no primitive for these layouts: the next candidate, or oneDNN's own pick
      }
    }
  }
  s.conv = dnnl::convolution_forward(s.pd);
  io_->init(memory::desc(dims4(spec.x), dt, tag::nchw), memory::desc(dims4(spec.y), dt, tag::nchw), s.pd.src_desc(),
            s.pd.dst_desc());
  s.w_user = memory(s.w_plain, eng, DNNL_MEMORY_NONE);
  if (spec.has_bias) s.bias = memory(bias_md, eng, DNNL_MEMORY_NONE);
  s.w_mem = s.pd.weights_desc() == s.w_plain ? s.w_user : memory(s.pd.weights_desc(), eng);
  for (const PostOp& p : spec.post_ops)
    if (p.is_binary()) s.channel_mems.push_back(memory(channel_md, eng, DNNL_MEMORY_NONE));
  if (!(s.w_mem == s.w_user)) s.w_in = dnnl::reorder(s.w_user, s.w_mem);
  const bool padded = spec.pads[0] || spec.pads[1] || spec.pads[2] || spec.pads[3];
  s.gemm_over_padding = padded && implementation().find("gemm") != std::string::npos;
}

PreparedConv::~PreparedConv() = default;

std::string PreparedConv::implementation() const { return s_->pd.impl_info_str(); }

bool PreparedConv::mishandles_nonfinite() const { return s_->gemm_over_padding || s_->spec.dtype == DType::BF16; }

bool PreparedConv::sources_finite(const void* x, const void* w, const std::vector<const void*>& channel_operands,
                                  const void* sum_operand) const {
  const State& s = *s_;
  if (mishandles_nonfinite()) {  // the weights matter too
    if (!s.weights_finite) return false;
    if (!s.weights_ready && !all_finite(w, s.weight_count(), s.spec.dtype)) return false;
  }
  for (const void* c : channel_operands)
    if (!all_finite(c, s.spec.y[1], s.spec.dtype)) return false;
  return io_->sources_finite(x, sum_operand, s.spec.dtype);
}

void PreparedConv::materialize_plain_sources(const void* x, const void* sum_operand) {
  io_->materialize_plain_sources(s_->stream, x, sum_operand);
}

void PreparedConv::adopt_plain_output(const void* y) { io_->adopt_plain_output(s_->stream, y); }

void PreparedConv::set_constant_weights(const void* w) {
  State& s = *s_;
  if (s.w_mem == s.w_user) {
    s.w_mem = memory(s.w_plain, cpu_engine());  // own copy: the constant may move
    std::memcpy(s.w_mem.get_data_handle(), w, s.w_plain.get_size());
  } else {
    s.w_user.set_data_handle(const_cast<void*>(w));
    s.w_in.execute(s.stream, s.w_user, s.w_mem);
    s.stream.wait();
  }
  s.weights_finite = all_finite(w, s.weight_count(), s.spec.dtype);
  s.weights_ready = true;
}

void PreparedConv::run(const void* x, const void* w, const void* bias, const std::vector<const void*>& channel_operands,
                       const void* sum_operand, void* y) {
  State& s = *s_;
  if (!s.weights_ready) {
    s.w_user.set_data_handle(const_cast<void*>(w));
    if (!(s.w_mem == s.w_user)) s.w_in.execute(s.stream, s.w_user, s.w_mem);
  }
  io_->begin(s.stream, x, y);
  // The sum post-op adds what the destination holds before the conv.
  if (sum_operand || io_->residual_fed) io_->start_from_residual(s.stream, sum_operand, y);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, io_->x_mem}, {DNNL_ARG_WEIGHTS, s.w_mem},
                                       {DNNL_ARG_DST, io_->y_mem}};
  if (s.spec.has_bias) {
    s.bias.set_data_handle(const_cast<void*>(bias));
    args[DNNL_ARG_BIAS] = s.bias;
  }
  bind_binary_operands(s.spec.post_ops, s.channel_mems, channel_operands, args);
  s.conv.execute(s.stream, args);
  io_->end(s.stream);
  s.stream.wait();
}

}  // namespace kiln::eager::onednn
