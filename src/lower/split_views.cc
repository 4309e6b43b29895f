// split -> slices (see split_views.h).
#include "lower/split_views.h"

#include <vector>

namespace kiln::lower {

bool split_into_slices(Graph& g) {
  bool changed = false;
  for (Node* n : g.node_list()) {
    if (n->op != Op::Split || n->inputs[0]->type.dtype == DType::Str) continue;
    changed = true;
    const int64_t rank = n->inputs[0]->type.rank();
    int64_t axis = n->attrs.get_int("axis");
    if (axis < 0) axis += rank;
    const std::vector<int64_t> sizes = n->attrs.get_ints("sizes");
    g.set_insertion_point(n);
    int64_t start = 0;
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      Value* piece = g.add(Op::Slice, {n->inputs[0]},
                           {{"starts", std::vector<int64_t>{start}}, {"ends", std::vector<int64_t>{start + sizes[i]}},
                            {"axes", std::vector<int64_t>{axis}}});
      g.replace_all_uses(n->outputs[i], piece);
      start += sizes[i];
    }
    g.set_insertion_point(nullptr);
    g.erase_node(n);
  }
  return changed;
}

}  // namespace kiln::lower
