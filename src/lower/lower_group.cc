// Group -> Loop IR (see lower_group.h). Values are built in the iteration space's own coordinates
// i0..i{r-1}; once every access is known, adjacent dims whose strides chain are merged into one
// loop and the parallel/vector schedule is chosen.
#include "lower/lower_group.h"

#include <functional>
#include <set>

#include "kiln/error.h"
#include "lower/view_rules.h"

namespace kiln::lower {

std::optional<Fold> reduction_fold(Op op, bool* divide_by_count) {
  *divide_by_count = false;
  switch (op) {
    case Op::ReduceSum: return Fold::Sum;
    case Op::ReduceMean: *divide_by_count = true; return Fold::Sum;
    case Op::ReduceProd: return Fold::Prod;
    case Op::ReduceMax: return Fold::Max;
    case Op::ReduceMin: return Fold::Min;
    default: return std::nullopt;
  }
}

namespace {

bool is_constant_one(const SymInt& x) { return x.is_constant() && x.constant() == 1; }

struct GroupLowering {
  GroupLowering(const Schedule& sched, const FusionGroup& group, const LowerContext& context)
      : s(sched), grp(group), ctx(context) {}
  const Schedule& s;
  const FusionGroup& grp;
  const LowerContext& ctx;
  LoweredKernel out;
  std::map<const Value*, int> param_of;
  std::map<std::string, SymInt> rename;
  std::string prefix = "i";
  int rank = 0;
  Coords F;
  std::set<const Node*> members;
  std::vector<Stmt>* row_body = nullptr;
  std::map<const Value*, ScalarPtr> row_memo;
  std::vector<Stmt>* full_body = nullptr;
  std::map<const Value*, ScalarPtr> full_memo;
  int next_let = 0;

  SymInt ren(const SymInt& x) const { return x.substitute(rename); }
  std::string var(int d) const { return prefix + std::to_string(d); }

  int param(const Value* buffer, bool is_output) {
    auto it = param_of.find(buffer);
    if (it != param_of.end()) {
      if (is_output) out.kernel.params[size_t(it->second)].is_output = true;
      return it->second;
    }
    KernelParam p;
    p.label = buffer->name.empty() ? str("%", buffer->id) : buffer->name;
    p.dtype = buffer->type.dtype;
    p.is_output = is_output;
    p.numel = ren(buffer->type.numel());
    out.kernel.params.push_back(p);
    out.param_values.push_back(buffer);
    int id = int(out.kernel.params.size()) - 1;
    param_of[buffer] = id;
    return id;
  }

  bool in_group(const Value* v) const { return v->producer && members.count(v->producer); }

  Coords row_coords(const Shape& shape) const {
    Coords c;
    for (int d = 0; d < rank; ++d) {
      if (!grp.reduced[size_t(d)]) c.push_back(F[size_t(d)]);
      else if (int(shape.size()) == rank) c.push_back(SymInt(0));
    }
    return c;
  }

  ScalarPtr load_external(const Value* v, Coords coords) {
    while (s.residence_of(v) == Residence::kView) {
      coords = view_input_coords(*v->producer, coords);
      v = v->producer->inputs[0];
    }
    if (v->producer && v->producer->op == Op::Constant) {
      const HostTensor& t = v->producer->attrs.get_tensor("value");
      double x = t.numel() == 1 ? t.get_f64(0) : 0;
      if (t.numel() == 1 && (is_float(t.dtype()) || std::abs(x) < 9.0e15))
        return Scalar::constant(t.dtype(), x);
    }
    const Value* buffer = s.buffer_of(v);
    return Scalar::load(v->type.dtype, param(buffer, false), ren(ravel(coords, v->type.shape)));
  }

  ScalarPtr operand(const Value* o, const Node* user, bool row) {
    if (in_group(o)) return grp.row_level.count(o) ? row_value(o) : full_value(o);
    const Shape& ushape = user->outputs[0]->type.shape;
    Coords uc = row ? row_coords(ushape) : F;
    return load_external(o, broadcast_coords(uc, ushape, o->type.shape));
  }

