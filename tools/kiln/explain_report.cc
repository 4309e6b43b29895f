// Building and rendering the explain report (see explain_report.h).
#include "explain_report.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "graph_render.h"
#include "kiln/error.h"
#include "runtime/executable.h"

namespace kiln::cli {

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}
}  // namespace

ExplainReport explain_executable(const std::string& model, Executable& exe, const std::vector<HostTensor>& inputs,
                                 const Ceilings& c, int repeats) {
  auto* compiled = dynamic_cast<runtime::CompiledExecutable*>(&exe);
  KILN_CHECK(compiled != nullptr, "explain: the executable is not a compiled CPU executable");
  KILN_CHECK(repeats >= 1, "--repeats must be at least 1, got ", repeats);
  ExplainReport r;
  r.model = model;
  r.repeats = repeats;
  r.ceilings = c;
  r.generated_kernels = exe.stats().kernels_generated;
  r.library_calls = exe.stats().library_calls;
  exe.run(inputs);  // warm up
  std::vector<Scoreboard> boards(static_cast<size_t>(repeats));
  std::vector<double> run_us;
  for (auto& sb : boards) {
    const auto t0 = std::chrono::steady_clock::now();
    exe.run(inputs, &sb);
    run_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  r.run_us = median(run_us);
  const Scoreboard& first = boards[0];
  // Every step adds one record but the kernels a oneDNN primitive runs as post-ops.
  std::vector<size_t> step_of_record;
  for (size_t i = 0; i < compiled->steps.size(); ++i)
    if (!compiled->folded_steps.count(i)) step_of_record.push_back(i);
  for (size_t k = 0; k < first.kernels().size(); ++k) {
    const KernelRecord& rec = first.kernels()[k];
    KernelExplain ke;
    ke.index = int(k);
    ke.name = rec.name;
    if (k < step_of_record.size()) {
      ke.library = compiled->steps[step_of_record[k]].library;
      ke.implementation = compiled->step_note(step_of_record[k]);
    }
    ke.source_ops = rec.source_ops;
    ke.bytes_read = rec.bytes_read;
    ke.bytes_written = rec.bytes_written;
    ke.flops = rec.flops;
    int64_t bytes = rec.bytes_read + rec.bytes_written;
    ke.intensity = bytes > 0 ? rec.flops / double(bytes) : 0;
    std::vector<double> times;
    for (const auto& sb : boards) times.push_back(sb.kernels().at(k).time_us);
    ke.time_us = median(times);
    ke.launch_us = c.launch_us;
    ke.bandwidth_us = double(bytes) / (c.copy_gbps * 1e3);
    ke.compute_us = rec.flops / (c.gemm_gflops * 1e3);
    ke.bound_us = std::max({ke.launch_us, ke.bandwidth_us, ke.compute_us});
    ke.regime = ke.bound_us == ke.compute_us ? "compute" : ke.bound_us == ke.bandwidth_us ? "bandwidth" : "launch";
    ke.percent_of_ceiling = ke.time_us > 0 ? 100.0 * ke.bound_us / ke.time_us : 0;
    r.kernel_us += ke.time_us;
    r.bound_us += ke.bound_us;
    (ke.regime == "compute" ? r.compute_total_us : ke.regime == "bandwidth" ? r.bandwidth_total_us : r.launch_total_us) +=
        ke.time_us;
    r.kernels.push_back(ke);
  }
  for (const auto& d : compiled->schedule.decisions) {
    DecisionExplain de;
    de.node = d.node->describe();
    de.op = std::string(op_name(d.node->op));
    de.action = d.action;
    de.reason = d.reason;
    de.group = d.group;
    de.refusals = d.refusals;
    r.decisions.push_back(de);
  }
  r.decomposition_notes = compiled->decomposition_notes;
  r.graph_svg = fused_graph_svg(*compiled);
  return r;
}

std::string ExplainReport::to_text() const {
  std::ostringstream os;
  os << "kiln explain: " << model << "  (" << generated_kernels << " generated kernels, " << library_calls
     << " library calls; median of " << repeats << " runs)\n"
     << "ceilings: copy " << fmt("%.1f", ceilings.copy_gbps) << " GB/s, sgemm " << fmt("%.1f", ceilings.gemm_gflops)
     << " GFLOP/s, launch " << fmt("%.2f", ceilings.launch_us) << " us"
     << (ceilings.quick ? " (quick calibration; `kiln calibrate` measures fully)" : "") << "\n\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-3s %-34s %10s %10s %10s %7s %10s %10s  %-9s %6s\n", "#", "kernel", "read",
                "written", "FLOPs", "FLOP/B", "time us", "bound us", "regime", "%ceil");
  os << line;
  for (const auto& k : kernels) {
    std::string name = k.name.size() > 34 ? k.name.substr(0, 31) + "..." : k.name;
    std::snprintf(line, sizeof line, "%-3d %-34s %10lld %10lld %10.3g %7.2f %10.2f %10.2f  %-9s %5.1f%%\n", k.index,
                  name.c_str(), static_cast<long long>(k.bytes_read), static_cast<long long>(k.bytes_written),
                  k.flops, k.intensity, k.time_us, k.bound_us, k.regime.c_str(), k.percent_of_ceiling);
    os << line << "      from: " << join(k.source_ops, ", ") << (k.library ? "  [library call]" : "") << "\n";
    if (!k.implementation.empty()) os << "      runs on: " << k.implementation << "\n";
  }
  os << "\nfusion decisions:\n";
  for (const auto& note : decomposition_notes) os << "  " << note << "\n";
  for (const auto& d : decisions) {
    os << "  " << d.node << " -> " << d.action;
    std::string why = d.reason.substr(0, d.reason.find("; "));
    if (!d.refusals.empty() && why == d.refusals.front()) why.clear();
    if (!why.empty()) os << ": " << why;
    os << "\n";
    for (const auto& r : d.refusals) os << "      refused: " << r << "\n";
  }
  os << "\nwhere the time goes: " << fmt("%.1f", kernel_us) << " us in kernels, run " << fmt("%.1f", run_us)
     << " us (dispatch " << fmt("%.1f", std::max(0.0, run_us - kernel_us)) << " us)\n";
  auto share = [&](double us) { return kernel_us > 0 ? fmt("%.0f%%", 100 * us / kernel_us) : std::string("0%"); };
  os << "  launch-bound kernels " << fmt("%.1f", launch_total_us) << " us (" << share(launch_total_us)
     << "), bandwidth-bound " << fmt("%.1f", bandwidth_total_us) << " us (" << share(bandwidth_total_us)
     << "), compute-bound " << fmt("%.1f", compute_total_us) << " us (" << share(compute_total_us) << ")\n";
  std::vector<const KernelExplain*> top;
  for (const auto& k : kernels) top.push_back(&k);
  std::sort(top.begin(), top.end(), [](auto* a, auto* b) { return a->time_us > b->time_us; });
  os << "  slowest:";
  for (size_t i = 0; i < std::min<size_t>(3, top.size()); ++i)
    os << (i ? ", " : " ") << top[i]->name << " " << fmt("%.1f", top[i]->time_us) << " us ("
       << fmt("%.0f", top[i]->percent_of_ceiling) << "% of its " << top[i]->regime << " ceiling)";
  os << "\n  roofline: the kernels could take " << fmt("%.1f", bound_us) << " us at the ceilings; they take "
     << fmt("%.1f", kernel_us) << " us (" << fmt("%.0f", kernel_us > 0 ? 100 * bound_us / kernel_us : 0)
     << "% of roofline)\n";
  bool above = false;
  for (const auto& k : kernels) above |= k.percent_of_ceiling > 100;
  if (above)
    os << "  (above 100%: the kernel's data stayed in cache; the bandwidth ceiling is the DRAM copy rate)\n";
  return os.str();
}

