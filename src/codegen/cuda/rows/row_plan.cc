// The helpers every row form's planner shares (see row_plan.h): which buffers a row body reads or
// writes as `base + i`, and the rewrite that points those accesses at a form's on-chip copies.
#include "codegen/cuda/rows/row_plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "kiln/error.h"

namespace kiln::codegen::cuda {

using lower::Index;
using lower::Scalar;
using lower::ScalarPtr;
using lower::Stmt;

namespace {

// How the row loops touch one parameter.
struct Access {
  bool bad = false;             // some access is not `base + i` with this base and extent
  bool loaded_in_rows = false;
  bool touched_outside = false; // loaded or stored by a row-level statement
  int stores = 0;
  int store_loop = -1;          // the row loop that stores it
  bool store_is_last = false;   // that store is the loop body's last statement
  int last_load_loop = -1;
  int64_t extent = -1;
  bool have_base = false;
  Index base;

  void record(const Index& b, int64_t n) {
    if (!have_base) {
      base = b, extent = n, have_base = true;
    } else if (base != b || extent != n) {
      bad = true;
    }
  }
};

template <typename Map>
void mark_touched(const std::vector<Stmt>& body, Map& acc) {
  for (const Stmt& st : body) {
    visit_loads(st.value, [&](const Scalar& l) { acc[l.param].bad = true; });
    if (st.kind == Stmt::kStore) acc[st.param].bad = true;
    mark_touched(st.body, acc);
  }
}

ScalarPtr redirect(const ScalarPtr& s, const std::set<int>& staged, const std::string& var) {
  return rebuild_scalar(s, [&](const Scalar& x) -> ScalarPtr {
    if (x.kind != Scalar::kLoad || !staged.count(x.param)) return nullptr;
    return Scalar::load(x.dtype, kStagedParamBase + x.param, Index::symbol(var));
  });
}

// Ops cheap enough that keeping their result in a register array costs more than recomputing it.
bool cheap(Op op) {
  switch (op) {
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Neg: case Op::Abs: case Op::Maximum: case Op::Minimum:
    case Op::Cast: case Op::Where: case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge:
    case Op::Not: case Op::And: case Op::Or: case Op::Relu: case Op::Clamp: case Op::IsNan: case Op::Sign:
      return true;
    default: return false;
  }
}

}  // namespace

Expanded expand(const ScalarPtr& s, const std::map<std::string, Expanded>& lets) {
  Expanded e;
  if (!s) return e;
  if (s->kind == Scalar::kRef) {
    auto it = lets.find(s->name);
    if (it != lets.end()) return it->second;
    e.value = s;
    return e;
  }
  if (s->kind == Scalar::kLoad) {
    e.value = s;
    e.only_staged = s->param >= kStagedParamBase;
    return e;
  }
  if (s->kind != Scalar::kOp) {
    e.value = s;
    return e;
  }
  std::vector<ScalarPtr> args;
  e.expensive = !cheap(s->op);
  for (const auto& a : s->args) {
    Expanded x = expand(a, lets);
    args.push_back(x.value);
    e.only_staged &= x.only_staged;
    e.expensive |= x.expensive;
  }
  e.value = Scalar::apply(s->op, s->dtype, s->attrs, std::move(args));
  return e;
}

ScalarPtr rebuild_scalar(const ScalarPtr& s, const std::function<ScalarPtr(const Scalar&)>& replace) {
  if (!s) return s;
  if (ScalarPtr r = replace(*s)) return r;
  bool changed = false;
  std::vector<ScalarPtr> args;
  for (const auto& a : s->args) {
    args.push_back(rebuild_scalar(a, replace));
    changed |= args.back() != a;
  }
  if (!changed) return s;
  auto copy = std::make_shared<Scalar>(*s);
  copy->args = std::move(args);
  return copy;
}

void visit_loads(const ScalarPtr& s, const std::function<void(const Scalar&)>& fn) {
  if (!s) return;
  if (s->kind == Scalar::kLoad) fn(*s);
  for (const auto& a : s->args) visit_loads(a, fn);
}

bool simple_row_loop(const Stmt& st) {
  if (st.kind != Stmt::kFor || !st.extent.is_constant()) return false;
  for (const Stmt& b : st.body)
    if (b.kind == Stmt::kFor) return false;
  return true;
}

std::optional<Index> contiguous_base(const Index& index, const std::string& var) {
  Index base = index.substitute({{var, Index(0)}});
  if (index - base != Index::symbol(var)) return std::nullopt;
  return base;
}

std::vector<RowCandidate> row_candidates(const std::vector<Stmt>& row_body, const std::vector<std::string>& grid_vars,
                                         const std::vector<lower::KernelParam>& params) {
  std::map<int, Access> acc;
  const std::set<std::string> grid(grid_vars.begin(), grid_vars.end());

  int loop = -1;
  for (const Stmt& st : row_body) {
    if (st.kind != Stmt::kFor) {
      visit_loads(st.value, [&](const Scalar& l) { acc[l.param].touched_outside = true; });
      if (st.kind == Stmt::kStore) acc[st.param].touched_outside = true;
      continue;
    }
    ++loop;
    const bool simple = simple_row_loop(st);
    const int64_t n = simple ? st.extent.constant() : 0;
    if (!simple) {  // nested or symbolic loops are not staged: everything they touch stays global
      mark_touched(st.body, acc);
      continue;
    }
    for (size_t j = 0; j < st.body.size(); ++j) {
      const Stmt& leaf = st.body[j];
      visit_loads(leaf.value, [&](const Scalar& l) {
        Access& a = acc[l.param];
        a.loaded_in_rows = true;
        a.last_load_loop = loop;
        auto base = contiguous_base(l.index, st.var);
        if (base) a.record(*base, n);
        else a.bad = true;
      });
      if (leaf.kind == Stmt::kStore) {
        Access& a = acc[leaf.param];
        ++a.stores;
        a.store_loop = loop;
        a.store_is_last = j + 1 == st.body.size();
        auto base = contiguous_base(leaf.index, st.var);
        if (base) a.record(*base, n);
        else a.bad = true;
      }
    }
  }

  auto invariant = [&](const Index& base) {
    std::set<std::string> syms;
    base.collect_symbols(syms);
    for (const auto& s : syms)
      if (grid.count(s)) return false;
    return true;
  };
  std::vector<RowCandidate> out;
  for (const auto& [p, a] : acc) {
    if (a.bad || !a.have_base || a.extent <= 0 || p < 0 || size_t(p) >= params.size()) continue;
    const lower::KernelParam& kp = params[size_t(p)];
    StagedBuffer b;
    b.param = p, b.dtype = kp.dtype, b.extent = a.extent, b.base = a.base, b.is_output = kp.is_output;
    b.row_invariant = invariant(a.base);
    if (!kp.is_output) {
      if (!a.loaded_in_rows || (b.row_invariant && kp.may_alias)) continue;
    } else {
      if (a.loaded_in_rows || a.touched_outside || a.stores != 1 || b.row_invariant) continue;
    }
    out.push_back({b, a.last_load_loop, a.store_loop, a.store_is_last});
  }
  return out;
}

void redirect_staged(std::vector<Stmt>& body, const std::set<int>& loads, const std::set<int>& stores,
                     const std::string& index_var) {
  for (Stmt& st : body) {
    if (!simple_row_loop(st)) continue;
    const std::string& var = index_var.empty() ? st.var : index_var;
    for (Stmt& leaf : st.body) {
      leaf.value = redirect(leaf.value, loads, var);
      if (leaf.kind == Stmt::kStore && stores.count(leaf.param)) {
        leaf.param = kStagedParamBase + leaf.param;
        leaf.index = Index::symbol(var);
      }
    }
  }
}

}  // namespace kiln::codegen::cuda