  ScalarPtr compute(const Node* n, bool row) {
    if (is_index_view(*n)) return load_external(n->inputs[0], view_input_coords(*n, F));
    std::vector<ScalarPtr> args;
    for (const Value* in : n->inputs) args.push_back(operand(in, n, row));
    return Scalar::apply(n->op, n->outputs[0]->type.dtype, n->attrs, std::move(args));
  }

  ScalarPtr bind(std::vector<Stmt>* body, std::map<const Value*, ScalarPtr>& memo, const Value* v,
                 ScalarPtr value) {
    std::string name = str("t", next_let++);
    body->push_back(Stmt::let(name, value));
    return memo[v] = Scalar::ref(value->dtype, name);
  }

  ScalarPtr full_value(const Value* v) {
    auto it = full_memo.find(v);
    if (it != full_memo.end()) return it->second;
    ScalarPtr value = compute(v->producer, false);
    return bind(full_body, full_memo, v, value);
  }

  static std::string label(const Value* v) { return v->name.empty() ? str("%", v->id) : v->name; }

  ScalarPtr row_value(const Value* v) {
    auto it = row_memo.find(v);
    if (it != row_memo.end()) return it->second;
    KILN_ASSERT(!v->producer->info().has(kReduction));
    ScalarPtr value = compute(v->producer, true);
    return bind(row_body, row_memo, v, value);
  }

  // Nests `body` in one loop per dim of `dims` (outermost first) and appends it to dst.
  void append_loops(std::vector<Stmt>& dst, const std::vector<int>& dims, std::vector<Stmt> body) {
    for (size_t k = dims.size(); k-- > 0;) {
      std::vector<Stmt> wrapped;
      wrapped.push_back(Stmt::for_loop(var(dims[k]), ren(grp.space[size_t(dims[k])]), std::move(body)));
      body = std::move(wrapped);
    }
    for (auto& st : body) dst.push_back(std::move(st));
  }

  void build() {
    for (const Node* n : grp.nodes) members.insert(n);
    std::set<std::string> graph_syms;
    for (size_t k = 0; k < ctx.symbols.size(); ++k) {
      rename[ctx.symbols[k]] = SymInt::symbol(str("s", k));
      graph_syms.insert(ctx.symbols[k]);
    }
    for (bool clash = true; clash;) {
      clash = false;
      for (const auto& name : graph_syms)
        if (name.rfind(prefix, 0) == 0) clash = true;
      if (clash) prefix += "_";
    }
    rank = int(grp.space.size());
    for (int d = 0; d < rank; ++d) F.push_back(SymInt::symbol(var(d)));
    std::vector<int> kept, reduced;
    for (int d = 0; d < rank; ++d) (grp.reduced[size_t(d)] ? reduced : kept).push_back(d);

    std::vector<Stmt> row;
    row_body = &row;
    int phase = 0;
    for (const Node* n : grp.nodes) {
      if (!n->info().has(kReduction) || is_index_view(*n)) continue;
      bool mean = false;
      Fold fold = *reduction_fold(n->op, &mean);
      DType dt = n->outputs[0]->type.dtype;
      // Products of many float terms under- and overflow long before the result does: they are
      // accumulated in double, as the reference does, and rounded once.
      DType acc_dt = fold == Fold::Prod && is_float(dt) ? DType::F64 : dt;
      std::string acc = str("acc", phase);
      row.push_back(Stmt::acc_init(acc, acc_dt, fold));
      std::vector<Stmt> body;
      full_body = &body;
      full_memo.clear();
      const Value* x = n->inputs[0];
      ScalarPtr v = in_group(x) ? full_value(x) : load_external(x, F);
      if (acc_dt != dt) v = Scalar::apply(Op::Cast, acc_dt, {}, {v});
      body.push_back(Stmt::acc_update(acc, acc_dt, fold, v));
      passes.push_back({row.size(), full_memo});
      append_loops(row, reduced, std::move(body));
      ScalarPtr result = Scalar::ref(acc_dt, acc);
      if (acc_dt != dt) result = Scalar::apply(Op::Cast, dt, {}, {result});
      if (mean) {
        SymInt count(1);
        for (int d : reduced) count = count * grp.space[size_t(d)];
        result = Scalar::apply(Op::Div, dt, {}, {result, Scalar::index_value(dt, ren(count))});
      }
      std::string name = str("r", phase++);
      row.push_back(Stmt::let(name, result));
      row_memo[n->outputs[0]] = Scalar::ref(dt, name);
    }
    std::vector<const Value*> full_outputs, row_outputs;
    for (const Value* v : grp.outputs) (grp.row_level.count(v) ? row_outputs : full_outputs).push_back(v);
    if (!full_outputs.empty()) {
      std::map<const Value*, const Value*> kept;  // output -> the pass value it holds
      if (ctx.keep_row_values_in_outputs) kept = keep_values_in_outputs(row, full_outputs, reduced.size());
      std::vector<Stmt> body;
      full_body = &body;
      full_memo.clear();
      for (const auto& [o, v] : kept)
        bind(full_body, full_memo, v, Scalar::load(v->type.dtype, param(o, true), ren(ravel(F, o->type.shape))));
      for (const Value* v : full_outputs) {
        if (kept.count(v) && kept.at(v) == v) continue;  // the reduction pass stored it already
        ScalarPtr value = full_value(v);
        int p = param(v, true);
        body.push_back(Stmt::store(p, ren(ravel(F, v->type.shape)), value));
      }
      if (!body.empty()) append_loops(row, reduced, std::move(body));
    }
    for (const Value* v : row_outputs) {
      ScalarPtr value = row_value(v);
      int p = param(v, true);
      row.push_back(Stmt::store(p, ren(ravel(row_coords(v->type.shape), v->type.shape)), value));
    }
    append_loops(out.kernel.body, kept, std::move(row));
    collapse_and_schedule(kept, reduced);
  }