std::string ExplainReport::to_json() const {
  using nlohmann::json;
  json j;
  j["model"] = model;
  j["repeats"] = repeats;
  j["ceilings"] = json::parse(ceilings.to_json());
  j["kernels"] = json::array();
  for (const auto& k : kernels)
    j["kernels"].push_back({{"index", k.index},
                            {"name", k.name},
                            {"library", k.library},
                            {"implementation", k.implementation},
                            {"source_ops", k.source_ops},
                            {"bytes_read", k.bytes_read},
                            {"bytes_written", k.bytes_written},
                            {"flops", k.flops},
                            {"arithmetic_intensity", k.intensity},
                            {"time_us", k.time_us},
                            {"bounds_us", {{"launch", k.launch_us}, {"bandwidth", k.bandwidth_us}, {"compute", k.compute_us}}},
                            {"bound_us", k.bound_us},
                            {"regime", k.regime},
                            {"percent_of_ceiling", k.percent_of_ceiling}});
  j["fusion"]["decisions"] = json::array();
  for (const auto& d : decisions)
    j["fusion"]["decisions"].push_back({{"node", d.node},
                                        {"op", d.op},
                                        {"action", d.action},
                                        {"group", d.group},
                                        {"reason", d.reason},
                                        {"refusals", d.refusals}});
  j["fusion"]["decomposition_notes"] = decomposition_notes;
  j["summary"] = {{"kernels", kernels.size()},
                  {"generated_kernels", generated_kernels},
                  {"library_calls", library_calls},
                  {"run_us", run_us},
                  {"kernel_us", kernel_us},
                  {"dispatch_us", std::max(0.0, run_us - kernel_us)},
                  {"bound_us", bound_us},
                  {"percent_of_roofline", kernel_us > 0 ? 100 * bound_us / kernel_us : 0},
                  {"time_by_regime_us", {{"launch", launch_total_us}, {"bandwidth", bandwidth_total_us}, {"compute", compute_total_us}}}};
  return j.dump(2) + "\n";
}

