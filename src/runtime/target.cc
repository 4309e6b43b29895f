// compile_for and the parts of Target every target shares. Why: "optimise for the target, then
// compile" is one function, not a sequence each tool repeats.
#include "kiln/target.h"

#include "kiln/error.h"

namespace kiln {

OptimizeOptions Target::optimize_options() const {
  OptimizeOptions o;
  o.target.native_ops = native_ops(kind());
  return o;
}

std::string Target::refusal(const Graph&) const { return ""; }

std::shared_ptr<Executable> compile_for(const Graph& g, const Target& target, const CompileOptions& options,
                                        const CompileForOptions& how) {
  std::unique_ptr<Graph> optimized = g.clone();
  PassStats stats;
  if (how.optimize) stats = optimize(*optimized, how.optimizer ? *how.optimizer : target.optimize_options());
  std::shared_ptr<Executable> exe = target.compile(*optimized, options);
  if (how.report) {
    how.report->optimized = std::move(optimized);
    how.report->pass_stats = std::move(stats);
  }
  return exe;
}

namespace {
class TargetTraceExecutor final : public Executor {
 public:
  TargetTraceExecutor(const Graph& g, const Target& target, const CompileOptions& options)
      : name_(str("compiled (", target.name(), ")")), exe_(compile_for(g, target, options)) {}
  std::string name() const override { return name_; }
  std::vector<HostTensor> run(const std::vector<HostTensor>& inputs) override { return exe_->run(inputs); }

 private:
  std::string name_;
  std::shared_ptr<Executable> exe_;
};
}  // namespace

ExecutorFactory target_executor(const Target& target, const CompileOptions& options) {
  return [&target, options](const Graph& g) -> std::unique_ptr<Executor> {
    return std::make_unique<TargetTraceExecutor>(g, target, options);
  };
}

}  // namespace kiln
