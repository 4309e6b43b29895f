// The scoreboard as eager mode fills it: one record per op with bytes computed from the shapes,
// FLOPs by the documented conventions, totals, the table and the JSON fields of docs/scoreboard.md.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kernels/cpu/eager.h"

namespace kiln {
namespace {

using Dims = std::vector<int64_t>;

TEST(EagerScoreboard, OneRecordPerOpWithBytesFromShapes) {
  Scoreboard sb;
  HostTensor a = HostTensor::random(DType::F32, {3, 4}, 1), b = HostTensor::random(DType::F32, {4}, 2);
  HostTensor sum = eager::run_op(Op::Add, {}, {a, b}, &sb)[0];
  ASSERT_EQ(sb.kernels_launched(), 1);
  const KernelRecord& r = sb.kernels()[0];
  EXPECT_EQ(r.name, "add");
  EXPECT_EQ(r.source_ops, std::vector<std::string>{"add"});
  EXPECT_EQ(r.bytes_read, 3 * 4 * 4 + 4 * 4);
  EXPECT_EQ(r.bytes_written, 3 * 4 * 4);
  EXPECT_EQ(r.flops, 12);
  EXPECT_GE(r.time_us, 0);

  HostTensor h = HostTensor::random(DType::F16, {5, 7}, 3);
  eager::run_op(Op::ReduceSum, {{"axes", Dims{1}}}, {h}, &sb);
  const KernelRecord& red = sb.kernels()[1];
  EXPECT_EQ(red.bytes_read, 5 * 7 * 2);
  EXPECT_EQ(red.bytes_written, 5 * 2);
  EXPECT_EQ(red.flops, 35);

  eager::run_op(Op::MatMul, {}, {HostTensor::random(DType::F32, {2, 7, 13}, 4), HostTensor::random(DType::F32, {13, 5}, 5)}, &sb);
  const KernelRecord& mm = sb.kernels()[2];
  EXPECT_EQ(mm.name, "matmul(openblas)");
  EXPECT_EQ(mm.flops, 2.0 * 2 * 7 * 5 * 13);
  EXPECT_EQ(mm.bytes_read, (2 * 7 * 13 + 13 * 5) * 4);
  EXPECT_EQ(mm.bytes_written, 2 * 7 * 5 * 4);

  eager::run_op(Op::Conv2d, {}, {HostTensor::random(DType::F32, {1, 2, 5, 5}, 6), HostTensor::random(DType::F32, {3, 2, 3, 3}, 7)}, &sb);
  const KernelRecord& conv = sb.kernels()[3];
  EXPECT_EQ(conv.name, "conv2d(openblas)");
  EXPECT_EQ(conv.flops, 2.0 * 1 * 3 * 3 * 3 * 2 * 3 * 3);  // 2*N*O*OH*OW*(C/groups)*kh*kw

  // A reshape shares the input's storage: a launch that moves nothing.
  HostTensor reshaped = eager::run_op(Op::Reshape, {{"shape", Shape{12}}}, {sum}, &sb)[0];
  const KernelRecord& view = sb.kernels()[4];
  EXPECT_EQ(view.name, "reshape(view)");
  EXPECT_EQ(view.bytes_read, 0);
  EXPECT_EQ(view.bytes_written, 0);
  EXPECT_EQ(reshaped.raw(), sum.raw());
  EXPECT_EQ(reshaped.shape(), Dims{12});

  EXPECT_EQ(sb.kernels_launched(), 5);
  int64_t read = 0, written = 0;
  double flops = 0, us = 0;
  for (const KernelRecord& k : sb.kernels()) read += k.bytes_read, written += k.bytes_written, flops += k.flops, us += k.time_us;
  EXPECT_EQ(sb.bytes_read(), read);
  EXPECT_EQ(sb.bytes_written(), written);
  EXPECT_EQ(sb.bytes_moved(), read + written);
  EXPECT_EQ(sb.flops(), flops);
  EXPECT_DOUBLE_EQ(sb.kernel_us(), us);
  EXPECT_GT(sb.dispatch_us(), 0);  // type inference and allocation take some time
}

TEST(EagerScoreboard, NoScoreboardMeansNoRecording) {
  HostTensor x = HostTensor::random(DType::F32, {4}, 1);
  EXPECT_EQ(eager::run_op(Op::Exp, {}, {x}).size(), 1u);
}

Scoreboard sample_board() {
  Scoreboard sb;
  sb.add(KernelRecord{"add", {"add"}, 1200, 400, 100, 2.5});
  sb.add(KernelRecord{"fused_exp_mul", {"exp", "mul"}, 3000000, 1000000, 2e6, 40.25});
  sb.add_dispatch_us(7.5);
  return sb;
}

TEST(Scoreboard, JsonHasTheDocumentedFields) {
  nlohmann::json j = nlohmann::json::parse(sample_board().to_json());
  ASSERT_TRUE(j.contains("kernels"));
  ASSERT_EQ(j["kernels"].size(), 2u);
  const auto& k = j["kernels"][1];
  EXPECT_EQ(k["name"], "fused_exp_mul");
  EXPECT_EQ(k["source_ops"], nlohmann::json({"exp", "mul"}));
  EXPECT_EQ(k["bytes_read"], 3000000);
  EXPECT_EQ(k["bytes_written"], 1000000);
  EXPECT_EQ(k["flops"], 2e6);
  EXPECT_EQ(k["time_us"], 40.25);
  const auto& t = j["totals"];
  EXPECT_EQ(t["kernels_launched"], 2);
  EXPECT_EQ(t["bytes_read"], 3001200);
  EXPECT_EQ(t["bytes_written"], 1000400);
  EXPECT_EQ(t["bytes_moved"], 4001600);
  EXPECT_EQ(t["flops"], 2000100);
  EXPECT_EQ(t["kernel_us"], 42.75);
  EXPECT_EQ(t["dispatch_us"], 7.5);
}

TEST(Scoreboard, TableShowsEachKernelAndTheTotals) {
  std::string table = sample_board().table("eager run");
  EXPECT_EQ(table.rfind("eager run\n", 0), 0u);
  for (const char* needle : {"kernel", "source ops", "bytes read", "bytes written", "FLOPs", "time us",
                             "fused_exp_mul", "exp,mul", "3001200", "1000400", "2000100", "42.8",
                             "2 kernels", "bytes moved: 4001600", "dispatch 7.5 us"})
    EXPECT_NE(table.find(needle), std::string::npos) << needle << " missing in\n" << table;
  // Columns are aligned: the header and every row have the same position for "bytes read"'s end.
  std::vector<std::string> lines;
  for (size_t start = 0, end; (end = table.find('\n', start)) != std::string::npos; start = end + 1)
    lines.push_back(table.substr(start, end - start));
  size_t header_end = lines[1].find("bytes read") + std::string("bytes read").size();
  EXPECT_EQ(lines[3].find("1200") + 4, header_end) << table;
}

TEST(Scoreboard, ClearResetsEverything) {
  Scoreboard sb = sample_board();
  sb.clear();
  EXPECT_EQ(sb.kernels_launched(), 0);
  EXPECT_EQ(sb.bytes_moved(), 0);
  EXPECT_EQ(sb.dispatch_us(), 0);
  nlohmann::json j = nlohmann::json::parse(sb.to_json());
  EXPECT_TRUE(j["kernels"].empty());
  EXPECT_EQ(j["totals"]["kernels_launched"], 0);
}

}  // namespace
}  // namespace kiln