  // ---- CPU row schedule: values kept in output rows between passes ----

  // Each reduction pass: where its loop nest starts in the row body, and the full-level values it
  // computed (graph value -> let).
  struct Pass {
    size_t row_index;
    std::map<const Value*, ScalarPtr> values;
  };
  std::vector<Pass> passes;

  // Elementwise ops recomputed to get full-level member v again (shared subexpressions once).
  int recompute_cost(const Value* v, std::set<const Value*>& seen) const {
    if (!in_group(v) || grp.row_level.count(v) || !seen.insert(v).second) return 0;
    const Node* n = v->producer;
    if (is_index_view(*n)) return 0;
    int cost = 1;
    for (const Value* in : n->inputs) cost += recompute_cost(in, seen);
    return cost;
  }

  bool depends_on(const Value* o, const Value* v) const {
    if (o == v) return true;
    if (!in_group(o) || grp.row_level.count(o) || is_index_view(*o->producer)) return false;
    for (const Value* in : o->producer->inputs)
      if (depends_on(in, v)) return true;
    return false;
  }

  // For each full-level output whose storage type is its compute type (f32, f64: the round trip is
  // exact), picks the costliest value (at least 2 ops) that a reduction pass computed and the
  // output's formula needs, and stores it into the output row in that pass; the store pass then
  // loads it instead of recomputing it. Softmax: exp(x - max) is computed once, not twice.
  std::map<const Value*, const Value*> keep_values_in_outputs(std::vector<Stmt>& row,
                                                              const std::vector<const Value*>& outputs,
                                                              size_t reduced_loops) {
    std::map<const Value*, const Value*> kept;
    std::set<const Value*> taken;
    if (reduced_loops == 0) return kept;
    for (const Value* o : outputs) {
      if (o->type.dtype != DType::F32 && o->type.dtype != DType::F64) continue;
      if (!(o->type.shape == grp.space)) continue;
      const Pass* best_pass = nullptr;
      const Value* best = nullptr;
      int best_cost = 1;
      for (const Pass& pass : passes)
        for (const auto& [v, ref] : pass.values) {
          if (taken.count(v) || v->type.dtype != o->type.dtype || !(v->type.shape == grp.space)) continue;
          std::set<const Value*> seen;
          int cost = recompute_cost(v, seen);
          if (cost > best_cost && depends_on(o, v)) {
            best_cost = cost;
            best = v;
            best_pass = &pass;
          }
        }
      if (!best) continue;
      Stmt* loop = &row.at(best_pass->row_index);
      for (size_t d = 1; d < reduced_loops; ++d) loop = &loop->body.at(0);
      loop->body.push_back(Stmt::store(param(o, true), ren(ravel(F, o->type.shape)), best_pass->values.at(best)));
      kept[o] = best;
      taken.insert(best);
      out.kernel.notes.push_back(
          o == best ? str("row schedule: ", label(o), " is stored by the reduction pass that computes it")
                    : str("row schedule: ", label(best), " (", best_cost, " ops, computed by a reduction pass) is kept in output ",
                          label(o), "'s row and read back, not recomputed"));
    }
    return kept;
  }

