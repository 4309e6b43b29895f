// kiln-opt's flags and the --stats report.
#include "passes/opt_driver.h"

#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include "kiln/error.h"
#include "passes/pass_manager.h"

namespace kiln::passes {

namespace {

bool take_value(const std::string& arg, const std::string& flag, std::string& value) {
  if (arg.rfind(flag + "=", 0) != 0) return false;
  value = arg.substr(flag.size() + 1);
  return true;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

Op op_named(const std::string& name) {
  std::optional<Op> op = op_from_name(name);
  KILN_CHECK(op.has_value(), "--native: no op named '", name, "'");
  return *op;
}

}  // namespace

std::string opt_usage() {
  return "usage: kiln-opt [flags] <input.kir | input.onnx | ->\n"
         "  --passes=a,b,...      run these passes once each, in order (default: the pipeline)\n"
         "  --disable-pass=a,...  skip these passes wherever they appear\n"
         "  --print-after-all     print the IR to stderr after every pass run\n"
         "  --dump-dir=dir        write dir/NN-<pass>.kir after every pass run (also KILN_DUMP)\n"
         "  --verify-each         run the verifier after every pass (also KILN_VERIFY_PASSES=1)\n"
         "  --no-verify-each      do not\n"
         "  --fast-math           allow rewrites that are not exact in IEEE arithmetic\n"
         "  --native=op,...       high-level ops the target keeps (default: none, all decompose)\n"
         "  --keep-all-native     decompose nothing\n"
         "  --max-fold-bytes=N    constant folding's size cap\n"
         "  --stats               print node counts by op per pass and timing (markdown) to stderr\n"
         "  --stats-title=name    the title of that report\n"
         "  --input-shape=n:d,..  ONNX input: give input n this concrete shape (repeatable)\n"
         "  --list-passes         list the registered passes\n"
         "  -o file               write the result there instead of stdout\n";
}

OptInvocation parse_opt_args(const std::vector<std::string>& args) {
  OptInvocation inv;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string v;
    if (take_value(a, "--passes", v)) {
      inv.options.pass_list = parse_pass_list(v);
      KILN_CHECK(!inv.options.pass_list.empty(), "--passes= names no pass");
    } else if (take_value(a, "--disable-pass", v)) {
      for (const auto& p : split_commas(v)) {
        parse_pass_list(p);  // rejects unknown names
        inv.options.disabled_passes.insert(p);
      }
    } else if (a == "--print-after-all") {
      inv.options.print_after_all = true;
    } else if (take_value(a, "--dump-dir", v)) {
      inv.options.dump_dir = v;
    } else if (a == "--verify-each") {
      inv.options.verify_each = true;
    } else if (a == "--no-verify-each") {
      inv.options.verify_each = false;
    } else if (a == "--fast-math") {
      inv.options.fast_math = true;
    } else if (take_value(a, "--native", v)) {
      for (const auto& name : split_commas(v)) inv.options.target.native_ops.insert(op_named(name));
    } else if (a == "--keep-all-native") {
      inv.options.target = TargetCaps::keep_all();
    } else if (take_value(a, "--max-fold-bytes", v)) {
      inv.options.max_folded_constant_bytes = std::stoll(v);
    } else if (a == "--stats") {
      inv.stats = true;
      inv.options.record_op_counts = true;
    } else if (take_value(a, "--stats-title", v)) {
      inv.stats_title = v;
    } else if (take_value(a, "--input-shape", v)) {
      size_t colon = v.rfind(':');
      KILN_CHECK(colon != std::string::npos && colon > 0, "--input-shape=", v, ": expected name:d0,d1,...");
      std::vector<int64_t> dims;
      for (const auto& d : split_commas(v.substr(colon + 1))) {
        char* end = nullptr;
        long long x = std::strtoll(d.c_str(), &end, 10);
        KILN_CHECK(!d.empty() && *end == 0 && x >= 0, "--input-shape=", v, ": dimension '", d, "' is not a non-negative integer");
        dims.push_back(x);
      }
      inv.input_shapes[v.substr(0, colon)] = dims;
    } else if (a == "--list-passes") {
      inv.list_passes = true;
    } else if (a == "-h" || a == "--help") {
      inv.help = true;
    } else if (a == "-o") {
      KILN_CHECK(i + 1 < args.size(), "-o needs a file name");
      inv.output_path = args[++i];
    } else if (a.size() > 1 && a[0] == '-') {
      throw Error(str("unknown flag '", a, "'\n", opt_usage()));
    } else {
      inv.inputs.push_back(a);
    }
  }
  return inv;
}

std::vector<std::string> split_run_line(const std::string& command) {
  std::vector<std::string> args;
  std::stringstream in(command);
  std::string word;
  bool first = true;
  while (in >> word) {
    if (first && word.find("kiln-opt") != std::string::npos) {
      first = false;
      continue;
    }
    first = false;
    if (word == "%s") continue;
    args.push_back(word);
  }
  return args;
}

std::string stats_markdown(const PassStats& stats, const std::string& title) {
  std::ostringstream out;
  // Columns: the input, then every pass run that changed the graph.
  std::vector<const PassRun*> columns;
  for (const PassRun& r : stats.runs)
    if (r.changed) columns.push_back(&r);
  std::set<std::string> ops;
  for (const auto& [op, n] : stats.op_counts_before) ops.insert(op);
  for (const PassRun* r : columns)
    for (const auto& [op, n] : r->op_counts_after) ops.insert(op);
  auto count = [](const std::map<std::string, int>& m, const std::string& op) {
    auto it = m.find(op);
    return it == m.end() ? 0 : it->second;
  };
  if (!title.empty()) out << "#### " << title << "\n\n";
  out << "Nodes by op after each pass run that changed the graph (" << stats.nodes_before << " -> "
      << stats.nodes_after << " nodes, " << stats.runs.size() << " pass runs, "
      << stats.total_seconds * 1e3 << " ms).\n\n| op | input |";
  for (size_t i = 0; i < columns.size(); ++i) out << " " << i + 1 << ". " << columns[i]->pass << " |";
  out << "\n|---|---:|";
  for (size_t i = 0; i < columns.size(); ++i) out << "---:|";
  out << "\n";
  for (const auto& op : ops) {
    out << "| " << op << " | " << count(stats.op_counts_before, op) << " |";
    for (const PassRun* r : columns) out << " " << count(r->op_counts_after, op) << " |";
    out << "\n";
  }
  out << "| **total** | " << stats.nodes_before << " |";
  for (const PassRun* r : columns) out << " " << r->nodes_after << " |";
  out << "\n\n| pass | runs | changed | ms |\n|---|---:|---:|---:|\n";
  char ms[32];
  for (const auto& [name, s] : stats.by_pass()) {
    std::snprintf(ms, sizeof ms, "%.3f", s.seconds * 1e3);
    out << "| " << name << " | " << s.runs << " | " << s.changed << " | " << ms << " |\n";
  }
  std::snprintf(ms, sizeof ms, "%.3f", stats.total_seconds * 1e3);
  out << "| **total** | " << stats.runs.size() << " | | " << ms << " |\n";
  return out.str();
}

}  // namespace kiln::passes
