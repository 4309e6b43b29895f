// kiln::trace and TracedFunction: records a Graph by running the user's function on traced
// tensors, then serves calls from a cache of traces keyed by input guards (dtype, rank, static
// dims; dynamic dims bind symbols), tracing again on a miss up to a recompile limit.
#include "kiln/trace.h"

#include <iostream>
#include <map>
#include <mutex>
#include <set>

#include "frontend/trace/trace_context.h"
#include "kiln/error.h"
#include "kiln/interp.h"

namespace kiln {

namespace {

class InterpreterExecutor final : public Executor {
 public:
  explicit InterpreterExecutor(const Graph& graph) : graph_(graph) {}
  std::string name() const override { return "interpreter"; }
  std::vector<HostTensor> run(const std::vector<HostTensor>& inputs) override {
    return interp::run(graph_, inputs);
  }

 private:
  const Graph& graph_;
};

// One cached trace. Member order matters: the executor may refer to the graph, so it goes first
// on destruction.
struct CachedTrace {
  std::vector<TensorType> input_types;  // dynamic dims are symbols
  std::unique_ptr<Graph> graph;
  std::unique_ptr<Executor> executor;
};

}  // namespace

ExecutorFactory interpreter_executor() {
  return [](const Graph& g) -> std::unique_ptr<Executor> {
    return std::make_unique<InterpreterExecutor>(g);
  };
}

struct TracedFunction::State {
  TraceFn fn;
  TraceOptions options;
  std::vector<CachedTrace> traces;
  std::string last_retrace_reason;
  int eager_fallbacks = 0;
  bool warned_about_limit = false;
  std::mutex mutex;  // guards the cache; tracing runs under it

  std::string label() const { return str("traced function '", options.name, "'"); }

  // The symbol of each dynamic dim as (input, dim) -> name.
  std::map<std::pair<int, int>, std::string> dynamic_symbols() const {
    std::map<std::pair<int, int>, std::string> out;
    for (const DynamicDim& d : options.dynamic_dims) out[{d.input, d.dim}] = d.symbol;
    return out;
  }

  // Checks the inputs against the dynamic-dim declarations and returns the symbol values.
  std::map<std::string, int64_t> bind_dynamic_dims(const std::vector<Tensor>& inputs) const {
    std::map<std::string, int64_t> bindings;
    std::map<std::string, std::pair<int, int>> bound_by;
    for (const DynamicDim& d : options.dynamic_dims) {
      KILN_CHECK(d.input >= 0 && d.input < int(inputs.size()), label(), ": dynamic dim '",
                 d.symbol, "' names input ", d.input, ", but the function takes ", inputs.size(),
                 " inputs");
      int rank = inputs[size_t(d.input)].rank();
      KILN_CHECK(d.dim >= 0 && d.dim < rank, label(), ": dynamic dim '", d.symbol, "' names dim ",
                 d.dim, " of input ", d.input, ", which has rank ", rank);
      int64_t size = inputs[size_t(d.input)].sizes()[size_t(d.dim)];
      KILN_CHECK(size >= 1, label(), ": input ", d.input, " dim ", d.dim, " ('", d.symbol,
                 "') is ", size, "; dynamic dims must be >= 1");
      auto [it, inserted] = bindings.emplace(d.symbol, size);
      if (inserted) {
        bound_by[d.symbol] = {d.input, d.dim};
      } else {
        auto [first_input, first_dim] = bound_by[d.symbol];
        KILN_CHECK(it->second == size, label(), ": inputs disagree on dynamic dim '", d.symbol,
                   "': input ", first_input, " dim ", first_dim, " is ", it->second,
                   " but input ", d.input, " dim ", d.dim, " is ", size);
      }
    }
    return bindings;
  }

