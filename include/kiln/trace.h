// kiln::trace: captures a C++ function written with kiln::Tensor into a Graph, guarded by the
// dtypes and shapes of its inputs. Why: capture is the first stage of the compiler; guards decide
// when a captured graph may be reused and when the function must be traced again.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "kiln/graph.h"
#include "kiln/tensor.h"

namespace kiln {

// Marks dim `dim` of input `input` as the symbol `symbol`: any size >= 1 is accepted without
// tracing again, and inputs sharing a symbol must agree on its value.
struct DynamicDim {
  int input = 0;
  int dim = 0;
  std::string symbol;
};

// What to do when a call needs a new trace but recompile_limit traces exist already.
enum class OnRecompileLimit { Error, FallBackToEager };

// Runs one traced graph. Why: the seam where a compiled backend replaces the interpreter; the
// factory is called once per trace, so an executor may compile ahead of the first run.
class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string name() const = 0;
  virtual std::vector<HostTensor> run(const std::vector<HostTensor>& inputs) = 0;
};
using ExecutorFactory = std::function<std::unique_ptr<Executor>(const Graph&)>;
// The default: kiln::interp::run, the reference interpreter.
ExecutorFactory interpreter_executor();

struct TraceOptions {
  std::vector<DynamicDim> dynamic_dims;
  int recompile_limit = 8;  // most graphs kept for one function (the first trace counts)
  OnRecompileLimit on_limit = OnRecompileLimit::Error;
  std::string name = "traced";  // graph name and label in messages
  ExecutorFactory executor;     // empty: interpreter_executor()
};

using TraceFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// A traced function: call it like the original. Copies share the cache of traces.
class TracedFunction {
 public:
  TracedFunction() = default;

  // Picks the trace whose guards the inputs satisfy (tracing again on a miss) and runs it. Inputs
  // must be eager tensors. Throws kiln::Error when two inputs disagree on a shared symbol, and
  // past the recompile limit (unless the options fall back to eager).
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
  // So that f({x}) means "one input, all results" rather than the single-tensor form below.
  std::vector<Tensor> operator()(std::initializer_list<Tensor> inputs) const {
    return (*this)(std::vector<Tensor>(inputs));
  }
  Tensor operator()(const Tensor& input) const;  // for one input and one output

  int num_traces() const;
  const Graph& graph() const;         // the most recent trace
  const Graph& graph(int index) const;
  // Every trace's input guards and shape guards, one block per trace.
  std::string guards_text() const;
  // Why the last call traced again ("" when it did not).
  std::string last_retrace_reason() const;
  int num_eager_fallbacks() const;

  struct State;  // the cache (src/frontend/trace/trace.cc)

 private:
  friend TracedFunction trace(TraceFn, const std::vector<Tensor>&, TraceOptions);
  std::shared_ptr<State> state_;
};

// Traces fn once on example_inputs (which must be eager) and returns the guarded function.
TracedFunction trace(TraceFn fn, const std::vector<Tensor>& example_inputs,
                     TraceOptions options = {});
// Convenience for one input and one output.
TracedFunction trace(std::function<Tensor(const Tensor&)> fn, const Tensor& example_input,
                     TraceOptions options = {});

}  // namespace kiln
