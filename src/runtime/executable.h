// The compiled CPU Executable: a list of steps (generated kernels from one shared object, library
// calls) over buffers (inputs, constants, outputs, held tensors for library operands, and an
// arena for kernel-only intermediates planned by liveness). Why: kiln::compile's product, kept
// apart from the compile driver so the run loop reads on its own.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "codegen/cpu/cpu_jit.h"
#include "kiln/compile.h"
#include "lower/fusion.h"
#include "lower/lower_group.h"
#include "lower/memory_plan.h"
#include "lower/program.h"
#include "runtime/onednn_plan.h"
#include "runtime/output_pool.h"

namespace kiln::runtime {

// The program-level IR's types (lower/program.h), under the names the runtime has always used.
using BufferSlot = lower::BufferSlot;
using Step = lower::ProgramStep;

// The CPU Executable is its Program (the steps and slots) plus the loaded kernels that run it.
class CompiledExecutable : public Executable, public lower::Program {
 public:
  std::vector<HostTensor> run(const std::vector<HostTensor>& inputs, Scoreboard* sb) override;
  std::string explain() const override;
  const CompileStats& stats() const override { return stats_; }
  RunStats last_run() const override;
  const std::string& source() const override { return source_; }

  // Filled by the compile driver (src/runtime/compile.cc); the Program's fields by lower_for_target.
  CompileOptions options;
  std::vector<codegen::cpu::KernelFn> kernel_fns;  // per Program::kernels entry, once loaded
  std::shared_ptr<codegen::cpu::SharedObject> shared_object;
  std::string compiler_command;
  CompileStats stats_;
  std::string source_;
  std::map<size_t, OnednnStepPlan> onednn_plans;  // conv and matmul steps on oneDNN, by step index
  std::set<size_t> folded_steps;                  // kernel steps a oneDNN plan runs as post-ops
  // What runs library step i ("oneDNN brg:avx512_core + post-ops [...]", "eager OpenBLAS"...), or
  // "folded into the conv before it"; empty for other steps. For explain.
  std::string step_note(size_t i) const;
  // oneDNN steps that took the exact path (sources not all finite) since compiling; for tests.
  int64_t exact_fallbacks = 0;

 private:
  const lower::MemoryPlan& plan_for(const std::vector<int64_t>& syms,
                                    const std::map<std::string, int64_t>& bindings);
  std::map<std::vector<int64_t>, lower::MemoryPlan> plans_;
  std::vector<lower::BufferRequest> last_requests_;
  std::map<const Value*, HostTensor> held_;  // kernel-written held buffers, kept across runs (no page faults)
  OutputPool outputs_;                        // output buffers the caller dropped, reused (no page faults)
  std::unique_ptr<uint8_t[], void (*)(uint8_t*)> arena_{nullptr, [](uint8_t* p) { ::operator delete[](p, std::align_val_t(64)); }};
  int64_t arena_capacity_ = 0;
  mutable std::mutex run_mutex_;  // one run at a time: the arena is shared
  RunStats last_run_;
};

// Decompose, schedule, lower every fused group to Loop IR and place buffers, without printing or
// compiling anything: the front half of kiln::compile, shared with other targets (CUDA). Kernel
// symbols are named <kernel_prefix>k<N>.
std::shared_ptr<CompiledExecutable> lower_for_target(const Graph& g, const CompileOptions& options,
                                                     const std::string& kernel_prefix);

}  // namespace kiln::runtime
