// Channel concats (see onednn_concat.h). The destination's layout is oneDNN's pick for the
// sources' (format `any`). When every source is in that blocked layout and starts at a whole
// channel block, a source is a run of block planes per image: with one image the producing conv
// writes straight into its place in the destination (nothing is copied at all); otherwise the
// concat is one memcpy per source and image. Other layouts take oneDNN's concat primitive (its
// generic `simple:any` kernel copied SqueezeNet's 1.5 MB concat in 400 us, a memcpy in ~100).
#include "kernels/cpu/onednn_concat.h"

#include <cstring>
#include <unordered_map>

#include "kernels/cpu/onednn_common.h"
#include "kiln/error.h"

namespace kiln::eager::onednn {

using dnnl::memory;
using tag = memory::format_tag;

bool supports(const ConcatSpec& s) {
  if (!supports_dtype(s.dtype) || s.x.size() < 2) return false;
  int64_t channels = 0;
  for (const auto& x : s.x) {
    if (x.size() != 4 || x[0] != s.y[0] || x[2] != s.y[2] || x[3] != s.y[3]) return false;
    for (int64_t d : x)
      if (d <= 0) return false;
    channels += x[1];
  }
  return channels == s.y[1];
}

struct PreparedConcat::State {
  ConcatSpec spec;
  dnnl::concat::primitive_desc pd;
  dnnl::concat prim;
  dnnl::stream stream{cpu_engine()};
  std::vector<memory> user;    // plain handles, set per run
  std::vector<memory> mem;     // what the primitive reads (the user's, or a producer's blocked result)
  std::vector<dnnl::reorder> in;  // plain -> planned layout, for a source not handed over
  std::vector<bool> fed;
  // The block-copy path: every source in the destination's blocked layout at a whole block.
  bool block_copy = false;
  std::vector<int64_t> plane_bytes;   // each source's bytes per image
  std::vector<int64_t> offset_bytes;  // where it starts in an image of the destination
  int64_t image_bytes = 0;            // the destination's bytes per image
  std::vector<bool> aliased;          // its producer writes straight into the destination
};

PreparedConcat::PreparedConcat(const ConcatSpec& spec, const std::vector<const BlockedIo*>& sources_like)
    : s_(std::make_unique<State>()) {
  KILN_CHECK(supports(spec), "oneDNN concat: unsupported spec");
  KILN_CHECK(sources_like.size() == spec.x.size(), "oneDNN concat: one layout hint per source expected");
  State& s = *s_;
  s.spec = spec;
  const auto dt = data_type_of(spec.dtype);
  const dnnl::engine& eng = cpu_engine();
  std::vector<memory::desc> srcs;
  for (size_t i = 0; i < spec.x.size(); ++i) {
    const memory::dims xd(spec.x[i].begin(), spec.x[i].end());
    const memory::desc plain(xd, dt, tag::nchw);
    memory::desc d = plain;
    if (sources_like[i]) {
      const memory::desc like = io_of(*sources_like[i]).y_mem.get_desc();
      if (like.dims() == xd && like.data_type() == dt) d = like;
    }
    srcs.push_back(d);
    s.user.push_back(memory(plain, eng, DNNL_MEMORY_NONE));
    s.mem.push_back(d == plain ? s.user.back() : memory(d, eng));
    s.in.push_back(d == plain ? dnnl::reorder() : dnnl::reorder(s.user.back(), s.mem.back()));
    s.fed.push_back(false);
  }
  const memory::dims yd{spec.y[0], spec.y[1], spec.y[2], spec.y[3]};
  try {
    s.pd = dnnl::concat::primitive_desc(memory::desc(yd, dt, tag::any), 1, srcs, eng);
    s.prim = dnnl::concat(s.pd);
  } catch (const dnnl::error& e) {
    throw Error(str("oneDNN has no concat for these layouts: ", e.what()));
  }
  // Only the destination side of Io is used: the sources are ours.
  const memory::desc y_plain(yd, dt, tag::nchw);
  io_->init(y_plain, y_plain, y_plain, s.pd.dst_desc());
  s.aliased.assign(srcs.size(), false);
  const std::optional<Geometry> gy = geometry_of(s.pd.dst_desc());
  s.block_copy = gy && gy->block > 1;
  const size_t elem = spec.dtype == DType::F32 ? 4 : 2;
  int64_t channel = 0;
  for (size_t i = 0; i < srcs.size() && s.block_copy; ++i) {
    const std::optional<Geometry> gx = geometry_of(srcs[i]);
    s.block_copy = gx && gx->block == gy->block && channel % gy->block == 0 && gx->stride[2] == gy->stride[2] &&
                   gx->stride[3] == gy->stride[3] && gx->stride[1] == gy->stride[1];
    if (!s.block_copy) break;
    s.offset_bytes.push_back(channel / gy->block * gy->stride[1] * int64_t(elem));
    s.plane_bytes.push_back((spec.x[i][1] + gy->block - 1) / gy->block * gx->stride[1] * int64_t(elem));
    channel += spec.x[i][1];
  }
  if (s.block_copy) s.image_bytes = gy->stride[0] * int64_t(elem);
}

PreparedConcat::~PreparedConcat() = default;

std::string PreparedConcat::implementation() const { return s_->pd.impl_info_str(); }

bool PreparedConcat::can_take_source(size_t i, const BlockedIo& producer) const {
  const memory::desc d = io_of(producer).y_mem.get_desc();
  return i < s_->mem.size() && !(d == io_of(producer).y_plain) && d == s_->mem[i].get_desc();
}

void PreparedConcat::take_source(size_t i, const BlockedIo& producer) {
  KILN_CHECK(can_take_source(i, producer), "oneDNN concat: blocked layouts differ");
  State& s = *s_;
  s.mem[i] = io_of(producer).y_mem;  // a shared handle to the producer's result
  s.fed[i] = true;
  // One image: the producer's result is our destination's slice (the last source's padded block
  // tail is the destination's own padding).
  // A result already lent (to an earlier source of this concat, concat(a, a), or to another
  // concat) is copied from there instead.
  if (s.block_copy && s.spec.y[0] == 1 && !io_of(producer).y_lent) {
    s.mem[i].set_data_handle(static_cast<char*>(io_->y_mem.get_data_handle()) + s.offset_bytes[i]);
    s.aliased[i] = true;
    io_of(producer).y_lent = true;
  }
}

bool PreparedConcat::writes_in_place(size_t i) const { return i < s_->aliased.size() && s_->aliased[i]; }

void PreparedConcat::run(const std::vector<const void*>& xs, void* y) {
  State& s = *s_;
  KILN_CHECK(xs.size() == s.mem.size(), "oneDNN concat: ", s.mem.size(), " sources expected, got ", xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    if (s.fed[i]) continue;
    s.user[i].set_data_handle(const_cast<void*>(xs[i]));
    // A source planned blocked whose producer did not hand it over: bring the plain one in.
    if (!(s.mem[i] == s.user[i])) s.in[i].execute(s.stream, s.user[i], s.mem[i]);
  }
  io_->y_user.set_data_handle(y);
  if (s.block_copy) {
    s.stream.wait();
    char* dst = static_cast<char*>(io_->y_mem.get_data_handle());
    const int64_t images = s.spec.y[0], sources = int64_t(xs.size());
#pragma omp parallel for collapse(2) schedule(static) if (images * s.image_bytes > (1 << 18))
    for (int64_t n = 0; n < images; ++n)
      for (int64_t i = 0; i < sources; ++i) {
        if (s.aliased[size_t(i)]) continue;
        const char* src = static_cast<const char*>(s.mem[size_t(i)].get_data_handle());
        std::memcpy(dst + n * s.image_bytes + s.offset_bytes[size_t(i)], src + n * s.plane_bytes[size_t(i)],
                    size_t(s.plane_bytes[size_t(i)]));
      }
  } else {
    std::unordered_map<int, memory> args{{DNNL_ARG_DST, io_->y_mem}};
    for (size_t i = 0; i < s.mem.size(); ++i) args[DNNL_ARG_MULTIPLE_SRC + int(i)] = s.mem[i];
    s.prim.execute(s.stream, args);
  }
  io_->end(s.stream);
  s.stream.wait();
}

}  // namespace kiln::eager::onednn