  // ---- dim merging and schedule ----

  void for_each_index(std::vector<Stmt>& body, const std::function<void(Index&)>& fn,
                      std::map<const Scalar*, ScalarPtr>& rewritten) {
    std::function<ScalarPtr(const ScalarPtr&)> rewrite = [&](const ScalarPtr& sc) -> ScalarPtr {
      auto it = rewritten.find(sc.get());
      if (it != rewritten.end()) return it->second;
      auto copy = std::make_shared<Scalar>(*sc);
      if (copy->kind == Scalar::kLoad || copy->kind == Scalar::kIndexValue) fn(copy->index);
      for (auto& a : copy->args) a = rewrite(a);
      return rewritten[sc.get()] = copy;
    };
    for (Stmt& st : body) {
      if (st.kind == Stmt::kFor) for_each_index(st.body, fn, rewritten);
      if (st.kind == Stmt::kStore) fn(st.index);
      if (st.value) st.value = rewrite(st.value);
    }
  }

  void collapse_and_schedule(const std::vector<int>& kept, const std::vector<int>& reduced) {
    std::vector<Index> indices;
    std::map<const Scalar*, ScalarPtr> memo;
    for_each_index(out.kernel.body, [&](Index& i) { indices.push_back(i); }, memo);
    // Affine decomposition of every access: base + sum coef[d] * i_d.
    std::map<std::string, SymInt> zero;
    for (int d = 0; d < rank; ++d) zero[var(d)] = SymInt(0);
    bool affine = true;
    std::vector<std::vector<SymInt>> coefs;
    for (const Index& idx : indices) {
      SymInt base = idx.substitute(zero);
      std::vector<SymInt> c(static_cast<size_t>(rank), SymInt(0));
      SymInt rebuilt = base;
      for (int d = 0; d < rank; ++d) {
        auto probe = zero;
        probe[var(d)] = SymInt(1);
        c[size_t(d)] = idx.substitute(probe) - base;
        rebuilt = rebuilt + c[size_t(d)] * F[size_t(d)];
      }
      if (!(rebuilt == idx)) affine = false;
      coefs.push_back(c);
    }
    // Runs of loops merged into one: consecutive dims of the same class whose strides chain.
    std::vector<std::vector<int>> runs;
    auto make_runs = [&](const std::vector<int>& dims) {
      for (size_t k = 0; k < dims.size(); ++k) {
        bool merge = affine && k > 0;
        if (merge) {
          int outer = dims[k - 1], inner = dims[k];
          SymInt ext = grp.space[size_t(inner)].substitute(rename);
          for (const auto& c : coefs)
            if (!(c[size_t(outer)] == c[size_t(inner)] * ext)) merge = false;
        }
        if (merge) runs.back().push_back(dims[k]);
        else runs.push_back({dims[k]});
      }
    };
    make_runs(kept);
    size_t kept_runs = runs.size();
    make_runs(reduced);
    std::map<std::string, std::vector<int>> run_starting_at;
    for (const auto& r : runs)
      if (r.size() > 1) run_starting_at[var(r.front())] = r;
    if (!run_starting_at.empty()) {
      merge_loops(out.kernel.body, run_starting_at);
      size_t next = 0;
      std::map<const Scalar*, ScalarPtr> memo2;
      for_each_index(out.kernel.body, [&](Index& idx) {
        const auto& c = coefs[next++];
        SymInt rebuilt = idx.substitute(zero);
        for (const auto& r : runs) rebuilt = rebuilt + c[size_t(r.back())] * F[size_t(r.back())];
        idx = rebuilt;
      }, memo2);
    }
    // Schedule.
    SymInt work(1), kept_extent(1);
    for (int d = 0; d < rank; ++d) work = work * ren(grp.space[size_t(d)]);
    for (int d : kept) kept_extent = kept_extent * ren(grp.space[size_t(d)]);
    out.kernel.iterations = work;
    bool worth_threads = !(work.is_constant() && work.constant() < ctx.parallel_threshold);
    if (kept_runs > 0 && !is_constant_one(kept_extent)) {
      Stmt& outer = out.kernel.body.at(0);
      bool pointwise = !grp.has_reduction;
      int collapse = int(kept_runs) - (pointwise && kept_runs > 1 ? 1 : 0);
      outer.parallel = worth_threads;
      outer.collapse = collapse;
      outer.parallel_work = work;
      mark_innermost_vector(out.kernel.body);
    } else {
      // A full reduction (or a scalar): the reduced loops carry the parallelism.
      std::vector<Stmt>* body = &out.kernel.body;
      while (kept_runs > 0 && body->size() == 1 && body->front().kind == Stmt::kFor) body = &body->front().body;
      for (Stmt& st : *body)
        if (st.kind == Stmt::kFor) {
          st.parallel = worth_threads;
          st.parallel_work = work;
        }
      mark_innermost_vector(*body);
    }
    count_ops();
  }

