// The fusion scheduler (see fusion.h). Nodes are visited in graph order; each elementwise or
// reduction node tries to join the group of one of its operands, newest first, and every refusal
// is kept with its reason. Groups only depend on groups with smaller ids, so id order runs.
#include "lower/fusion.h"

#include <algorithm>
#include <sstream>

#include "kiln/error.h"
#include "lower/strided_view.h"
#include "lower/view_rules.h"

namespace kiln::lower {

namespace {

enum class NodeKind { kConstant, kView, kPointwise, kReduction, kLibrary };

NodeKind classify(const Node& n, const ScheduleOptions& opt) {
  if (n.op == Op::Constant) return NodeKind::kConstant;  // literal data, not work
  // String tensors live in host memory beside the buffers: no view or kernel may read them.
  if (n.has_string_values()) return NodeKind::kLibrary;
  if (is_index_view(n)) return NodeKind::kView;
  bool generated = opt.can_generate && opt.can_generate(n);
  if (generated && n.info().has(kElementwise)) return NodeKind::kPointwise;
  if (generated && n.info().has(kReduction)) return NodeKind::kReduction;
  return NodeKind::kLibrary;
}

std::string value_label(const Value* v) { return v->name.empty() ? str("%", v->id) : v->name; }

std::vector<bool> reduction_mask(const Node& n) {
  int rank = n.inputs[0]->type.rank();
  const auto& axes = n.attrs.get_ints("axes");
  std::vector<bool> mask(size_t(rank), axes.empty());
  for (int64_t a : axes) mask[size_t(a < 0 ? a + rank : a)] = true;
  return mask;
}

struct Scheduler {
  const Graph& g;
  const ScheduleOptions& opt;
  Schedule s;
  std::map<const Node*, NodeKind> kinds;

  int new_group(const Node* n, bool library) {
    FusionGroup grp;
    grp.id = int(s.groups.size());
    grp.library = library;
    grp.nodes = {n};
    s.groups.push_back(grp);
    return grp.id;
  }

  void add_member(FusionGroup& grp, const Node* n, bool row) {
    if (std::find(grp.nodes.begin(), grp.nodes.end(), n) == grp.nodes.end()) grp.nodes.push_back(n);
    for (const Value* out : n->outputs) {
      s.residence[out] = Residence::kInternal;
      s.group_of[out] = grp.id;
      if (row) grp.row_level.insert(out);
    }
  }

  // Why n cannot join grp (empty when it can); sets *row to the level it would have.
  std::string refusal(const Node* n, const FusionGroup& grp, bool* row) const {
    for (const Value* in : n->inputs) {
      const Value* root = s.storage_of(in);
      Residence r = s.residence.at(in);
      auto it = s.group_of.find(root);
      if (it == s.group_of.end()) continue;
      if ((r == Residence::kView || r == Residence::kAlias) && it->second == grp.id)
        return str("reads ", value_label(in), ", a view of a value this group computes (needs another index)");
      if (it->second > grp.id)
        return str("would create a cycle: operand ", value_label(in), " comes from later group ", it->second);
    }
    if (kinds.at(n) == NodeKind::kPointwise) {
      bool all_row = true;
      for (const Value* in : n->inputs)
        if (s.group_of.count(in) && s.group_of.at(in) == grp.id && !grp.row_level.count(in)) all_row = false;
      const Shape& shape = n->outputs[0]->type.shape;
      if (grp.has_reduction && all_row && is_row_shape(grp, shape)) {
        *row = true;
        return "";
      }
      *row = false;
      if (shape == grp.space) return "";
      return str("different iteration space (", shape_to_string(shape), " vs group space ",
                 shape_to_string(grp.space), ")");
    }
    // A reduction: its operand must be a full-level value of this group over the same axes.
    const Value* x = n->inputs[0];
    *row = true;
    if (opt.tails_fold_into_library_calls && library_tail_stored(grp, n))
      return "the group is the elementwise tail of a conv/matmul and is stored anyway: it folds into the "
             "library call, and the reduction reads its result";
    if (grp.row_level.count(x))
      return "would recompute a reduction (its operand is itself a reduction result of this group)";
    if (!(x->type.shape == grp.space)) return "different iteration space";
    if (grp.has_reduction && reduction_mask(*n) != grp.reduced)
      return "different iteration space (reduces other axes than the group's reductions)";
    return "";
  }