  // "" when the inputs satisfy the trace's dtype/rank/static-dim guards, else why not.
  static std::string mismatch(const CachedTrace& t, const std::vector<Tensor>& inputs) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      const TensorType& want = t.input_types[i];
      TensorType got = inputs[i].type();
      if (got.dtype != want.dtype)
        return str("input ", i, " has dtype ", dtype_name(got.dtype), ", traced with ",
                   dtype_name(want.dtype));
      if (got.rank() != want.rank())
        return str("input ", i, " has rank ", got.rank(), " (", got.to_string(),
                   "), traced with rank ", want.rank(), " (", want.to_string(), ")");
      for (int d = 0; d < got.rank(); ++d) {
        const SymInt& w = want.shape[size_t(d)];
        if (w.is_constant() && w.constant() != got.shape[size_t(d)].constant())
          return str("input ", i, " dim ", d, " is ", got.shape[size_t(d)].to_string(),
                     ", traced with ", w.constant(),
                     " (mark it in TraceOptions::dynamic_dims to accept any size)");
      }
    }
    return "";
  }

  void check_shape_guards(const CachedTrace& t, const std::map<std::string, int64_t>& bindings) const {
    for (const ShapeGuard& guard : t.graph->guards()) {
      int64_t lhs = guard.lhs.evaluate(bindings), rhs = guard.rhs.evaluate(bindings);
      KILN_CHECK(lhs == rhs, label(), ": these input shapes break a guard recorded while tracing: ",
                 guard.to_string(), " (", lhs, " != ", rhs, ")");
    }
  }

  CachedTrace record(const std::vector<Tensor>& inputs) {
    auto symbols = dynamic_symbols();
    CachedTrace t;
    t.graph = std::make_unique<Graph>(options.name);
    std::vector<Tensor> traced_inputs;
    TraceContext ctx(*t.graph);
    for (size_t i = 0; i < inputs.size(); ++i) {
      KILN_CHECK(!inputs[i].is_traced(), label(), ": input ", i,
                 " is a traced tensor; pass concrete (eager) tensors");
      TensorType type = inputs[i].type();
      for (int d = 0; d < type.rank(); ++d) {
        auto it = symbols.find({int(i), d});
        if (it != symbols.end()) type.shape[size_t(d)] = SymInt::symbol(it->second);
      }
      t.input_types.push_back(type);
      traced_inputs.push_back(ctx.wrap(t.graph->add_input(str("x", i), type)));
    }
    std::vector<Value*> outputs;
    {
      ActiveTraceScope active(ctx);
      std::vector<Tensor> results = fn(traced_inputs);
      KILN_CHECK(!results.empty(), label(), " returned no tensors");
      for (size_t i = 0; i < results.size(); ++i)
        outputs.push_back(ctx.value_of(results[i], str(label(), " result ", i)));
    }
    t.graph->set_outputs(outputs);
    verify(*t.graph);
    t.executor = (options.executor ? options.executor : interpreter_executor())(*t.graph);
    KILN_CHECK(t.executor != nullptr, label(), ": the executor factory returned null");
    return t;
  }

  std::string limit_message() const {
    return str(label(), " reached its recompile limit (", options.recompile_limit,
               " traces); the last call could not reuse a trace because ", last_retrace_reason,
               ". Mark the dims that change as dynamic (TraceOptions::dynamic_dims) or raise "
               "TraceOptions::recompile_limit.");
  }
};

namespace {
std::vector<HostTensor> hosts_of(const std::string& label, const std::vector<Tensor>& inputs) {
  std::vector<HostTensor> hosts;
  hosts.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i].defined(), label, ": input ", i, " is an undefined Tensor");
    KILN_CHECK(!inputs[i].is_traced(), label, ": input ", i,
               " is a traced tensor; calling a traced function while tracing is not supported "
               "yet (call the original function instead)");
    hosts.push_back(inputs[i].host());
  }
  return hosts;
}
}  // namespace

