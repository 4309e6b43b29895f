// The per-target op tables (op_support_<target>.def) as lookups. Why: the optimizer's native ops,
// `kiln ops` and docs/ops-support.md all read the decisions from one place.
#include <array>

#include "kiln/error.h"
#include "kiln/target.h"

namespace kiln {

namespace {

struct Row {
  Op op;
  OpDecision decision;
  std::string_view note;
};

constexpr Row kCpuRows[] = {
#define TARGET_OP(e, d, note) {Op::e, OpDecision::d, note},
#include "runtime/op_support_cpu.def"
#undef TARGET_OP
};
constexpr Row kCudaRows[] = {
#define TARGET_OP(e, d, note) {Op::e, OpDecision::d, note},
#include "runtime/op_support_cuda.def"
#undef TARGET_OP
};

// Rows indexed by op; an op without a row reads as Unsupported with a note saying so (the support
// test fails on it, so this is what a half-added op looks like, never a crash).
template <size_t N>
std::array<OpSupport, kNumOps> index_rows(const Row (&rows)[N]) {
  std::array<OpSupport, kNumOps> out;
  out.fill(OpSupport{OpDecision::Unsupported, "no decision in this target's op table"});
  for (const Row& r : rows) out[size_t(r.op)] = OpSupport{r.decision, r.note};
  return out;
}

}  // namespace

std::string_view target_kind_name(TargetKind kind) { return kind == TargetKind::Cpu ? "cpu" : "cuda"; }

std::string_view op_decision_name(OpDecision d) {
  switch (d) {
    case OpDecision::Kernel: return "kernel";
    case OpDecision::Decompose: return "decompose";
    case OpDecision::Library: return "library";
    case OpDecision::Host: return "host";
    case OpDecision::Unsupported: return "unsupported";
  }
  return "?";
}

const OpSupport& op_support(TargetKind kind, Op op) {
  static const std::array<OpSupport, kNumOps> cpu = index_rows(kCpuRows), cuda = index_rows(kCudaRows);
  KILN_ASSERT(size_t(op) < size_t(kNumOps));
  return (kind == TargetKind::Cpu ? cpu : cuda)[size_t(op)];
}

std::set<Op> native_ops(TargetKind kind) {
  std::set<Op> out;
  for (int i = 0; i < kNumOps; ++i) {
    const Op op = Op(i);
    const OpDecision d = op_support(kind, op).decision;
    if (op_info(op).decompose && d != OpDecision::Decompose && d != OpDecision::Unsupported) out.insert(op);
  }
  return out;
}

}  // namespace kiln

namespace kiln {
std::set<Op> cuda_native_ops() { return native_ops(TargetKind::Cuda); }
}  // namespace kiln