  void merge_loops(std::vector<Stmt>& body, const std::map<std::string, std::vector<int>>& runs) {
    for (Stmt& st : body) {
      if (st.kind != Stmt::kFor) continue;
      auto it = runs.find(st.var);
      if (it != runs.end()) {
        SymInt extent(1);
        Stmt* cur = &st;
        for (size_t k = 0; k < it->second.size(); ++k) {
          extent = extent * cur->extent;
          if (k + 1 < it->second.size()) {
            KILN_ASSERT(cur->body.size() == 1 && cur->body[0].kind == Stmt::kFor);
            cur = &cur->body[0];
          }
        }
        std::vector<Stmt> inner = std::move(cur->body);
        st.var = var(it->second.back());
        st.extent = extent;
        st.body = std::move(inner);
      }
      merge_loops(st.body, runs);
    }
  }

  void mark_innermost_vector(std::vector<Stmt>& body) {
    for (Stmt& st : body) {
      if (st.kind != Stmt::kFor) continue;
      bool has_inner = false;
      for (const Stmt& c : st.body) has_inner |= c.kind == Stmt::kFor;
      if (!has_inner) st.vectorize = true;
      else mark_innermost_vector(st.body);
    }
  }

  void count_ops() {
    std::set<const Scalar*> seen;
    std::function<void(const ScalarPtr&)> visit = [&](const ScalarPtr& sc) {
      if (!seen.insert(sc.get()).second) return;
      if (sc->kind == Scalar::kOp) ++out.kernel.ops_per_point;
      for (const auto& a : sc->args) visit(a);
    };
    std::function<void(const std::vector<Stmt>&)> walk = [&](const std::vector<Stmt>& body) {
      for (const Stmt& st : body) {
        if (st.value) visit(st.value);
        if (st.kind == Stmt::kAccUpdate) ++out.kernel.ops_per_point;
        walk(st.body);
      }
    };
    walk(out.kernel.body);
  }
};

}  // namespace

LoweredKernel lower_group(const Schedule& s, const FusionGroup& grp, const LowerContext& ctx) {
  KILN_ASSERT(!grp.library);
  GroupLowering l{s, grp, ctx};
  l.out.kernel.name = ctx.kernel_name;
  l.out.kernel.symbols = ctx.symbols;
  l.out.kernel.parallel_threshold = ctx.parallel_threshold;
  for (const Node* n : grp.nodes) l.out.kernel.source_ops.push_back(std::string(op_name(n->op)));
  l.build();
  verify_kernel(l.out.kernel);
  return std::move(l.out);
}

}  // namespace kiln::lower
