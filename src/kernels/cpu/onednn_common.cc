// The shared pieces of the oneDNN wrappers (see onednn_common.h and onednn_post_ops.h).
#include "kernels/cpu/onednn_common.h"

#include "kiln/error.h"

namespace kiln::eager::onednn {

namespace {

dnnl::algorithm eltwise_algorithm(PostOp::Kind k) {
  switch (k) {
    case PostOp::kRelu: return dnnl::algorithm::eltwise_relu;
    case PostOp::kClip: return dnnl::algorithm::eltwise_clip_v2;
    case PostOp::kLinear: return dnnl::algorithm::eltwise_linear;
    case PostOp::kLogistic: return dnnl::algorithm::eltwise_logistic;
    case PostOp::kTanh: return dnnl::algorithm::eltwise_tanh;
    case PostOp::kExp: return dnnl::algorithm::eltwise_exp;
    case PostOp::kAbs: return dnnl::algorithm::eltwise_abs;
    case PostOp::kSqrt: return dnnl::algorithm::eltwise_sqrt;
    case PostOp::kGeluErf: return dnnl::algorithm::eltwise_gelu_erf;
    case PostOp::kGeluTanh: return dnnl::algorithm::eltwise_gelu_tanh;
    case PostOp::kSwish: return dnnl::algorithm::eltwise_swish;
    case PostOp::kHardSwish: return dnnl::algorithm::eltwise_hardswish;
    default: return dnnl::algorithm::undef;
  }
}

dnnl::algorithm binary_algorithm(PostOp::Kind k) {
  switch (k) {
    case PostOp::kBinaryAdd: return dnnl::algorithm::binary_add;
    case PostOp::kBinarySub: return dnnl::algorithm::binary_sub;
    case PostOp::kBinaryMul: return dnnl::algorithm::binary_mul;
    case PostOp::kBinaryDiv: return dnnl::algorithm::binary_div;
    case PostOp::kBinaryMax: return dnnl::algorithm::binary_max;
    case PostOp::kBinaryMin: return dnnl::algorithm::binary_min;
    default: return dnnl::algorithm::undef;
  }
}

}  // namespace

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

bool supports_dtype(DType d) {
  if (d == DType::F32) return true;
  return d == DType::BF16 && dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
}

dnnl::post_ops make_post_ops(const std::vector<PostOp>& ops, const dnnl::memory::desc& binary_md) {
  dnnl::post_ops chain;
  for (const PostOp& p : ops) {
    if (p.kind == PostOp::kSum) chain.append_sum(p.alpha);
    else if (p.is_binary()) chain.append_binary(binary_algorithm(p.kind), binary_md);
    else chain.append_eltwise(1.0f, eltwise_algorithm(p.kind), p.alpha, p.beta);
  }
  return chain;
}

std::string post_op_name(const PostOp& p) {
  switch (p.kind) {
    case PostOp::kRelu: return "relu";
    case PostOp::kClip: return str("clip(", p.alpha, ", ", p.beta, ")");
    case PostOp::kLinear: return str("linear(", p.alpha, "x + ", p.beta, ")");
    case PostOp::kLogistic: return "sigmoid";
    case PostOp::kTanh: return "tanh";
    case PostOp::kExp: return "exp";
    case PostOp::kAbs: return "abs";
    case PostOp::kSqrt: return "sqrt";
    case PostOp::kGeluErf: return "gelu";
    case PostOp::kGeluTanh: return "gelu(tanh)";
    case PostOp::kSwish: return "silu";
    case PostOp::kHardSwish: return "hardswish";
    case PostOp::kBinaryAdd: return "add per channel";
    case PostOp::kBinarySub: return "sub per channel";
    case PostOp::kBinaryMul: return "mul per channel";
    case PostOp::kBinaryDiv: return "div per channel";
    case PostOp::kBinaryMax: return "max per channel";
    case PostOp::kBinaryMin: return "min per channel";
    case PostOp::kSum: return p.alpha == 1 ? "residual add" : str("residual add x", p.alpha);
  }
  return "?";
}

}  // namespace kiln::eager::onednn
