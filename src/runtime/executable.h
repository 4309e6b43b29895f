// The compiled CPU Executable: a list of steps (generated kernels from one shared object, library
// calls) over buffers (inputs, constants, outputs, held tensors for library operands, and an
// arena for kernel-only intermediates planned by liveness). Why: kiln::compile's product, kept
// apart from the compile driver so the run loop reads on its own.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/cpu/cpu_jit.h"
#include "kiln/compile.h"
#include "lower/fusion.h"
#include "lower/lower_group.h"
#include "lower/memory_plan.h"

namespace kiln::runtime {

struct BufferSlot {
  enum Kind { kInput, kConstant, kOutput, kHeld, kArena } kind = kHeld;
  int index = 0;  // input index, output index, or arena request index
};

struct Step {
  bool library = false;
  const Node* node = nullptr;  // library
  int kernel = -1;             // index into kernels
  codegen::cpu::KernelFn fn = nullptr;
  std::string name;
  std::vector<std::string> source_ops;
};

class CompiledExecutable : public Executable {
 public:
  std::vector<HostTensor> run(const std::vector<HostTensor>& inputs, Scoreboard* sb) override;
  std::string explain() const override;
  const CompileStats& stats() const override { return stats_; }
  const std::string& source() const override { return source_; }

  // Filled by the compile driver (src/runtime/compile.cc).
  std::unique_ptr<Graph> graph;
  CompileOptions options;
  lower::Schedule schedule;
  std::vector<lower::LoweredKernel> kernels;
  std::vector<Step> steps;
  std::map<const Value*, BufferSlot> slots;
  std::vector<const Value*> arena_values;  // arena request i holds arena_values[i]
  std::vector<std::pair<int, int>> arena_lifetimes;
  std::vector<int> arena_in_place_of;  // per arena request: the request it overwrites, or -1
  std::vector<std::string> symbols;
  std::shared_ptr<codegen::cpu::SharedObject> shared_object;
  std::vector<std::string> decomposition_notes;
  std::string compiler_command;
  CompileStats stats_;
  std::string source_;

 private:
  const lower::MemoryPlan& plan_for(const std::vector<int64_t>& syms,
                                    const std::map<std::string, int64_t>& bindings);
  std::map<std::vector<int64_t>, lower::MemoryPlan> plans_;
  std::vector<lower::BufferRequest> last_requests_;
  std::unique_ptr<uint8_t[], void (*)(uint8_t*)> arena_{nullptr, [](uint8_t* p) { ::operator delete[](p, std::align_val_t(64)); }};
  int64_t arena_capacity_ = 0;
  std::mutex run_mutex_;  // one run at a time: the arena is shared
};

// Decompose, schedule, lower every fused group to Loop IR and place buffers, without printing or
// compiling anything: the front half of kiln::compile, shared with other targets (CUDA). Kernel
// symbols are named <kernel_prefix>k<N>.
std::shared_ptr<CompiledExecutable> lower_for_target(const Graph& g, const CompileOptions& options,
                                                     const std::string& kernel_prefix);

}  // namespace kiln::runtime
