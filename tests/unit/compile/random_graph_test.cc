// Seeded random graphs compiled and compared with the interpreter. Graphs are compiled in batches
// (one translation unit per batch) so a few hundred cost a few compiler runs, and the compile
// cache makes reruns free. KILN_RANDOM_GRAPHS=N raises the count (scripts/fuzz_compile.sh).
#include <gtest/gtest.h>

#include <cstdlib>

#include "common/conditioning.h"
#include "common/random_graph.h"
#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

void run_random_graphs(uint64_t first_seed, int count, int batch) {
  for (int start = 0; start < count; start += batch) {
    std::vector<RandomGraph> graphs;
    std::vector<const Graph*> ptrs;
    for (int i = start; i < std::min(count, start + batch); ++i) {
      graphs.push_back(make_random_graph(first_seed + uint64_t(i)));
      ptrs.push_back(graphs.back().graph.get());
    }
    auto exes = compile_batch(ptrs, test_options());
    for (size_t i = 0; i < graphs.size(); ++i) {
      const RandomGraph& rg = graphs[i];
      std::string label = str("random graph seed ", rg.seed, "\n", rg.graph->to_text());
      std::vector<HostTensor> want, got;
      try {
        want = interp::run(*rg.graph, rg.inputs);
      } catch (const Error& e) {
        continue;  // the generator drew data the reference rejects; nothing to compare
      }
      try {
        got = exes[i]->run(rg.inputs);
      } catch (const std::exception& e) {
        ADD_FAILURE() << label << "compiled run failed: " << e.what();
        continue;
      }
      ASSERT_EQ(got.size(), want.size()) << label;
      for (size_t o = 0; o < want.size(); ++o) {
        std::string diff = compare_tensors(got[o], want[o]);
        if (!diff.empty() && ill_conditioned(*rg.graph, rg.inputs, want, o, [](DType) { return 1e-6; })) {
          std::cout << "seed " << rg.seed << " output " << o << ": not compared (ill-conditioned: " << diff << ")\n";
          continue;
        }
        EXPECT_EQ(diff, "") << label << "output " << o << "\n" << exes[i]->explain().substr(0, 8000);
      }
    }
  }
}

TEST(RandomGraphs, CompiledMatchesInterpreter) {
  int count = 300;
  if (const char* n = std::getenv("KILN_RANDOM_GRAPHS"); n && *n) count = std::atoi(n);
  uint64_t seed = 1000;
  if (const char* s = std::getenv("KILN_RANDOM_SEED"); s && *s) seed = std::strtoull(s, nullptr, 10);
  run_random_graphs(seed, count, 100);
}

TEST(RandomGraphs, GeneratorIsDeterministic) {
  auto a = make_random_graph(77), b = make_random_graph(77);
  EXPECT_EQ(a.graph->to_text(), b.graph->to_text());
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (size_t i = 0; i < a.inputs.size(); ++i) EXPECT_TRUE(a.inputs[i].bit_equal(b.inputs[i]));
}

}  // namespace
}  // namespace kiln::testing
