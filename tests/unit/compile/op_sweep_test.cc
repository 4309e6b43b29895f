// Every op of the op table, compiled: each sample of tests/common/op_samples.h becomes a one-node
// graph; all of them go into one translation unit (one compiler run) and each is compared with
// the interpreter. Ops without generated code run as library / fallback steps, which the test
// lists, so "every op works compiled" is checked, not assumed.
#include <gtest/gtest.h>

#include <set>

#include "common/op_samples.h"
#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

TEST(OpSweep, EveryOpSampleMatchesTheInterpreterCompiled) {
  const auto& samples = op_samples();
  std::vector<std::unique_ptr<Graph>> graphs;
  std::vector<const Graph*> ptrs;
  for (const auto& s : samples) {
    graphs.push_back(build_sample_graph(s));
    ptrs.push_back(graphs.back().get());
  }
  auto exes = compile_batch(ptrs, test_options());
  ASSERT_EQ(exes.size(), samples.size());
  std::set<std::string> generated, fallback;
  std::set<Op> covered;
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    std::vector<HostTensor> in = sample_inputs(s, 1234 + i);
    std::vector<HostTensor> want;
    try {
      want = interp::run(*graphs[i], in);
    } catch (const Error& e) {
      ADD_FAILURE() << s.label << ": interpreter failed: " << e.what();
      continue;
    }
    Scoreboard sb;
    std::vector<HostTensor> got;
    try {
      got = exes[i]->run(in, &sb);
    } catch (const std::exception& e) {
      ADD_FAILURE() << s.label << ": compiled run failed: " << e.what() << "\n" << exes[i]->explain();
      continue;
    }
    ASSERT_EQ(got.size(), want.size()) << s.label;
    for (size_t o = 0; o < want.size(); ++o)
      EXPECT_EQ(compare_tensors(got[o], want[o]), "") << s.label << " output " << o << "\n"
                                                      << exes[i]->explain().substr(0, 5000);
    covered.insert(s.op);
    bool gen = exes[i]->stats().kernels_generated > 0;
    (gen ? generated : fallback).insert(std::string(op_name(s.op)));
  }
  for (int op = 0; op < kNumOps; ++op)  // control flow and containers: control_flow_compile_test.cc
    if (!has_trait(Op(op), kSubgraph) && !has_trait(Op(op), kContainer)) {
      EXPECT_TRUE(covered.count(Op(op))) << "no sample for " << op_name(Op(op));
    }
  std::string gen_list, fb_list;
  for (const auto& n : generated) gen_list += n + " ";
  for (const auto& n : fallback) fb_list += n + " ";
  std::cout << "generated code for: " << gen_list << "\nlibrary / fallback only: " << fb_list << "\n";
}

}  // namespace
}  // namespace kiln::testing