  // Whether grp is all elementwise, reads a conv's or matmul's result, and some value of it has a
  // reader other than grp's members and the reduction r (so it is stored whatever r does).
  bool library_tail_stored(const FusionGroup& grp, const Node* r) const {
    if (grp.has_reduction) return false;
    bool after_library = false;
    for (const Node* m : grp.nodes) {
      if (kinds.at(m) != NodeKind::kPointwise) return false;
      for (const Value* in : m->inputs) {
        auto it = s.group_of.find(s.storage_of(in));
        if (it == s.group_of.end() || !s.groups[size_t(it->second)].library) continue;
        const Op op = s.groups[size_t(it->second)].nodes[0]->op;
        after_library = after_library || op == Op::Conv2d || op == Op::MatMul;
      }
    }
    if (!after_library) return false;
    for (const Node* m : grp.nodes)
      for (const Value* out : m->outputs) {
        if (g.is_output(out)) return true;
        for (const Use& u : out->uses)
          if (u.user != r && std::find(grp.nodes.begin(), grp.nodes.end(), u.user) == grp.nodes.end()) return true;
      }
    return false;
  }

  void visit_fusable(const Node* n) {
    FusionDecision d;
    d.node = n;
    std::vector<int> candidates;
    std::string notes;
    for (const Value* in : n->inputs) {
      const Value* root = s.storage_of(in);
      if (!root->producer) continue;
      auto it = s.group_of.find(root);
      if (it == s.group_of.end()) continue;
      const FusionGroup& pg = s.groups[size_t(it->second)];
      if (pg.library) {
        d.refusals.push_back(str("operand ", value_label(in), " from ", pg.name(), ": library call boundary"));
        notes += "; " + d.refusals.back();
      } else if (s.residence.at(in) == Residence::kInternal) {
        candidates.push_back(it->second);
      }
    }
    std::sort(candidates.rbegin(), candidates.rend());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    for (int c : candidates) {
      if (!opt.fuse) {
        d.refusals.push_back(str("not group ", c, ": fusion disabled"));
        notes += "; " + d.refusals.back();
        break;
      }
      FusionGroup& grp = s.groups[size_t(c)];
      bool row = false;
      std::string why = refusal(n, grp, &row);
      if (!why.empty()) {
        d.refusals.push_back(str("not group ", c, ": ", why));
        notes += "; " + d.refusals.back();
        continue;
      }
      if (kinds.at(n) == NodeKind::kReduction) {
        d.reason = grp.has_reduction ? "another reduction over the same axes (multi-pass kernel)"
                                     : "reduction takes its pointwise prologue";
        grp.reduced = reduction_mask(*n);
        grp.has_reduction = true;
      } else {
        d.reason = row ? "row-level epilogue of the group's reduction" : "same iteration space";
      }
      add_member(grp, n, row);
      d.group = c;
      d.action = str("joins group ", c);
      d.reason += notes;
      s.decisions.push_back(d);
      return;
    }
    int id = new_group(n, false);
    FusionGroup& grp = s.groups[size_t(id)];
    if (kinds.at(n) == NodeKind::kReduction) {
      grp.space = n->inputs[0]->type.shape;
      grp.reduced = reduction_mask(*n);
      grp.has_reduction = true;
      add_member(grp, n, true);
    } else {
      grp.space = n->outputs[0]->type.shape;
      grp.reduced.assign(grp.space.size(), false);
      add_member(grp, n, false);
    }
    d.group = id;
    d.action = str("starts group ", id);
    d.reason = candidates.empty() ? str("no fusable producer", notes) : notes.substr(2);
    s.decisions.push_back(d);
  }

  void visit_view(const Node* n) {
    FusionDecision d;
    d.node = n;
    const Value* in = n->inputs[0];
    const Value* out = n->outputs[0];
    Residence r = s.residence.at(in);
    if (is_reshape_view(*n) && r != Residence::kView) {
      s.residence[out] = Residence::kAlias;
      s.alias_root[out] = s.storage_of(in);
      d.action = "alias";
      d.reason = "reshape of a contiguous buffer: the same bytes with another shape";
      s.decisions.push_back(d);
      return;
    }
    s.residence[out] = Residence::kView;
    bool needs_copy = g.is_output(out);
    for (const Use& u : out->uses)
      if (kinds.at(u.user) == NodeKind::kLibrary && !read_in_place(u, out)) needs_copy = true;
    if (!needs_copy) {
      d.action = "view";
      d.reason = "consumers compute addresses through it (no copy)";
      s.decisions.push_back(d);
      return;
    }
    int id = new_group(n, false);
    FusionGroup& grp = s.groups[size_t(id)];
    grp.space = out->type.shape;
    grp.reduced.assign(grp.space.size(), false);
    add_member(grp, n, false);
    d.group = id;
    d.action = str("starts group ", id);
    d.reason = "view materialised: a library call or the graph output needs it contiguous";
    s.decisions.push_back(d);
  }

