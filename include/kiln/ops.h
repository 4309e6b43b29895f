// The Op enum and per-op metadata, generated from src/ir/ops.def. Why: passes, the verifier and
// backends ask traits ("is elementwise?") instead of keeping their own lists of ops.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/attrs.h"
#include "kiln/types.h"

namespace kiln {

enum class Op : uint16_t {
#define OP(e, ...) e,
#include "ir/ops.def"
#undef OP
};

inline constexpr int kNumOps = 0
#define OP(e, ...) +1
#include "ir/ops.def"
#undef OP
    ;

enum Trait : uint32_t {
  kElementwise = 1u << 0,    // out[i] depends only on in[i] (after broadcasting)
  kReduction = 1u << 1,      // combines elements along axes
  kMovement = 1u << 2,       // moves/copies elements, no arithmetic
  kCommutative = 1u << 3,    // f(a, b) == f(b, a)
  kPreservesZero = 1u << 4,  // f(0) == 0 (unary) - padding with zeros is safe
  kSideEffect = 1u << 5,     // never CSE'd or folded (random)
  kSource = 1u << 6,         // no tensor operands
  kContraction = 1u << 7,    // matmul/conv: library call territory
  kComparison = 1u << 8,     // produces bool
  kIndexing = 1u << 9,       // data-dependent addressing (gather)
  kShapeOnly = 1u << 10,     // result depends only on operand shapes
  kPooling = 1u << 11,       // windowed reduction
  kNormalization = 1u << 12, // high-level normalisation (softmax, norms, attention)
  kSubgraph = 1u << 13,      // runs sub-graph attributes (if, loop, scan): opaque to passes
  kContainer = 1u << 14,     // operands/results may be sequences or optionals
  kStrings = 1u << 15,       // operands/results may be str: the op compares or moves whole elements
};

struct OperandSpec {
  std::string name;
  bool optional = false;
  bool variadic = false;  // "xs..." one or more; "xs...?" zero or more (last only)
};

struct AttrSpec {
  std::string name;
  AttrKind kind;
  bool required = true;
  AttrValue default_value;  // valid when !required
};

class Graph;
struct Node;
struct Value;
struct ShapeGuard;

// Context handed to a shape rule: the operand types and attributes, plus a sink for guards.
struct InferCtx {
  Op op;
  const std::vector<TensorType>& inputs;
  const Attrs& attrs;
  std::vector<ShapeGuard>* guards;  // may be null: then unprovable equalities are errors
  std::string where;                // "node %3 (add)" for messages

  [[noreturn]] void fail(const std::string& msg) const;
  // Unifies two dims that must be equal: proves it, records a guard, or fails naming `what`.
  SymInt require_equal(const SymInt& a, const SymInt& b, const std::string& what) const;
  // Normalises a possibly negative axis against a rank, failing with a clear message.
  int normalize_axis(int64_t axis, int rank, const std::string& what = "axis") const;
};

using ShapeFn = std::vector<TensorType> (*)(const InferCtx&);
// Builds the primitive replacement of node n at the graph's insertion point; returns the values
// that replace n's outputs, in order.
using DecompFn = std::vector<Value*> (*)(Graph& g, const Node& n);

struct OpInfo {
  Op op;
  std::string_view name;
  std::vector<OperandSpec> operands;
  int min_operands = 0;
  int max_operands = 0;  // -1: unbounded
  std::vector<AttrSpec> attrs;
  uint32_t traits = 0;
  ShapeFn shape_fn = nullptr;
  DecompFn decompose = nullptr;  // null for primitives
  std::string_view doc;

  bool has(Trait t) const { return (traits & t) != 0; }
  const AttrSpec* find_attr(const std::string& name) const;
};

const OpInfo& op_info(Op op);
// The op's shape rule, after checking that only kContainer ops see sequence/optional operands.
std::vector<TensorType> run_shape_rule(const InferCtx& ctx);
std::string_view op_name(Op op);
std::optional<Op> op_from_name(std::string_view name);
inline bool has_trait(Op op, Trait t) { return op_info(op).has(t); }

}  // namespace kiln
