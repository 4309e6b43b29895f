// Every op in the table has at least one sample, and every sample builds a well-typed node.
#include <gtest/gtest.h>

#include <set>

#include "common/op_samples.h"

using namespace kiln;
using namespace kiln::testing;

TEST(OpSamples, CoverEveryOpAndBuild) {
  std::set<Op> covered;
  for (const auto& s : op_samples()) {
    covered.insert(s.op);
    EXPECT_NO_THROW(build_sample_graph(s)) << s.label;
    auto ins = sample_inputs(s, 1);
    EXPECT_EQ(ins.size(), s.input_types.size()) << s.label;
  }
  // Control flow and containers take sub-graphs or sequences, which the tensor-only sample
  // sweeps cannot feed: tests/unit/interp/control_flow_test.cc and ir/control_flow_ir_test.cc.
  for (int i = 0; i < kNumOps; ++i)
    if (!has_trait(Op(i), kSubgraph) && !has_trait(Op(i), kContainer)) {
      EXPECT_TRUE(covered.count(Op(i))) << "no sample for op " << op_name(Op(i));
    }
}
