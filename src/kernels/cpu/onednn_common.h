// What the oneDNN wrappers (onednn_conv.cc, onednn_matmul.cc) share: the CPU engine, dtype mapping
// and building a post-op chain. Why: one place that includes dnnl.hpp for both; not a public header.
#pragma once

#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/cpu/onednn_post_ops.h"
#include "kiln/dtype.h"

namespace kiln::eager::onednn {

const dnnl::engine& cpu_engine();

inline dnnl::memory::data_type data_type_of(DType d) {
  return d == DType::BF16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

// oneDNN can run f32 everywhere; bf16 needs AVX-512 (emulated on avx512_core, native with bf16/AMX).
bool supports_dtype(DType d);

// The post-op chain; every binary post-op reads a tensor of `binary_md` (broadcast over the output).
dnnl::post_ops make_post_ops(const std::vector<PostOp>& ops, const dnnl::memory::desc& binary_md);

}  // namespace kiln::eager::onednn
