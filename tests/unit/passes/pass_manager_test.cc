// The pass manager: registry, pass lists, disabling, fixed points, stats, dumps and verification.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kiln/error.h"
#include "kiln/passes.h"
#include "passes/opt_driver.h"
#include "passes/pass_manager.h"
#include "passes/pipelines.h"

using namespace kiln;
using namespace kiln::passes;

namespace {

const char* kDuplicates =
    "graph @main(%x: f32[4]) {\n"
    "  %a = exp(%x) : f32[4]\n"
    "  %b = exp(%x) : f32[4]\n"
    "  %dead = neg(%x) : f32[4]\n"
    "  %c = add(%a, %b) : f32[4]\n"
    "  return %c\n"
    "}\n";

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

OptimizeOptions verified() {
  OptimizeOptions o;
  o.verify_each = true;
  return o;
}

}  // namespace

TEST(PassManager, EveryRegisteredPassIsCreatedUnderItsName) {
  auto passes = registered_passes();
  EXPECT_EQ(passes.size(), 9u);
  for (const auto& [name, why] : passes) {
    std::unique_ptr<Pass> p = create_pass(name, OptimizeOptions{});
    ASSERT_NE(p, nullptr) << name;
    EXPECT_EQ(p->name(), name);
    EXPECT_FALSE(why.empty());
  }
  EXPECT_EQ(create_pass("no-such-pass", OptimizeOptions{}), nullptr);
}

TEST(PassManager, EveryPipelineEntryNamesARegisteredPassAndSaysWhy) {
  for (const PipelineStage& stage : default_pipeline()) {
    EXPECT_FALSE(stage.reason.empty()) << stage.name;
    for (const PipelineEntry& e : stage.passes) {
      EXPECT_NE(create_pass(e.pass, OptimizeOptions{}), nullptr) << e.pass;
      EXPECT_FALSE(e.reason.empty()) << e.pass;
    }
  }
}

TEST(PassManager, PassListsRejectUnknownNames) {
  EXPECT_EQ(parse_pass_list("cse, dce"), (std::vector<std::string>{"cse", "dce"}));
  std::string msg = error_of([] { parse_pass_list("cse,cs"); });
  EXPECT_NE(msg.find("unknown pass 'cs'"), std::string::npos) << msg;
  msg = error_of([] { parse_opt_args({"--disable-pass=nope"}); });
  EXPECT_NE(msg.find("'nope'"), std::string::npos) << msg;
  msg = error_of([] { parse_opt_args({"--frobnicate"}); });
  EXPECT_NE(msg.find("--frobnicate"), std::string::npos) << msg;
}

TEST(PassManager, RecordsRunsChangesAndNodeCounts) {
  auto g = parse_graph(kDuplicates);
  OptimizeOptions o = verified();
  o.pass_list = {"cse", "dce", "cse"};
  o.record_op_counts = true;
  PassStats stats = optimize(*g, o);
  ASSERT_EQ(stats.runs.size(), 3u);
  EXPECT_TRUE(stats.runs[0].changed);
  EXPECT_EQ(stats.runs[0].nodes_before, 4);
  EXPECT_EQ(stats.runs[0].nodes_after, 3);
  EXPECT_TRUE(stats.runs[1].changed);   // the dead neg
  EXPECT_FALSE(stats.runs[2].changed);  // nothing left to merge
  EXPECT_EQ(stats.nodes_before, 4);
  EXPECT_EQ(stats.nodes_after, 2);
  EXPECT_EQ(stats.op_counts_before.at("exp"), 2);
  EXPECT_EQ(stats.runs[0].op_counts_after.at("exp"), 1);
  EXPECT_EQ(stats.by_pass().at("cse").runs, 2);
  EXPECT_EQ(stats.by_pass().at("cse").changed, 1);
  std::string report = stats_markdown(stats, "dups");
  EXPECT_NE(report.find("| exp | 2 | 1 |"), std::string::npos) << report;
}

TEST(PassManager, DisabledPassesDoNotRun) {
  auto g = parse_graph(kDuplicates);
  OptimizeOptions o = verified();
  o.disabled_passes = {"cse", "algebraic-simplification"};
  PassStats stats = optimize(*g, o);
  for (const PassRun& r : stats.runs) {
    EXPECT_NE(r.pass, "cse");
    EXPECT_NE(r.pass, "algebraic-simplification");
  }
  EXPECT_EQ(op_histogram(*g).at("exp"), 2);
}

TEST(PassManager, FixedPointStagesStopWhenNothingChanges) {
  auto g = parse_graph("graph @main(%x: f32[4]) {\n  %a = exp(%x) : f32[4]\n  return %a\n}\n");
  PassStats stats = optimize(*g, verified());
  size_t entries = 0;
  for (const PipelineStage& s : default_pipeline()) entries += s.passes.size();
  EXPECT_EQ(stats.runs.size(), entries);  // one round per stage: nothing ever changes
  for (const PassRun& r : stats.runs) EXPECT_FALSE(r.changed) << r.pass;
}

TEST(PassManager, DumpsTheIrAfterEveryPassRun) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "kiln_pass_dump_test";
  std::filesystem::remove_all(dir);
  auto g = parse_graph(kDuplicates);
  OptimizeOptions o = verified();
  o.pass_list = {"cse", "dce"};
  o.dump_dir = dir.string();
  optimize(*g, o);
  EXPECT_TRUE(std::filesystem::exists(dir / "00-input.kir"));
  EXPECT_TRUE(std::filesystem::exists(dir / "01-cse.kir"));
  ASSERT_TRUE(std::filesystem::exists(dir / "02-dce.kir"));
  std::ifstream in(dir / "02-dce.kir");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(print_graph(*parse_graph(text)), print_graph(*g));  // dumps parse back
  std::filesystem::remove_all(dir);
}

TEST(PassManager, EnvironmentTurnsVerificationOn) {
  OptimizeOptions o;
  o.verify_each = false;
  setenv("KILN_VERIFY_PASSES", "1", 1);
  EXPECT_TRUE(PassManager(o).options().verify_each);
  unsetenv("KILN_VERIFY_PASSES");
  EXPECT_FALSE(PassManager(o).options().verify_each);
}

TEST(PassManager, ErrorsNameThePassAndStage) {
  auto g = parse_graph(kDuplicates);
  PassManager manager(verified());
  Pipeline bad = {{"mine", "test", {{"cse", "ok"}, {"not-a-pass", "typo"}}, false, 1}};
  std::string msg = error_of([&] { manager.run(*g, bad); });
  EXPECT_NE(msg.find("'not-a-pass'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'mine'"), std::string::npos) << msg;
}
