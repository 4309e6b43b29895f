// In-place legality from the Loop IR (see inplace.h).
#include "lower/inplace.h"

#include <optional>

namespace kiln::lower {

namespace {

struct Walk {
  int in, out;
  std::optional<Index> index;  // the one index every access must use
  bool stored = false, legal = true, loaded = false;

  void access(const Index& idx) {
    if (!index) index = idx;
    else if (!(*index == idx)) legal = false;
  }
  void scalar(const Scalar& s) {
    // Reading its own output is only safe as a read-back of the element this point stored (the CPU
    // row schedule keeps softmax's exp in the output row between passes).
    if (s.kind == Scalar::kLoad && s.param == out) {
      if (!stored) legal = false;
      access(s.index);
    }
    if (s.kind == Scalar::kLoad && s.param == in) {
      loaded = true;
      if (stored) legal = false;
      access(s.index);
    }
    for (const auto& a : s.args) scalar(*a);
  }
  void body(const std::vector<Stmt>& stmts) {
    for (const Stmt& st : stmts) {
      if (st.value) scalar(*st.value);
      if (st.kind == Stmt::kStore && st.param == out) {
        stored = true;
        access(st.index);
      }
      if (st.kind == Stmt::kFor) body(st.body);
    }
  }
};

}  // namespace

bool can_write_in_place(const LoopKernel& k, int in, int out) {
  if (in < 0 || out < 0 || size_t(in) >= k.params.size() || size_t(out) >= k.params.size()) return false;
  if (k.params[size_t(in)].is_output || !k.params[size_t(out)].is_output) return false;
  if (dtype_size(k.params[size_t(in)].dtype) != dtype_size(k.params[size_t(out)].dtype)) return false;
  Walk w{in, out, std::nullopt};
  w.body(k.body);
  return w.legal && w.loaded && w.stored;
}

}  // namespace kiln::lower
