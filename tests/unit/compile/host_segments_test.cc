// Cutting a graph at its host nodes (runtime/host_segments.h): the pieces, and the pieces run in
// order — segments compiled (here by the CPU target, as the GPU's would be), control flow and
// containers in the interpreter — agreeing with the interpreter on random inputs. Why: the CUDA
// target runs graphs with if/loop/scan, sequences and optionals this way.
#include <gtest/gtest.h>

#include "kiln/interp.h"
#include "runtime/host_segments.h"
#include "unit/compile/compile_test_util.h"

namespace kiln::testing {
namespace {

// exp(x) feeds an if whose branches add or multiply; a sequence built from the result and y is
// read back; the loop doubles a carried value n times; derived dims ((B + 1)) cross a cut.
const char* kGraph = R"(graph @cut(%c: bool[], %n: i64[], %x: f32[B, 5], %y: f32[B, 5], %z: f32[B + 1, 5]) {
  %0 = exp(%x) : f32[B, 5]
  %1 = if(%c, %0, %y) {else_branch = graph @else(%a: f32[B, 5], %b: f32[B, 5]) {
    %0 = mul(%a, %b) : f32[B, 5]
    return %0
  }, then_branch = graph @then(%a: f32[B, 5], %b: f32[B, 5]) {
    %0 = add(%a, %b) : f32[B, 5]
    return %0
  }} : f32[B, 5]
  %2 = tanh(%1) : f32[B, 5]
  %3 = sequence_construct(%2, %y) : seq<f32[B, 5], f32[B, 5]>
  %4 = sequence_at(%3) {index = 0} : f32[B, 5]
  %t = constant() {value = dense<bool[]>[1]} : bool[]
  %5 = loop(%n, %t, %4) {body = graph @body(%i: i64[], %cond: bool[], %acc: f32[B, 5]) {
    %0 = add(%acc, %acc) : f32[B, 5]
    return %cond, %0
  }, num_carried = 1} : f32[B, 5]
  %6 = sub(%5, %y) : f32[B, 5]
  %7 = concat(%6, %0) {axis = 0} : f32[2 * B, 5]
  %8 = reduce_sum(%z) {axes = [0], keepdim = 1} : f32[1, 5]
  %9 = add(%7, %8) : f32[2 * B, 5]
  return %9, %3
}
)";

TEST(HostSegments, ControlFlowAndContainersSplitTheGraphIntoSegments) {
  auto g = parse_graph(kGraph);
  ASSERT_TRUE(runtime::has_host_nodes(*g));
  std::vector<runtime::GraphPiece> pieces = runtime::split_at_host_nodes(*g);
  std::string kinds;
  for (const auto& p : pieces) kinds += p.host ? std::string(op_name(p.host->op)) + " " : "segment ";
  EXPECT_EQ(kinds, "segment if segment sequence_construct sequence_at loop segment ");
  // The first segment computes exp(x) once for both the if and the concat after the loop.
  ASSERT_TRUE(pieces[0].segment);
  EXPECT_EQ(pieces[0].outputs.size(), 1u);
  // The last segment reads z, whose dim (B + 1) is derived: a fresh symbol there.
  const Graph& last = *pieces.back().segment;
  bool fresh = false;
  for (const Value* in : last.inputs()) fresh |= in->type.to_string().find("kiln_cut") != std::string::npos;
  EXPECT_TRUE(fresh) << print_graph(last);
}

TEST(HostSegments, PiecesRunInOrderAndMatchTheInterpreter) {
  auto g = parse_graph(kGraph);
  auto exe = runtime::compile_in_pieces(*g, [](const Graph& s) { return compile(s, test_options()); });
  EXPECT_GT(exe->stats().kernels_generated, 0);
  for (bool branch : {true, false}) {
    for (int64_t b : {1, 3}) {
      std::vector<HostTensor> in = {HostTensor::scalar(DType::Bool, branch ? 1 : 0), HostTensor::scalar(DType::I64, 3),
                                    HostTensor::random(DType::F32, {b, 5}, 7), HostTensor::random(DType::F32, {b, 5}, 8),
                                    HostTensor::random(DType::F32, {b + 1, 5}, 9)};
      std::vector<HostTensor> want = interp::run(*g, in);
      std::vector<HostTensor> got = exe->run(in);
      ASSERT_EQ(got.size(), 2u);
      EXPECT_EQ(compare_tensors(got[0], want[0]), "") << "branch " << branch << ", B " << b;
      ASSERT_FALSE(got[1].is_tensor());
      ASSERT_EQ(got[1].items().size(), 2u);
      for (size_t i = 0; i < 2; ++i) EXPECT_EQ(compare_tensors(got[1].items()[i], want[1].items()[i]), "");
      // Host nodes are the interpreter's: reported as such.
      RunStats ran = exe->last_run();
      int host = 0;
      for (const std::string& op : ran.reference_fallbacks) host += op == "if" || op == "loop" || op.rfind("sequence", 0) == 0;
      EXPECT_EQ(host, 4);
    }
  }
}

// A decode step's tail on a device without selection kernels: softmax over logits in a segment,
// sort and sample on the host with their CPU kernels (not the reference), then a segment again.
TEST(HostSegments, SelectionOpsRunTheirCpuKernelsBetweenSegments) {
  auto g = parse_graph(R"(graph @tail(%x: f32[B, 301], %seeds: i64[B], %steps: i64[B]) {
  %0 = mul(%x, %x) : f32[B, 301]
  %1, %5 = sort(%0) {descending = 1} : f32[B, 301], i64[B, 301]
  %2 = sample(%x, %seeds, %steps) {temperature = 0.8, top_k = 20, top_p = 0.9} : i64[B]
  %3 = add(%2, %2) : i64[B]
  %4 = argsort(%x) : i64[B, 301]
  return %1, %5, %3, %4
}
)");
  std::vector<runtime::GraphPiece> pieces = runtime::split_at_host_nodes(*g);
  std::string kinds;
  for (const auto& p : pieces) kinds += p.host ? std::string(op_name(p.host->op)) + " " : "segment ";
  EXPECT_EQ(kinds, "segment sort sample segment argsort ");
  auto exe = runtime::compile_in_pieces(*g, [](const Graph& s) { return compile(s, test_options()); });
  for (int64_t b : {1, 4}) {
    std::vector<HostTensor> in = {HostTensor::random(DType::F32, {b, 301}, 3, -3, 3), HostTensor::random(DType::I64, {b}, 4, 0, 99),
                                  HostTensor::random(DType::I64, {b}, 5, 0, 99)};
    std::vector<HostTensor> want = interp::run(*g, in);
    std::vector<HostTensor> got = exe->run(in);
    ASSERT_EQ(got.size(), 4u);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(compare_tensors(got[i], want[i]), "") << "output " << i << ", B " << b;
    EXPECT_TRUE(exe->last_run().reference_fallbacks.empty()) << "host selection ops ran on the reference kernel";
  }
}

}  // namespace
}  // namespace kiln::testing
