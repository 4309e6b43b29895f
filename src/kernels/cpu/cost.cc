// FLOP estimates per op, chosen by trait so that a new op gets a sensible count without an edit.
#include "kernels/cpu/cost.h"

namespace kiln::eager::detail {

namespace {
double output_numel(const std::vector<HostTensor>& out) {
  double n = 0;
  for (const HostTensor& t : out) n += double(t.numel());
  return n;
}
}  // namespace

double estimate_flops(Op op, const Attrs& attrs, const std::vector<HostTensor>& in,
                      const std::vector<HostTensor>& out) {
  const double out_n = output_numel(out);
  const double in0_n = in.empty() ? 0 : double(in[0].numel());
  switch (op) {
    case Op::MatMul: {
      // out = batch * M * N; K is the contracted dim of a.
      double k = in[0].rank() == 0 ? 1 : double(in[0].shape().back());
      return 2 * out_n * k;
    }
    case Op::Conv2d: {
      // Per output element: (C / groups) * kh * kw multiply-adds, plus the bias add.
      const auto& w = in[1].shape();
      double per_output = double(w[1]) * double(w[2]) * double(w[3]);
      return 2 * out_n * per_output + (in.size() > 2 ? out_n : 0);
    }
    case Op::MaxPool2d:
    case Op::AvgPool2d: {
      const auto& kernel = attrs.get_ints("kernel");
      return out_n * double(kernel[0]) * double(kernel[1]);
    }
    case Op::Softmax:
    case Op::LogSoftmax: return 5 * out_n;
    case Op::LayerNorm: return 8 * out_n;
    case Op::RmsNorm: return 5 * out_n;
    case Op::BatchNorm: return 4 * out_n;
    case Op::ReduceMean: return in0_n + out_n;
    case Op::Attention: {
      // scores q k^T (2*Tq*Tk*D), softmax (~5 per score), weighted sum p v (2*Tq*Tk*Dv).
      const auto& q = in[0].shape();
      const auto& v = in[2].shape();
      double d = double(q.back()), dv = double(v.back());
      double tk = double(in[1].shape()[in[1].shape().size() - 2]);
      double rows = double(in[0].numel()) / d;  // batch * Tq
      return rows * tk * (2 * d + 2 * dv + 5);
    }
    default: break;
  }
  const OpInfo& info = op_info(op);
  if (info.has(kElementwise)) return out_n;
  if (info.has(kReduction) || info.has(kPooling)) return in0_n;
  if (info.has(kSideEffect)) return out_n;  // random numbers: one draw per element
  return 0;  // movement, indexing, shape-only and constant sources compute nothing
}

}  // namespace kiln::eager::detail
