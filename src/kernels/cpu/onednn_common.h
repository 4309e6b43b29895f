// What the oneDNN wrappers (onednn_conv.cc, onednn_matmul.cc) share: the CPU engine, dtype mapping
// and building a post-op chain. Why: one place that includes dnnl.hpp for both; not a public header.
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/cpu/onednn_handoff.h"
#include "kernels/cpu/onednn_post_ops.h"
#include "kiln/dtype.h"

namespace kiln::eager::onednn {

const dnnl::engine& cpu_engine();

inline dnnl::memory::data_type data_type_of(DType d) {
  return d == DType::BF16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

// oneDNN can run f32 everywhere; bf16 needs AVX-512 (emulated on avx512_core, native with bf16/AMX).
bool supports_dtype(DType d);

// The channel block of the conv layouts Kiln prefers: 16 with AVX-512, 8 below (onednn_conv.cc).
int64_t channel_block();
// Whether a conv asks for a channel-blocked destination: as the planner decided (`planned`), unless
// KILN_ONEDNN_CONV_LAYOUT is "any" (never) or "blocked" (always), for comparisons.
bool channel_blocks_wanted(bool planned);

// The post-op chain; every binary post-op reads a tensor of `binary_md` (broadcast over the output).
dnnl::post_ops make_post_ops(const std::vector<PostOp>& ops, const dnnl::memory::desc& binary_md);

// Points the binary post-ops' memories at their operands (one per binary post-op, in order) and
// adds them to a primitive's arguments.
void bind_binary_operands(const std::vector<PostOp>& ops, std::vector<dnnl::memory>& mems,
                          const std::vector<const void*>& operands, std::unordered_map<int, dnnl::memory>& args);

// Where element (n, c, h, w) of a blocked or plain NCHW layout is: the outer strides and the size
// of the innermost channel block (1 for plain layouts).
struct Geometry {
  int64_t stride[4];
  int64_t block = 1;
};

// The geometry of `d` when it is plain or blocked on channels only (nChw8c, nChw16c); else none.
std::optional<Geometry> geometry_of(const dnnl::memory::desc& d);

// A primitive's NCHW source and destination (onednn_handoff.h): Kiln's plain views, the
// primitive's own layouts, the reorders between them, and the blocked hand-off state.
struct Io {
  dnnl::memory::desc x_plain, y_plain;
  dnnl::memory x_user, y_user, residual_user;  // plain handles, set per run
  dnnl::memory x_mem, y_mem;                   // the primitive's layouts (the user's when they agree)
  dnnl::reorder x_in, y_out, residual_in;      // created once, where the layouts differ
  bool x_fed = false, y_kept = false;          // x_mem is a producer's y_mem; y stays in y_mem
  dnnl::memory residual_fed;                   // a producer's blocked y_mem a sum post-op starts from
  // y_mem points into a concat's destination (onednn_concat.cc); it can be lent to one place only.
  mutable bool y_lent = false;

  // Creates the memories and reorders for a primitive whose layouts are `x_desc` and `y_desc`.
  void init(const dnnl::memory::desc& x_plain, const dnnl::memory::desc& y_plain, const dnnl::memory::desc& x_desc,
            const dnnl::memory::desc& y_desc);
  // Per run: points the plain handles at Kiln's buffers and brings the source into x_mem.
  void begin(dnnl::stream& s, const void* x, void* y);
  // Fills y_mem with the residual a sum post-op adds (a copy when it was handed over blocked).
  void start_from_residual(dnnl::stream& s, const void* residual, void* y);
  // Writes y_mem out to the plain destination unless it is kept blocked.
  void end(dnnl::stream& s);
  // The exact path (onednn_post_ops.h): the plain source, residual and result a generated kernel
  // reads and writes, from and to the blocked ones handed over.
  bool sources_finite(const void* x, const void* residual, DType dt) const;
  void materialize_plain_sources(dnnl::stream& s, const void* x, const void* residual);
  void adopt_plain_output(dnnl::stream& s, const void* y);
};

}  // namespace kiln::eager::onednn
