// oneDNN matmul primitives with fused post-ops (see onednn_matmul.h). Source and destination stay
// in Kiln's plain row-major layout (no reorders per run); constant weights are created with format
// `any` and reordered once, other weights are read in place.
#include "kernels/cpu/onednn_matmul.h"

#include <cstring>
#include <unordered_map>

#include "kernels/cpu/onednn_common.h"
#include "kiln/error.h"

namespace kiln::eager::onednn {

using dnnl::memory;
using tag = memory::format_tag;

bool supports(const MatmulSpec& spec) {
  return supports_dtype(spec.dtype) && spec.batch > 0 && spec.m > 0 && spec.k > 0 && spec.n > 0;
}

struct PreparedMatmul::State {
  MatmulSpec spec;
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  dnnl::stream stream{cpu_engine()};
  memory a_mem, b_user, b_mem, c_mem;
  std::vector<memory> column_mems;
  dnnl::reorder b_in;
  bool weights_ready = false;
  bool weights_finite = true;
};

PreparedMatmul::PreparedMatmul(const MatmulSpec& spec, bool constant_b) : s_(std::make_unique<State>()) {
  KILN_CHECK(supports(spec), "oneDNN matmul: unsupported spec");
  State& s = *s_;
  s.spec = spec;
  const auto dt = data_type_of(spec.dtype);
  const dnnl::engine& eng = cpu_engine();
  // Batched problems are 3-D; a shared B with the batch folded into M is a plain 2-D GEMM.
  const bool batched = spec.batch > 1 && !spec.shared_b;
  const int64_t rows = spec.shared_b ? spec.batch * spec.m : spec.m;
  memory::desc a_md = batched ? memory::desc({spec.batch, rows, spec.k}, dt, tag::abc)
                              : memory::desc({rows, spec.k}, dt, tag::ab);
  memory::desc b_plain = batched ? memory::desc({spec.batch, spec.k, spec.n}, dt, tag::abc)
                                 : memory::desc({spec.k, spec.n}, dt, tag::ab);
  memory::desc c_md = batched ? memory::desc({spec.batch, rows, spec.n}, dt, tag::abc)
                              : memory::desc({rows, spec.n}, dt, tag::ab);
  memory::desc column_md = batched ? memory::desc({1, 1, spec.n}, dt, tag::abc) : memory::desc({1, spec.n}, dt, tag::ab);
  memory::desc b_any = batched ? memory::desc({spec.batch, spec.k, spec.n}, dt, tag::any)
                               : memory::desc({spec.k, spec.n}, dt, tag::any);
  dnnl::primitive_attr attr;
  attr.set_post_ops(make_post_ops(spec.post_ops, column_md));
  try {
    s.pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, constant_b ? b_any : b_plain, c_md), attr, eng);
    s.prim = dnnl::matmul(s.pd);
  } catch (const dnnl::error& e) {
    throw Error(str("oneDNN has no matmul for this shape: ", e.what()));
  }
  s.a_mem = memory(a_md, eng, DNNL_MEMORY_NONE);
  s.c_mem = memory(c_md, eng, DNNL_MEMORY_NONE);
  s.b_user = memory(b_plain, eng, DNNL_MEMORY_NONE);
  s.b_mem = s.pd.weights_desc() == b_plain ? s.b_user : memory(s.pd.weights_desc(), eng);
  if (!(s.b_mem == s.b_user)) s.b_in = dnnl::reorder(s.b_user, s.b_mem);
  for (const PostOp& p : spec.post_ops)
    if (p.is_binary()) s.column_mems.push_back(memory(column_md, eng, DNNL_MEMORY_NONE));
}

PreparedMatmul::~PreparedMatmul() = default;

std::string PreparedMatmul::implementation() const { return s_->pd.impl_info_str(); }

bool PreparedMatmul::mishandles_nonfinite() const { return s_->spec.dtype == DType::BF16; }

bool PreparedMatmul::sources_finite(const void* a, const void* b, const std::vector<const void*>& column_operands,
                                    const void* sum_operand) const {
  const State& s = *s_;
  const MatmulSpec& p = s.spec;
  const int64_t a_count = p.batch * p.m * p.k, c_count = p.batch * p.m * p.n;
  const int64_t b_count = (p.shared_b ? 1 : p.batch) * p.k * p.n;
  if (!s.weights_finite || !all_finite(a, a_count, p.dtype)) return false;
  if (!s.weights_ready && !all_finite(b, b_count, p.dtype)) return false;
  for (const void* c : column_operands)
    if (!all_finite(c, p.n, p.dtype)) return false;
  return !sum_operand || all_finite(sum_operand, c_count, p.dtype);
}

void PreparedMatmul::set_constant_weights(const void* b) {
  State& s = *s_;
  s.weights_finite = all_finite(b, s.b_user.get_desc().get_size() / (s.spec.dtype == DType::F32 ? 4 : 2), s.spec.dtype);
  if (s.b_mem == s.b_user) {
    s.b_mem = memory(s.b_user.get_desc(), cpu_engine());  // own copy: the constant may move
    std::memcpy(s.b_mem.get_data_handle(), b, s.b_user.get_desc().get_size());
  } else {
    s.b_user.set_data_handle(const_cast<void*>(b));
    s.b_in.execute(s.stream, s.b_user, s.b_mem);
    s.stream.wait();
  }
  s.weights_ready = true;
}

void PreparedMatmul::run(const void* a, const void* b, const std::vector<const void*>& column_operands,
                         const void* sum_operand, void* c) {
  State& s = *s_;
  s.a_mem.set_data_handle(const_cast<void*>(a));
  s.c_mem.set_data_handle(c);
  if (!s.weights_ready) {
    KILN_CHECK(s.b_mem == s.b_user, "oneDNN matmul: constant weights were never set");
    s.b_user.set_data_handle(const_cast<void*>(b));
  }
  // The sum post-op adds what the destination holds before the product.
  if (sum_operand && sum_operand != c) std::memcpy(c, sum_operand, s.c_mem.get_desc().get_size());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, s.a_mem}, {DNNL_ARG_WEIGHTS, s.b_mem}, {DNNL_ARG_DST, s.c_mem}};
  bind_binary_operands(s.spec.post_ops, s.column_mems, column_operands, args);
  s.prim.execute(s.stream, args);
  s.stream.wait();
}

}  // namespace kiln::eager::onednn