std::string ExplainReport::to_html() const {
  std::ostringstream os;
  os << "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>kiln explain: " << html_escape(model)
     << "</title>\n<style>body{font:14px sans-serif;margin:24px}table{border-collapse:collapse}"
        "td,th{padding:2px 8px;text-align:right;border-bottom:1px solid #ddd}td.l,th.l{text-align:left}"
        ".bar{height:12px;display:inline-block}.launch{background:#9e9e9e}.bandwidth{background:#1f77b4}"
        ".compute{background:#d62728}.ceil{background:#2ca02c;height:4px;display:block}pre{background:#f6f6f6;padding:8px}"
        "</style></head><body>\n<h1>kiln explain: "
     << html_escape(model) << "</h1>\n<p>" << generated_kernels << " generated kernels, " << library_calls
     << " library calls; median of " << repeats << " runs. Ceilings: copy " << fmt("%.1f", ceilings.copy_gbps)
     << " GB/s, sgemm " << fmt("%.1f", ceilings.gemm_gflops) << " GFLOP/s, launch " << fmt("%.2f", ceilings.launch_us)
     << " us.</p>\n<h2>Kernels</h2>\n<p>Bar: measured time, coloured by the binding regime "
        "(<span class=\"bar launch\" style=\"width:12px\"></span> launch "
        "<span class=\"bar bandwidth\" style=\"width:12px\"></span> bandwidth "
        "<span class=\"bar compute\" style=\"width:12px\"></span> compute); green line: the roofline bound.</p>\n"
        "<table><tr><th>#</th><th class=\"l\">kernel</th><th class=\"l\">source ops</th><th>read B</th><th>written B</th>"
        "<th>FLOPs</th><th>FLOP/B</th><th>time us</th><th>bound us</th><th>% ceiling</th><th class=\"l\">time</th></tr>\n";
  double longest = 0;
  for (const auto& k : kernels) longest = std::max(longest, k.time_us);
  for (const auto& k : kernels) {
    double w = longest > 0 ? 300 * k.time_us / longest : 0, b = longest > 0 ? 300 * k.bound_us / longest : 0;
    os << "<tr><td>" << k.index << "</td><td class=\"l\">" << html_escape(k.name) << "</td><td class=\"l\">"
       << html_escape(join(k.source_ops, ", ")) << "</td><td>" << k.bytes_read << "</td><td>" << k.bytes_written
       << "</td><td>" << fmt("%.3g", k.flops) << "</td><td>" << fmt("%.2f", k.intensity) << "</td><td>"
       << fmt("%.2f", k.time_us) << "</td><td>" << fmt("%.2f", k.bound_us) << "</td><td>"
       << fmt("%.1f", k.percent_of_ceiling) << "</td><td class=\"l\"><span class=\"bar " << k.regime
       << "\" style=\"width:" << fmt("%.1f", std::max(1.0, w)) << "px\"></span><span class=\"ceil\" style=\"width:"
       << fmt("%.1f", std::min(300.0, b)) << "px\"></span></td></tr>\n";
  }
  os << "</table>\n<h2>Graph</h2>\n<p>Nodes coloured by the kernel (fused group) that computes them; grey: "
        "constants, inputs, views and aliases.</p>\n"
     << graph_svg << "\n<h2>Summary</h2>\n<pre>";
  std::string text = to_text();
  os << html_escape(text.substr(text.find("where the time goes"))) << "</pre>\n<h2>Fusion decisions</h2>\n<ul>\n";
  for (const auto& d : decisions) {
    os << "<li><code>" << html_escape(d.node) << "</code> &rarr; " << html_escape(d.action) << ": "
       << html_escape(d.reason.substr(0, d.reason.find("; ")));
    for (const auto& r : d.refusals) os << "<br>&nbsp;&nbsp;refused: " << html_escape(r);
    os << "</li>\n";
  }
  os << "</ul>\n</body></html>\n";
  return os.str();
}

}  // namespace kiln::cli
