// Rendering a compiled graph with its fused groups (see graph_render.h).
#include "graph_render.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "runtime/executable.h"

namespace kiln::cli {

namespace {
const char* kPalette[] = {"#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5",
                          "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5", "#fdd0a2"};

// The group computing node n, or -1 (constants, views, aliases).
int group_of(const runtime::CompiledExecutable& exe, const Node* n) {
  for (const Value* v : n->outputs) {
    auto it = exe.schedule.group_of.find(v);
    if (it != exe.schedule.group_of.end()) return it->second;
  }
  for (size_t g = 0; g < exe.schedule.groups.size(); ++g)
    for (const Node* m : exe.schedule.groups[g].nodes)
      if (m == n) return int(g);
  return -1;
}

std::string color(int group) { return group < 0 ? "#e0e0e0" : kPalette[group % 10]; }

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

std::string label(const Node* n) {
  std::string s(op_name(n->op));
  if (n->op == Op::Constant) s = "const " + n->outputs[0]->type.to_string();
  return s;
}
}  // namespace

std::string fused_graph_dot(const runtime::CompiledExecutable& exe) {
  const Graph& g = *exe.graph;
  std::ostringstream os;
  os << "digraph \"" << esc(g.name()) << "\" {\n  rankdir=TB;\n  node [shape=box, style=filled, fontname=Helvetica];\n";
  for (const Value* in : g.inputs())
    os << "  v" << in->id << " [shape=ellipse, fillcolor=\"#ffffff\", label=\"" << esc(in->name) << "\\n"
       << esc(in->type.to_string()) << "\"];\n";
  std::map<int, std::vector<const Node*>> by_group;
  for (const auto& n : g.nodes()) by_group[group_of(exe, n.get())].push_back(n.get());
  for (const auto& [grp, nodes] : by_group) {
    std::string indent = "  ";
    if (grp >= 0) {
      const auto& fg = exe.schedule.groups[size_t(grp)];
      os << "  subgraph cluster_g" << grp << " {\n    label=\"kernel " << grp << ": " << esc(fg.name())
         << (fg.library ? " (library call)" : "") << "\";\n    style=filled; fillcolor=\"#fafafa\";\n";
      indent = "    ";
    }
    for (const Node* n : nodes)
      os << indent << "n" << n->id << " [label=\"" << esc(label(n)) << "\", fillcolor=\"" << color(grp) << "\"];\n";
    if (grp >= 0) os << "  }\n";
  }
  auto src = [](const Value* v) { return v->producer ? str("n", v->producer->id) : str("v", v->id); };
  for (const auto& n : g.nodes())
    for (const Value* in : n->inputs) os << "  " << src(in) << " -> n" << n->id << ";\n";
  for (size_t i = 0; i < g.outputs().size(); ++i)
    os << "  out" << i << " [shape=ellipse, fillcolor=\"#ffffff\", label=\"output " << i << "\"];\n  "
       << src(g.outputs()[i]) << " -> out" << i << ";\n";
  os << "}\n";
  return os.str();
}

std::string fused_graph_svg(const runtime::CompiledExecutable& exe) {
  const Graph& g = *exe.graph;
  // Depth of every value's producer: inputs 0, a node 1 + its deepest operand.
  std::map<const Value*, int> depth;
  std::map<const Node*, int> node_depth;
  std::map<int, std::vector<const Node*>> rows;
  for (const auto& n : g.nodes()) {
    int d = 0;
    for (const Value* in : n->inputs) d = std::max(d, depth.count(in) ? depth[in] + 1 : 1);
    if (n->op == Op::Constant) d = 0;
    node_depth[n.get()] = d;
    for (const Value* v : n->outputs) depth[v] = d;
    rows[d].push_back(n.get());
  }
  const int w = 120, h = 26, gap_x = 14, gap_y = 30;
  size_t widest = 1;
  for (const auto& [d, nodes] : rows) widest = std::max(widest, nodes.size());
  widest = std::min<size_t>(widest, 14);  // wider rows wrap onto extra lines
  std::map<const Node*, std::pair<int, int>> pos;
  int y = 10;
  for (const auto& [d, nodes] : rows) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (i > 0 && i % widest == 0) y += h + 8;
      pos[nodes[i]] = {10 + int(i % widest) * (w + gap_x), y};
    }
    y += h + gap_y;
  }
  int width = 20 + int(widest) * (w + gap_x), height = y;
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
     << "\" font-family=\"sans-serif\" font-size=\"10\">\n<g stroke=\"#999\" stroke-width=\"0.7\">\n";
  for (const auto& n : g.nodes())
    for (const Value* in : n->inputs)
      if (in->producer && pos.count(in->producer)) {
        auto [x1, y1] = pos[in->producer];
        auto [x2, y2] = pos[n.get()];
        os << "<line x1=\"" << x1 + w / 2 << "\" y1=\"" << y1 + h << "\" x2=\"" << x2 + w / 2 << "\" y2=\"" << y2
           << "\"/>\n";
      }
  os << "</g>\n";
  for (const auto& n : g.nodes()) {
    auto [x, yy] = pos[n.get()];
    int grp = group_of(exe, n.get());
    std::string tip = grp >= 0 ? str("kernel ", grp, ": ", exe.schedule.groups[size_t(grp)].name()) : "no kernel";
    os << "<g><title>" << esc(n->describe() + " -> " + tip) << "</title><rect x=\"" << x << "\" y=\"" << yy
       << "\" width=\"" << w << "\" height=\"" << h << "\" rx=\"4\" fill=\"" << color(grp)
       << "\" stroke=\"#555\"/><text x=\"" << x + 4 << "\" y=\"" << yy + 11 << "\">" << esc(label(n.get()).substr(0, 22))
       << "</text><text x=\"" << x + 4 << "\" y=\"" << yy + 22 << "\" fill=\"#444\">"
       << (grp >= 0 ? str("k", grp) : std::string("-")) << "</text></g>\n";
  }
  os << "</svg>";
  return os.str();
}

}  // namespace kiln::cli
