// The compiled CPU path: kiln::compile turns a graph into an Executable made of fused generated
// kernels (C++ compiled by the system compiler, loaded with dlopen) and library calls. Why: eager
// runs one kernel and one memory round trip per op; a fused kernel reads its inputs once and
// writes its outputs once. See docs/compiler.md.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kiln/graph.h"
#include "kiln/host_tensor.h"
#include "kiln/scoreboard.h"
#include "kiln/trace.h"

namespace kiln {

struct CompileOptions {
  // Threads for generated kernels and library calls (OpenMP); 0 = the OpenMP default.
  int num_threads = 0;
  // Loops with fewer iterations than this run on one thread (the fork/join costs more).
  int64_t parallel_threshold = 32768;
  // Fuse at all; false gives one generated kernel per op (useful to measure what fusion buys).
  bool fuse = true;
  // Rewrites high-level ops (softmax, layer_norm, ...) into primitives with the op table's
  // decompositions before scheduling, so that they fuse; ops whose decomposition is missing stay
  // whole and run as library calls.
  bool decompose = true;
  // Ops kept whole even where they have a decomposition: a target with a kernel of its own for
  // them (compile_cuda: attention, which it first decomposes where its kernel cannot run it).
  std::set<Op> keep_whole;
  // Attention kept whole reads q, k and v through strided views in place (compile_cuda: its fused
  // kernel takes strides) instead of materialising them.
  bool attention_reads_views = false;
  // Adds -march=native: faster, but the shared objects (and the cache entries) then only run on
  // machines like this one. Off by default so caches are portable.
  bool march_native = false;
  // Extra flags appended to the compiler command line (part of the cache key).
  std::vector<std::string> extra_flags;
  // Compile cache directory; empty = $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
  std::string cache_dir;
  bool use_cache = true;
  // CPU: conv2d and matmul steps run on oneDNN with their elementwise tails fused as post-ops
  // (runtime/onednn_plan.h); false (or KILN_ONEDNN=0 in the environment) keeps the eager
  // im2col + OpenBLAS and OpenBLAS kernels.
  bool onednn = true;
};

// What compiling cost, for reports and tests.
struct CompileStats {
  int kernels_generated = 0;
  int library_calls = 0;
  bool cache_hit = false;     // the shared object came from the on-disk cache
  double lower_ms = 0;        // scheduling + Loop IR + codegen
  double compile_ms = 0;      // the system compiler (0 on a cache hit)
  double load_ms = 0;         // dlopen + symbol lookup
  std::string cache_key;      // hex hash of source + compiler identity + flags
  std::string shared_object;  // path of the loaded .so
};

// What the last run() took besides generated kernels. Why: a library step whose op has no fast
// kernel (for its dtype or attributes) runs the interpreter's reference kernel, so a compiled run
// made only of such steps compares the reference with itself; reports must be able to tell.
struct RunStats {
  int library_steps = 0;  // library calls and host steps the run took
  // Those that ran no fast kernel of the target, by op name, one per step: on the CPU the reference
  // kernel or the interpreter (control flow, containers, strings); on CUDA the steps computed on
  // the host (shape arithmetic).
  std::vector<std::string> reference_fallbacks;
};

class Executable {
 public:
  virtual ~Executable() = default;
  // Runs on concrete inputs (symbolic dims bound from their shapes; guards checked). Fills `sb`
  // with one KernelRecord per fused kernel or library call when non-null.
  virtual std::vector<HostTensor> run(const std::vector<HostTensor>& inputs,
                                      Scoreboard* sb = nullptr) = 0;
  // The fusion decisions and refusals with reasons, the Loop IR, the generated source and the
  // memory plan, as one human-readable report.
  virtual std::string explain() const = 0;
  virtual const CompileStats& stats() const = 0;
  // What the most recent run() took (empty before the first run).
  virtual RunStats last_run() const = 0;
  // The generated C++ translation unit.
  virtual const std::string& source() const = 0;
};

// Compiles `g` for the CPU. Symbolic dims stay symbolic: generated kernels take every extent as a
// run-time argument, so one Executable serves every binding of the graph's dims. Throws
// kiln::Error naming the node for graphs it cannot run and the compiler's output if it fails.
std::shared_ptr<Executable> compile(const Graph& g, const CompileOptions& options = {});

// Compiles several graphs into one translation unit (one compiler run). Why: the compiler's fixed
// start-up cost dominates tiny graphs; tests that compile hundreds of graphs batch them.
std::vector<std::shared_ptr<Executable>> compile_batch(const std::vector<const Graph*>& graphs,
                                                       const CompileOptions& options = {});

// An executor for kiln::trace (TraceOptions::executor) that compiles each new trace once, when
// it is made, and runs the Executable on every call. Why: traced C++ functions reach the compiled
// path through the same seam as the interpreter; its name() is "compiled".
ExecutorFactory compiled_executor(const CompileOptions& options = {});

// The directory the compile cache uses for these options.
std::string compile_cache_dir(const CompileOptions& options = {});

}  // namespace kiln