  // Whether library use u reads view `out` in place: attention's q, k, v where the kernel takes
  // strides (ScheduleOptions::attention_reads_views) and the view is one it can walk, 16-byte
  // aligned for its copies; its additive mask (read an element at a time) wherever it is strided.
  bool read_in_place(const Use& u, const Value* out) const {
    if (!opt.attention_reads_views || u.user->op != Op::Attention || u.operand_index > 3) return false;
    auto view = strided_view(out, [&](const Value* v) { return s.is_view(v); });
    if (!view) return false;
    if (u.operand_index == 3) return true;
    std::vector<int64_t> dims;
    for (const SymInt& d : out->type.shape) dims.push_back(d.constant());  // static: strided_view checked
    return batched_rows(dims, *view, dtype_size(out->type.dtype)).has_value();
  }

  void run() {
    for (const Value* in : g.inputs()) s.residence[in] = Residence::kBuffer;
    for (const auto& n : g.nodes()) kinds[n.get()] = classify(*n, opt);
    for (const auto& node : g.nodes()) {
      const Node* n = node.get();
      switch (kinds[n]) {
        case NodeKind::kConstant:
          s.residence[n->outputs[0]] = Residence::kBuffer;
          break;
        case NodeKind::kView: visit_view(n); break;
        case NodeKind::kPointwise:
        case NodeKind::kReduction: visit_fusable(n); break;
        case NodeKind::kLibrary: {
          int id = new_group(n, true);
          for (const Value* out : n->outputs) {
            s.residence[out] = Residence::kBuffer;
            s.group_of[out] = id;
          }
          FusionDecision d;
          d.node = n;
          d.group = id;
          d.action = "library call";
          d.reason = n->info().has(kContraction) ? "contraction: BLAS / library kernel"
                                                 : "no generated kernel for this op: fallback kernel";
          s.decisions.push_back(d);
          break;
        }
      }
    }
    // A member is stored when the graph returns it or anything outside its group reads it.
    for (auto& grp : s.groups) {
      if (grp.library) {
        for (const Value* out : grp.nodes[0]->outputs) grp.outputs.push_back(out);
        continue;
      }
      for (const Node* n : grp.nodes) {
        for (const Value* out : n->outputs) {
          bool stored = g.is_output(out);
          for (const Use& u : out->uses) {
            auto it = std::find(grp.nodes.begin(), grp.nodes.end(), u.user);
            if (it == grp.nodes.end()) stored = true;
          }
          if (stored) {
            grp.outputs.push_back(out);
            s.residence[out] = Residence::kBuffer;
          }
        }
      }
    }
  }
};

}  // namespace

bool is_row_shape(const FusionGroup& grp, const Shape& shape) {
  if (!grp.has_reduction) return false;
  Shape keep, drop;
  for (size_t d = 0; d < grp.space.size(); ++d) {
    keep.push_back(grp.reduced[d] ? SymInt(1) : grp.space[d]);
    if (!grp.reduced[d]) drop.push_back(grp.space[d]);
  }
  return shape == keep || shape == drop;
}

std::string FusionGroup::name() const {
  if (library) return std::string(op_name(nodes[0]->op));
  std::string out = "fused";
  int shown = 0;
  for (const Node* n : nodes) {
    if (shown++ == 6) {
      out += str("_and", nodes.size() - 6);
      break;
    }
    out += "_" + std::string(op_name(n->op));
  }
  return out;
}

bool Schedule::is_view(const Value* v) const {
  auto it = residence.find(v);
  return it != residence.end() && it->second == Residence::kView;
}

const Value* Schedule::storage_of(const Value* v) const {
  while (true) {
    Residence r = residence.at(v);
    if (r != Residence::kView && r != Residence::kAlias) return v;
    v = v->producer->inputs[0];
  }
}

const Value* Schedule::buffer_of(const Value* v) const {
  auto it = alias_root.find(v);
  return it == alias_root.end() ? v : it->second;
}

std::string Schedule::explain() const {
  std::ostringstream os;
  os << "fusion decisions:\n";
  for (const auto& d : decisions)
    os << "  " << d.node->describe() << " -> " << d.action << (d.reason.empty() ? "" : ": ")
       << d.reason << "\n";
  os << "groups (execution order):\n";
  for (const auto& grp : groups) {
    os << "  group " << grp.id << " " << grp.name() << (grp.library ? " [library call]" : "");
    if (!grp.library) {
      os << " space " << shape_to_string(grp.space);
      if (grp.has_reduction) {
        os << " reduces dims {";
        bool first = true;
        for (size_t d = 0; d < grp.reduced.size(); ++d)
          if (grp.reduced[d]) os << (first ? "" : ", ") << d, first = false;
        os << "}";
      }
    }
    os << " stores";
    for (const Value* v : grp.outputs) os << " " << value_label(v);
    os << "\n";
  }
  return os.str();
}

Schedule schedule(const Graph& g, const ScheduleOptions& options) {
  Scheduler sch{g, options, {}, {}};
  sch.run();
  return std::move(sch.s);
}

}  // namespace kiln::lower