std::vector<Tensor> TracedFunction::operator()(const std::vector<Tensor>& inputs) const {
  KILN_CHECK(state_ != nullptr, "calling an empty TracedFunction (use kiln::trace to make one)");
  State& s = *state_;
  std::vector<HostTensor> hosts = hosts_of(s.label(), inputs);
  Executor* executor = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    KILN_CHECK(inputs.size() == s.traces.front().input_types.size(), s.label(), " takes ",
               s.traces.front().input_types.size(), " inputs, got ", inputs.size());
    std::map<std::string, int64_t> bindings = s.bind_dynamic_dims(inputs);
    std::string reason;
    for (const CachedTrace& t : s.traces) {
      std::string why = State::mismatch(t, inputs);
      if (why.empty()) {
        s.check_shape_guards(t, bindings);
        executor = t.executor.get();
        break;
      }
      if (reason.empty()) reason = why;
    }
    s.last_retrace_reason = executor ? "" : reason;
    if (executor == nullptr) {
      if (int(s.traces.size()) >= s.options.recompile_limit) {
        std::string message = s.limit_message();
        if (s.options.on_limit == OnRecompileLimit::Error) {
          std::cerr << "kiln: error: " << message << "\n";
          throw Error(message);
        }
        if (!s.warned_about_limit) {
          std::cerr << "kiln: warning: " << message << " Running eagerly from now on for such "
                    << "inputs.\n";
          s.warned_about_limit = true;
        }
        ++s.eager_fallbacks;
      } else {
        s.traces.push_back(s.record(inputs));
        executor = s.traces.back().executor.get();
      }
    }
  }
  if (executor == nullptr) return s.fn(inputs);  // eager fallback, outside the lock
  std::vector<Tensor> results;
  for (HostTensor& h : executor->run(hosts)) results.push_back(Tensor::from_host(std::move(h)));
  return results;
}

Tensor TracedFunction::operator()(const Tensor& input) const {
  std::vector<Tensor> results = (*this)(std::vector<Tensor>{input});
  KILN_CHECK(results.size() == 1, "traced function '", state_->options.name, "' returns ",
             results.size(), " tensors; call it with a vector of inputs");
  return results[0];
}

int TracedFunction::num_traces() const {
  if (!state_) return 0;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return int(state_->traces.size());
}

const Graph& TracedFunction::graph() const { return graph(num_traces() - 1); }

const Graph& TracedFunction::graph(int index) const {
  KILN_CHECK(state_ != nullptr, "empty TracedFunction has no graph");
  std::lock_guard<std::mutex> lock(state_->mutex);
  KILN_CHECK(index >= 0 && index < int(state_->traces.size()), "trace ", index,
             " does not exist; ", state_->label(), " has ", state_->traces.size(), " traces");
  return *state_->traces[size_t(index)].graph;
}

std::string TracedFunction::guards_text() const {
  if (!state_) return "";
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::string out;
  for (size_t t = 0; t < state_->traces.size(); ++t) {
    const CachedTrace& c = state_->traces[t];
    out += str("trace ", t, " (", c.graph->num_nodes(), " nodes, executor ", c.executor->name(),
               "):\n");
    for (size_t i = 0; i < c.input_types.size(); ++i)
      out += str("  input ", i, ": ", c.input_types[i].to_string(), "\n");
    std::set<std::string> symbols;
    for (const TensorType& type : c.input_types)
      for (const SymInt& d : type.shape) d.collect_symbols(symbols);
    for (const std::string& sym : symbols) out += str("  ", sym, " >= 1\n");
    for (const ShapeGuard& g : c.graph->guards()) out += str("  ", g.to_string(), "\n");
  }
  return out;
}

std::string TracedFunction::last_retrace_reason() const {
  if (!state_) return "";
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->last_retrace_reason;
}

int TracedFunction::num_eager_fallbacks() const {
  if (!state_) return 0;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->eager_fallbacks;
}

TracedFunction trace(TraceFn fn, const std::vector<Tensor>& example_inputs, TraceOptions options) {
  KILN_CHECK(fn != nullptr, "kiln::trace needs a function");
  KILN_CHECK(options.recompile_limit >= 1, "TraceOptions::recompile_limit must be >= 1, got ",
             options.recompile_limit);
  TracedFunction out;
  out.state_ = std::make_shared<TracedFunction::State>();
  TracedFunction::State& s = *out.state_;
  s.fn = std::move(fn);
  s.options = std::move(options);
  hosts_of(s.label(), example_inputs);  // rejects undefined and traced examples
  s.bind_dynamic_dims(example_inputs);
  s.traces.push_back(s.record(example_inputs));
  return out;
}

TracedFunction trace(std::function<Tensor(const Tensor&)> fn, const Tensor& example_input,
                     TraceOptions options) {
  KILN_CHECK(fn != nullptr, "kiln::trace needs a function");
  TraceFn wrapped = [fn = std::move(fn)](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{fn(in.at(0))};
  };
  return trace(std::move(wrapped), {example_input}, std::move(options));
}

}  // namespace kiln
