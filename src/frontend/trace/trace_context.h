// The per-thread tracing context: the Graph being recorded and the constants already added to it.
// Why: Tensor ops must find "the graph being traced" without threading it through user code.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "kiln/graph.h"
#include "kiln/tensor.h"

namespace kiln {

// What a traced Tensor points at. The type is copied so that dtype()/shape() stay valid after the
// trace has ended; `value` may only be used while the trace `trace_id` is active.
struct TracedValue {
  Value* value = nullptr;
  uint64_t trace_id = 0;
  TensorType type;
  int value_id = 0;  // for printing, valid even after the graph is gone
};

class TraceContext {
 public:
  explicit TraceContext(Graph& graph);
  Graph& graph() { return graph_; }
  uint64_t id() const { return id_; }
  // Traced tensor standing for a value of this graph.
  Tensor wrap(Value* v) const;
  // The graph value for an operand: its value if traced by this trace, a constant node (added
  // once per distinct eager tensor) otherwise. `what` names the operand in errors.
  Value* value_of(const Tensor& t, const std::string& what);

 private:
  Graph& graph_;
  uint64_t id_;
  // Eager tensors already captured, keyed by storage; the HostTensor is held so its address is
  // never reused by another tensor while the trace lives.
  std::map<const void*, std::vector<std::pair<HostTensor, Value*>>> constants_;
};

// The context of the trace running on this thread, or null.
TraceContext* active_trace();

// Makes `ctx` the active trace of this thread for its lifetime; nested traces are rejected.
class ActiveTraceScope {
 public:
  explicit ActiveTraceScope(TraceContext& ctx);
  ~ActiveTraceScope();
  ActiveTraceScope(const ActiveTraceScope&) = delete;
  ActiveTraceScope& operator=(const ActiveTraceScope&) = delete;
};

}  // namespace kiln
