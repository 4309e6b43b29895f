// Pass manager: runs stages, verifies between passes, records timing and change counts, prints
// and dumps the IR after every pass run.
#include "passes/pass_manager.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "ir/text_syntax.h"
#include "kiln/error.h"

namespace kiln::passes {

namespace {

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

PassManager::PassManager(OptimizeOptions options) : options_(std::move(options)) {
  if (env_flag("KILN_VERIFY_PASSES")) options_.verify_each = true;
  if (options_.dump_dir.empty()) {
    if (const char* dir = std::getenv("KILN_DUMP"); dir != nullptr) options_.dump_dir = dir;
  }
  if (!options_.dump_dir.empty()) std::filesystem::create_directories(options_.dump_dir);
  // KILN_DISABLE_PASSES=a,b: as --disable-pass for every compile of the process (A/B measurements of
  // a pass in tools that take no pass flags: kiln-gpu-bench, the benchmarks).
  if (const char* names = std::getenv("KILN_DISABLE_PASSES"); names != nullptr) {
    std::string rest = names;
    for (size_t at = 0; at <= rest.size();) {
      size_t comma = rest.find(',', at);
      if (comma == std::string::npos) comma = rest.size();
      if (std::string name = trim(rest.substr(at, comma - at)); !name.empty()) options_.disabled_passes.insert(name);
      at = comma + 1;
    }
  }
}

void PassManager::dump(const Graph& g, const std::string& label) {
  if (options_.dump_dir.empty()) return;
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%02d-", dump_counter_++);
  std::filesystem::path path = std::filesystem::path(options_.dump_dir) / (prefix + label + ".kir");
  std::ofstream out(path);
  KILN_CHECK(out.good(), "cannot write the IR dump '", path.string(), "'");
  const size_t limit = text_syntax::TensorElision::limit();
  text_syntax::TensorElision elide(limit == SIZE_MAX ? text_syntax::kDumpTensorBytes : limit);
  out << "// " << label << "\n" << print_graph(g);
}

bool PassManager::run_one(Graph& g, const std::string& stage, const std::string& pass_name,
                          PassStats& stats) {
  std::unique_ptr<Pass> pass = create_pass(pass_name, options_);
  if (!pass) pass = target_pass(pass_name, options_);
  KILN_CHECK(pass != nullptr, "unknown pass '", pass_name, "' in stage '", stage, "'");
  PassRun record;
  record.pass = pass_name;
  record.stage = stage;
  record.nodes_before = g.num_nodes();
  auto start = std::chrono::steady_clock::now();
  try {
    record.changed = pass->run(g);
  } catch (const Error& e) {
    throw Error(str("pass '", pass_name, "' (stage '", stage, "') failed: ", e.what()));
  }
  record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  record.nodes_after = g.num_nodes();
  if (options_.verify_each) {
    try {
      verify(g);
    } catch (const Error& e) {
      throw Error(str("the graph is invalid after pass '", pass_name, "' (stage '", stage,
                      "'): ", e.what()));
    }
  }
  if (options_.record_op_counts) record.op_counts_after = op_histogram(g);
  if (options_.print_after_all)
    std::cerr << "// ----- IR after " << pass_name << " (stage " << stage << ", "
              << (record.changed ? "changed" : "unchanged") << ") -----\n"
              << print_graph(g);
  dump(g, pass_name);
  stats.runs.push_back(std::move(record));
  return stats.runs.back().changed;
}

PassStats PassManager::run(Graph& g, const Pipeline& pipeline) {
  PassStats stats;
  stats.nodes_before = g.num_nodes();
  stats.op_counts_before = op_histogram(g);
  if (options_.verify_each) {
    try {
      verify(g);
    } catch (const Error& e) {
      throw Error(str("the graph is invalid before optimization: ", e.what()));
    }
  }
  dump(g, "input");
  auto start = std::chrono::steady_clock::now();
  for (const PipelineStage& stage : pipeline) {
    int iterations = stage.to_fixed_point ? stage.max_iterations : 1;
    for (int it = 0; it < iterations; ++it) {
      bool changed = false;
      for (const PipelineEntry& entry : stage.passes) {
        if (options_.disabled_passes.count(entry.pass)) continue;
        changed |= run_one(g, stage.name, entry.pass, stats);
      }
      if (!changed) break;
    }
  }
  stats.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stats.nodes_after = g.num_nodes();
  stats.op_counts_after = op_histogram(g);
  return stats;
}

std::vector<std::string> parse_pass_list(const std::string& text) {
  std::vector<std::string> names;
  std::stringstream in(text);
  std::string item;
  OptimizeOptions defaults;
  while (std::getline(in, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    KILN_CHECK(create_pass(item, defaults) != nullptr, "unknown pass '", item,
               "' (kiln-opt --list-passes shows them all)");
    names.push_back(item);
  }
  return names;
}

Pipeline pipeline_from_list(const std::vector<std::string>& names) {
  PipelineStage stage{"passes", "the passes asked for, in order", {}, false, 1};
  for (const auto& n : names) stage.passes.push_back({n, "asked for"});
  return {stage};
}

}  // namespace kiln::passes
