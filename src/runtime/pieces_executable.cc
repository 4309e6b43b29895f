// Running a graph cut at its host nodes (host_segments.h: compile_in_pieces). Why: the device
// target keeps every segment compiled whole, and control flow and containers still run.
#include <chrono>
#include <map>
#include <sstream>

#include "kernels/cpu/eager.h"
#include "kiln/error.h"
#include "kiln/interp.h"
#include "kiln/scoreboard.h"
#include "runtime/host_segments.h"

namespace kiln::runtime {

namespace {

class PiecesExecutable final : public Executable {
 public:
  PiecesExecutable(const Graph& g, const std::function<std::shared_ptr<Executable>(const Graph&)>& compile_segment)
      : graph_(g.clone()), pieces_(split_at_host_nodes(*graph_)) {
    for (GraphPiece& p : pieces_) {
      if (!p.segment) {
        exes_.push_back(nullptr);
        continue;
      }
      exes_.push_back(compile_segment(*p.segment));
      const CompileStats& s = exes_.back()->stats();
      stats_.kernels_generated += s.kernels_generated;
      stats_.library_calls += s.library_calls;
      stats_.lower_ms += s.lower_ms;
      stats_.compile_ms += s.compile_ms;
      stats_.load_ms += s.load_ms;
      stats_.cache_hit = s.cache_hit;
      source_ += exes_.back()->source();
    }
  }

  std::vector<HostTensor> run(const std::vector<HostTensor>& inputs, Scoreboard* sb) override {
    const Graph& g = *graph_;
    KILN_CHECK(inputs.size() == g.inputs().size(), "graph '", g.name(), "' takes ", g.inputs().size(), " inputs, got ",
               inputs.size());
    std::map<std::string, int64_t> bindings = interp::bind_symbols(g, inputs);
    std::map<const Value*, HostTensor> values;
    for (size_t i = 0; i < inputs.size(); ++i) values[g.inputs()[i]] = inputs[i];
    auto value_of = [&](const Value* v) -> HostTensor {
      if (v->producer && v->producer->op == Op::Constant) return v->producer->attrs.get_tensor("value");
      auto it = values.find(v);
      KILN_CHECK(it != values.end(), "graph '", g.name(), "': value %", v->id, " was not computed before its use");
      return it->second;
    };
    RunStats stats;
    for (size_t k = 0; k < pieces_.size(); ++k) {
      const GraphPiece& p = pieces_[k];
      std::vector<HostTensor> in;
      if (p.host) {
        for (const Value* v : p.host->inputs) in.push_back(value_of(v));
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<HostTensor> out;
        // A plain op with a fast CPU kernel (sort, sample) runs it; control flow, containers and
        // the rest run in the interpreter.
        const bool fast = !p.host->info().has(kSubgraph) && !p.host->info().has(kContainer) &&
                          !in.empty() && eager::has_fast_kernel(p.host->op, in[0].dtype());
        try {
          out = fast ? eager::run_op(p.host->op, eager::bind_shape_attrs(p.host->attrs, bindings), in)
                     : interp::run_node(*p.host, in, bindings);
        } catch (const Error& e) {
          throw Error(str(p.host->describe(), ": ", e.what()));
        }
        for (size_t i = 0; i < out.size(); ++i) values[p.host->outputs[i]] = out[i];
        ++stats.library_steps;
        if (!fast) stats.reference_fallbacks.push_back(std::string(op_name(p.host->op)));
        if (sb) {
          KernelRecord rec;
          rec.name = str("host ", op_name(p.host->op));
          rec.source_ops = {std::string(op_name(p.host->op))};
          rec.time_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
          sb->add(std::move(rec));
        }
        continue;
      }
      for (const Value* v : p.inputs) in.push_back(value_of(v));
      std::vector<HostTensor> out = exes_[k]->run(in, sb);
      for (size_t i = 0; i < out.size(); ++i) values[p.outputs[i]] = out[i];
      RunStats ran = exes_[k]->last_run();
      stats.library_steps += ran.library_steps;
      stats.reference_fallbacks.insert(stats.reference_fallbacks.end(), ran.reference_fallbacks.begin(),
                                       ran.reference_fallbacks.end());
    }
    std::vector<HostTensor> results;
    for (const Value* v : g.outputs()) results.push_back(value_of(v));
    last_run_ = std::move(stats);
    return results;
  }

  std::string explain() const override {
    std::ostringstream os;
    os << "== graph '" << graph_->name() << "' in " << pieces_.size()
       << " pieces: compiled segments, and host nodes the interpreter runs (control flow, sequences, optionals, "
          "strings)\n";
    for (size_t k = 0; k < pieces_.size(); ++k) {
      if (pieces_[k].host) os << "-- piece " << k << ": host " << pieces_[k].host->describe() << "\n";
      else os << "-- piece " << k << ": segment\n" << exes_[k]->explain() << "\n";
    }
    return os.str();
  }
  const CompileStats& stats() const override { return stats_; }
  RunStats last_run() const override { return last_run_; }
  const std::string& source() const override { return source_; }

 private:
  std::unique_ptr<Graph> graph_;
  std::vector<GraphPiece> pieces_;
  std::vector<std::shared_ptr<Executable>> exes_;
  CompileStats stats_;
  RunStats last_run_;
  std::string source_;
};

}  // namespace

std::shared_ptr<Executable> compile_in_pieces(
    const Graph& g, const std::function<std::shared_ptr<Executable>(const Graph&)>& compile_segment) {
  return std::make_shared<PiecesExecutable>(g, compile_segment);
}

}  // namespace kiln::runtime
