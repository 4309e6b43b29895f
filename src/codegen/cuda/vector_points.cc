// Vector points (see vector_points.h): which buffers of a pointwise kernel move as vectors, and the
// per-point body with their accesses redirected to the thread's register arrays.
#include "codegen/cuda/vector_points.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "codegen/cuda/rows/row_plan.h"

namespace kiln::codegen::cuda {

using lower::Index;
using lower::Scalar;
using lower::ScalarPtr;
using lower::Stmt;

namespace {

struct Use {
  bool loaded = false, stored = false, bad = false, have_base = false;
  bool scalar_too = false;  // also read at an element that is the same for every point
  Index base;
  void record(const std::optional<Index>& b) {
    if (!b) bad = true;
    else if (!have_base) base = *b, have_base = true;
    else if (base != *b) bad = true;
  }
};

bool mentions(const Index& index, const std::string& var) {
  std::set<std::string> syms;
  index.collect_symbols(syms);
  return syms.count(var) > 0;
}

}  // namespace

VectorPoints plan_vector_points(const std::vector<Stmt>& inner, const Stmt& innermost,
                                const std::vector<lower::KernelParam>& params) {
  VectorPoints out;
  if (!innermost.extent.is_constant()) return out;
  const std::string& var = innermost.var;
  std::map<int, Use> uses;
  for (const Stmt& st : inner) {
    if (st.kind == Stmt::kFor) return out;
    visit_loads(st.value, [&](const Scalar& l) {
      Use& u = uses[l.param];
      if (!mentions(l.index, var)) {  // the same element for every point: a scalar load
        u.scalar_too = true;
        return;
      }
      u.loaded = true;
      u.record(contiguous_base(l.index, var));
    });
    if (st.kind == Stmt::kStore) {
      Use& u = uses[st.param];
      u.stored = true;
      u.record(contiguous_base(st.index, var));
    }
  }
  int widest = 0;
  std::vector<int> chosen;
  for (const auto& [p, u] : uses) {
    if (u.bad || u.scalar_too || !u.have_base || (u.loaded && u.stored) || p < 0 || size_t(p) >= params.size()) continue;
    chosen.push_back(p);
    widest = std::max(widest, dtype_size(params[size_t(p)].dtype));
  }
  if (chosen.empty()) return out;
  const int vec = 16 / widest;
  if (vec < 2 || innermost.extent.constant() % vec != 0) return out;

  out.vector = vec;
  out.var = var;
  std::set<int> loads, stores;
  const Index first_point = Index::symbol(var + "_base");
  for (int p : chosen) {
    const Use& u = uses.at(p);
    VectorAccess a{p, u.base + first_point};
    (u.stored ? out.stores : out.loads).push_back(a);
    (u.stored ? stores : loads).insert(p);
  }
  // redirect_staged rewrites the statements of simple constant loops: wrap the point's body in one.
  std::vector<Stmt> wrapped = {Stmt::for_loop("kiln_j", Index(vec), inner)};
  redirect_staged(wrapped, loads, stores, "kiln_j");
  out.body = wrapped[0].body;
  return out;
}

}  // namespace kiln::codegen::cuda
