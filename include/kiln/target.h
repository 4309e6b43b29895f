// A target: one place that says what a backend runs natively, how its graphs are optimised and how
// they are compiled. Why: the CLI, the benchmarks, `kiln dump` and the tools used to assemble
// "optimise for the target, then compile" by hand, each a little differently; compile_for is the
// one way in, and adding a backend means implementing this interface (docs/adding_a_backend.md).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ceilings.h"
#include "kiln/compile.h"
#include "kiln/cuda.h"
#include "kiln/graph.h"
#include "kiln/passes.h"
#include "kiln/scoreboard.h"
#include "kiln/trace.h"

namespace kiln {

enum class TargetKind { Cpu, Cuda };
inline constexpr TargetKind kAllTargets[] = {TargetKind::Cpu, TargetKind::Cuda};
std::string_view target_kind_name(TargetKind kind);  // "cpu", "cuda"

// What a target does with an op of the table (src/runtime/op_support_<target>.def).
enum class OpDecision {
  Kernel,       // a generated kernel runs it (fused with its neighbours where legal)
  Decompose,    // rewritten into primitives by the op table's decomposition, which then fuse
  Library,      // a hand-written or library kernel (BLAS, cuBLASLt, the eager CPU kernels)
  Host,         // computed on the host: shapes, constants, control flow, containers
  Unsupported,  // the target cannot run it; the note says why
};
std::string_view op_decision_name(OpDecision d);  // "kernel", "decompose", ...

struct OpSupport {
  OpDecision decision = OpDecision::Unsupported;
  std::string_view note;  // conditions and fallbacks ("f16/bf16 without a mask; else decomposed")
};

// `op` on `kind`: every op of ops.def has one row per target (checked by tests/unit/compile/
// op_support_test.cc, which also checks the rows against what the code generators accept).
const OpSupport& op_support(TargetKind kind, Op op);
// High-level ops (those with a decomposition) the target keeps whole: its decision is kernel,
// library or host (an unsupported op is decomposed all the same). The optimizer's TargetCaps.
std::set<Op> native_ops(TargetKind kind);

class Target {
 public:
  virtual ~Target() = default;
  virtual TargetKind kind() const = 0;
  std::string_view name() const { return target_kind_name(kind()); }
  // "cpu: 2 threads", "cuda: NVIDIA H200 (sm_90)"; never fails.
  virtual std::string description() const = 0;
  // Empty when the target can compile and run here; otherwise why not ("no CUDA device").
  virtual std::string unavailable_reason() const { return ""; }

  const OpSupport& support(Op op) const { return op_support(kind(), op); }
  // The optimizer settings of the target's pipeline: its native ops stay whole.
  virtual OptimizeOptions optimize_options() const;
  // Empty when the target can compile this already optimised graph; else why not, naming the node
  // (what compile would throw for it). Needs no device. Why: tools report a graph the target does
  // not run yet ("unsupported on cuda") apart from one it compiles wrongly.
  virtual std::string refusal(const Graph& optimized) const;
  // Compiles an already optimised graph (compile_for optimises first). Throws kiln::Error naming
  // the node for ops the target cannot run.
  virtual std::shared_ptr<Executable> compile(const Graph& optimized, const CompileOptions& options) const = 0;
  // Runs `g` one kernel per op: the eager baseline every report compares against. Records one
  // entry per op into `sb` when non-null.
  virtual std::vector<HostTensor> run_eager(const Graph& g, const std::vector<HostTensor>& inputs,
                                            Scoreboard* sb) const = 0;
  // The measured copy bandwidth of a `bytes`-sized buffer, GB/s (read + write; the median or best
  // of `repeats` copies after a warm-up): the gap meter's and the roofline's memory ceiling.
  virtual double copy_gbps(int64_t bytes, int repeats) const = 0;
  // The roofline's ceilings. The CPU: `kiln calibrate`'s (cached next to the compile cache; measured
  // quickly when missing). CUDA: the copy bandwidth measured now (GEMM
  // rate and launch cost left 0: not measured).
  virtual Ceilings ceilings() const = 0;
};

// The CPU: kiln::compile's generated C++ and library calls; eager kernels for the baseline.
const Target& cpu_target();
// The CUDA GPU with these settings (`options.base` is ignored: compile_for's CompileOptions are
// used). In every build; unavailable_reason() says when it cannot run here, and compile throws.
std::unique_ptr<Target> cuda_target(const CudaCompileOptions& options = {});
// "cpu" or "cuda" with default settings; throws kiln::Error naming anything else, and for "cuda"
// where the CUDA target is unavailable, with the reason.
const Target& target_named(const std::string& name);

// What the optimizer did on the way (compile_for fills it when asked).
struct OptimizeReport {
  std::unique_ptr<Graph> optimized;  // the graph handed to Target::compile
  PassStats pass_stats;              // empty when the optimizer did not run
};

struct CompileForOptions {
  bool optimize = true;                        // the target's pipeline first (off: compile as given)
  const OptimizeOptions* optimizer = nullptr;  // replaces target.optimize_options() when non-null
  OptimizeReport* report = nullptr;            // filled when non-null
};

// The one way to compile: optimise `g` with the target's pipeline, then compile it for the target.
// Shared, like kiln::compile's product (executables compiled in one batch share a shared object).
std::shared_ptr<Executable> compile_for(const Graph& g, const Target& target, const CompileOptions& options = {},
                                        const CompileForOptions& how = {});

// An executor for kiln::trace (TraceOptions::executor) that compiles each new trace for `target`
// through compile_for (its optimizer pipeline included) and runs the Executable on every call;
// its name() is "compiled (<target>)". `target` must outlive the traced function.
ExecutorFactory target_executor(const Target& target, const CompileOptions& options = {});

}  // namespace kiln
