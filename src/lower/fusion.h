// The fusion scheduler: partitions a primitive graph into fused kernels and library calls, asking
// op traits (elementwise, reduction, movement, contraction), never lists of ops. Every decision
// and every refusal is recorded with its reason for `explain`. Why: fusion is the step from one
// memory round trip per op to one per kernel.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kiln/graph.h"

namespace kiln::lower {

// How a value's bytes exist at run time.
enum class Residence : uint8_t {
  kBuffer,    // its own buffer: graph input, constant, or written by a kernel/library call
  kAlias,     // a reshape of a buffer: the same bytes read with another shape
  kView,      // a permute/expand/slice (or reshape of one): consumers compute addresses through it
  kInternal,  // computed inside a fused kernel and never stored
};

struct FusionGroup {
  int id = 0;
  bool library = false;                // one node run by a library call / fallback kernel
  std::vector<const Node*> nodes;      // in graph order
  Shape space;                         // iteration space of the full-level values
  std::vector<bool> reduced;           // per dim of space: reduced by the group's reductions
  bool has_reduction = false;
  std::vector<const Value*> outputs;   // values this group stores (used elsewhere or graph outputs)
  std::set<const Value*> row_level;    // members computed once per kept point (reductions, and
                                       // elementwise ops of them); all other members are full-level
  std::string name() const;            // "fused_sub_exp_reduce_sum" / "matmul"
};

struct FusionDecision {
  const Node* node = nullptr;
  int group = -1;
  std::string action;   // "joins group 3", "starts group 4", "library call", "view", "alias"
  std::string reason;   // why, including refusals: "not group 2: different iteration space"
  std::vector<std::string> refusals;  // each group it could not join, and why (also in reason)
};

struct ScheduleOptions {
  bool fuse = true;
  // Attention's q, k and v may be read through an unmaterialised strided view (the CUDA fused
  // kernel takes strides; strided_view.h) instead of a copy.
  bool attention_reads_views = false;
  // A reduction does not join an elementwise group that reads a conv's or matmul's result when that
  // group's values are stored anyway: the elementwise tail then folds into the library call as its
  // post-ops (the CPU target's oneDNN plan), and the reduction reads the stored result. Why: a
  // squeeze-excite block's activation + global pool as one kernel of two outputs kept the
  // activation out of the conv (MobileNetV3, EfficientNet), costing a write and a read of the tensor.
  bool tails_fold_into_library_calls = false;
  // Whether a generated kernel can compute node n (else it becomes a library call).
  std::function<bool(const Node&)> can_generate;
};

struct Schedule {
  std::vector<FusionGroup> groups;                  // in execution order
  std::vector<FusionDecision> decisions;
  std::map<const Value*, Residence> residence;      // every value of the graph
  std::map<const Value*, int> group_of;             // values computed by a fused group
  std::map<const Value*, const Value*> alias_root;  // kAlias -> the kBuffer value it re-reads

  Residence residence_of(const Value* v) const { return residence.at(v); }
  // Whether v is an unmaterialised view (read through index arithmetic; false before it is placed).
  bool is_view(const Value* v) const;
  // The buffer value whose bytes v reads: v itself for kBuffer, the root for kAlias.
  const Value* buffer_of(const Value* v) const;
  // The value whose storage v reads, following views and aliases to their root.
  const Value* storage_of(const Value* v) const;
  std::string explain() const;
};

// Whether a value of `shape` lives at the row level of group g (one value per kept point).
bool is_row_shape(const FusionGroup& g, const Shape& shape);

Schedule schedule(const Graph& g, const ScheduleOptions& options);

}  // namespace kiln::lower
