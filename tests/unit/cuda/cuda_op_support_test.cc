// The CUDA op table (src/runtime/op_support_cuda.def) against what compile_cuda accepts, on every
// op sample, without a GPU: the target's optimizer pipeline, the CUDA graph preparation, the
// shared lowering and compile_cuda's step placement (runtime::lower_for_cuda). Why: the
// table is what `kiln ops` and docs/ops-support.md tell users; it must not claim a CUDA path that
// fails, nor miss one that runs.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "common/op_samples.h"
#include "kiln/error.h"
#include "kiln/target.h"
#include "runtime/cuda/elementwise_chain.h"
#include "runtime/cuda_lowering.h"

namespace kiln::testing {
namespace {

// Empty when the CUDA target would take the sample (up to the device itself); else its error.
std::string cuda_refusal(const OpSample& s) {
  try {
    std::unique_ptr<Graph> g = build_sample_graph(s);
    std::unique_ptr<Target> cuda = cuda_target();
    optimize(*g, cuda->optimize_options());
    return cuda->refusal(*g);  // control flow and containers: cut into segments (host_segments.h)
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(CudaOpSupport, RowsMatchWhatCompileCudaAccepts) {
  std::map<Op, std::string> runs, refused;  // op -> sample labels
  std::map<Op, std::string> why;
  for (const OpSample& s : op_samples()) {
    std::string r = cuda_refusal(s);
    (r.empty() ? runs : refused)[s.op] += " " + s.label;
    if (!r.empty()) why[s.op] = r;
  }
  for (int i = 0; i < kNumOps; ++i) {
    const Op op = Op(i);
    if (!runs.count(op) && !refused.count(op)) continue;  // no samples (the sample sweep checks coverage)
    const OpSupport& row = op_support(TargetKind::Cuda, op);
    if (row.decision == OpDecision::Unsupported) {
      EXPECT_FALSE(runs.count(op)) << "op '" << op_name(op) << "' is unsupported in src/runtime/op_support_cuda.def, "
                                   << "but compile_cuda takes these samples:" << runs[op] << " (update the row)";
    } else {
      EXPECT_TRUE(runs.count(op)) << "op '" << op_name(op) << "' is '" << op_decision_name(row.decision)
                                  << "' in src/runtime/op_support_cuda.def, but compile_cuda refuses every sample:"
                                  << refused[op] << "\n  " << why[op];
    }
  }
}

// The gap meter's hand-templated chain kernels (elementwise_chain.h) keep a list of their own: each
// must be an elementwise op of the table that the CUDA target generates kernels for.
TEST(CudaOpSupport, ChainOpsAreElementwiseKernelsOfTheTable) {
#define KILN_X(e, name, scalar, expr)                                                                  \
  {                                                                                                    \
    std::optional<Op> op = op_from_name(name);                                                         \
    ASSERT_TRUE(op.has_value()) << "chain op '" << name << "' is not in ops.def";                     \
    EXPECT_TRUE(op_info(*op).has(kElementwise)) << name;                                               \
    EXPECT_EQ(op_support(TargetKind::Cuda, *op).decision, OpDecision::Kernel) << name;                 \
  }
  KILN_CHAIN_OPS(KILN_X)
#undef KILN_X
}

}  // namespace
}  // namespace kiln::testing
