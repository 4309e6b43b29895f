// Small queries and edits shared by the passes (constant operands, splat values, replacing a
// node's result). Why: every rewrite needs them, and they must agree on what "constant" means.
#pragma once

#include <optional>
#include <vector>

#include "kiln/graph.h"

namespace kiln::passes {

// The literal tensor behind v when v is produced by a constant node; null otherwise.
const HostTensor* constant_tensor(const Value* v);
// The one value every element of v has, when v is a constant (or a full) whose elements are all
// bit-identical; nullopt otherwise. The double keeps the sign of zero.
std::optional<double> splat_value(const Value* v);
// True when v is a splat constant equal to `x`, zero compared with its sign (-0.0 != +0.0).
bool is_splat_of(const Value* v, double x);

// The value of v when v is a constant (or full) with exactly one element; nullopt otherwise.
std::optional<double> scalar_of(const Value* v);

// v as a product of factors: through mul nodes and divisions by scalar constants, up to four
// levels deep, so every association and operand order an exporter writes reads the same.
struct Product {
  std::vector<Value*> factors;  // the non-constant factors, in no particular order
  double scale = 1;             // the product of the scalar constant factors
};
Product product_of(Value* v);

// Replaces every use of `from` (graph outputs included) by `to`. Requires equal types; returns
// false (changing nothing) otherwise. The old producer stays until erase_dead_from() collects it,
// so passes may keep iterating over a snapshot of the node list.
bool replace_value(Graph& g, Value* from, Value* to);

// True when no node reads n's results, none is a graph output, and n has no side effect.
bool is_dead(const Graph& g, const Node* n);
// Erases the candidates that are dead, then the producers of their operands that became dead,
// and so on. Candidates may repeat. Returns how many nodes were erased.
int erase_dead_from(Graph& g, const std::vector<Node*>& candidates);

// Builds new nodes right before `n` (restoring the previous insertion point on destruction).
class InsertBefore {
 public:
  InsertBefore(Graph& g, Node* n) : g_(g), saved_(g.insertion_point()) { g.set_insertion_point(n); }
  ~InsertBefore() { g_.set_insertion_point(saved_); }
  InsertBefore(const InsertBefore&) = delete;
  InsertBefore& operator=(const InsertBefore&) = delete;

 private:
  Graph& g_;
  Node* saved_;
};

// Static dims of a shape, or nullopt if any dim is symbolic.
std::optional<std::vector<int64_t>> static_dims(const Shape& s);

}  // namespace kiln::passes
