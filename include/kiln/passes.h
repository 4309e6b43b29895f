// The graph optimizer's one-call API. Why: tools (kiln run, kiln-opt) and the compile path need
// "make this graph cheaper without changing what it computes" without knowing the pass list.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kiln/graph.h"

namespace kiln {

// What the target executes natively: high-level ops in `native_ops` are kept whole; every other
// op with a decomposition in ops.def is rewritten into primitives. Why: a backend with a fused
// softmax kernel wants softmax, one that only generates loops wants exp/sub/max/div.
struct TargetCaps {
  std::set<Op> native_ops;
  // Keeps every op: nothing is decomposed (the reference interpreter runs everything).
  static TargetCaps keep_all();
  // Keeps no high-level op: everything with a decomposition becomes primitives.
  static TargetCaps primitives_only();
  bool is_native(Op op) const { return native_ops.count(op) != 0; }
};

// A rewrite that belongs to one target (the CUDA target's graph preparation: split into slices,
// attention its kernel cannot run decomposed). Why: it runs inside the pass manager, as the last
// stage of that target's pipeline, with the same verification, timing, --print-after-all and dumps
// as every other pass, instead of beside it.
struct TargetPass {
  std::string name;    // "cuda-prepare-graph"
  std::string reason;  // why the target needs it
  std::function<bool(Graph&)> run;  // returns whether the graph changed
};

struct OptimizeOptions {
  TargetCaps target = TargetCaps::primitives_only();
  // The target's own passes (kiln::Target::optimize_options fills them), run after the default
  // pipeline as stage "target", each followed by dce.
  std::vector<TargetPass> target_passes;
  // Permits rewrites that are not exact in IEEE arithmetic (x + 0 -> x, reassociation of
  // constants, x - x -> 0). Off by default: results must match the interpreter bit for bit.
  bool fast_math = false;
  // Constant folding never materialises a constant larger than this many bytes...
  int64_t max_folded_constant_bytes = int64_t(16) << 20;
  // ...nor one that is more than this many bytes larger than the constants it replaces (an
  // expand of a scalar stays an expand: the fused kernel generates it for free).
  int64_t max_folded_growth_bytes = int64_t(64) << 10;
  // Runs the verifier after every pass: on by default in debug builds, forced on by
  // KILN_VERIFY_PASSES=1; the pass tests turn it on.
#ifdef NDEBUG
  bool verify_each = false;
#else
  bool verify_each = true;
#endif
  bool print_after_all = false;     // prints the IR after every pass run to stderr
  std::string dump_dir;             // writes dir/NN-<pass>.kir after every pass run (or KILN_DUMP)
  std::set<std::string> disabled_passes;
  // When non-empty, runs exactly these passes once each, in order, instead of the pipeline.
  std::vector<std::string> pass_list;
  // Records the op histogram after every pass run (for --stats reports); costs a graph walk.
  bool record_op_counts = false;
};

// One execution of one pass.
struct PassRun {
  std::string pass;
  std::string stage;                  // pipeline stage that ran it
  bool changed = false;
  double seconds = 0;
  int nodes_before = 0, nodes_after = 0;
  std::map<std::string, int> op_counts_after;  // filled when record_op_counts
};

struct PassStats {
  std::vector<PassRun> runs;
  double total_seconds = 0;
  int nodes_before = 0, nodes_after = 0;
  std::map<std::string, int> op_counts_before, op_counts_after;
  // Per pass name: how many runs, how many changed the graph, total seconds.
  struct Summary {
    int runs = 0, changed = 0;
    double seconds = 0;
  };
  std::map<std::string, Summary> by_pass() const;
  std::string to_string() const;  // a short per-pass table for logs
};

// Runs the default optimization pipeline (or options.pass_list) over g in place. Throws
// kiln::Error naming the pass when a pass fails or leaves the graph invalid.
PassStats optimize(Graph& g, const OptimizeOptions& options = {});

// Names of every registered pass, with its one-line reason (from src/passes/passes.def).
std::vector<std::pair<std::string, std::string>> registered_passes();

// Node counts by op name.
std::map<std::string, int> op_histogram(const Graph& g);

// An f32 graph rebuilt in f16 or bf16 (mixed precision for GPUs): f32 inputs are cast on entry,
// f32 constants, results and dtype attributes become `to`, f32 outputs are cast back, so callers
// still pass and get f32. The kernels compute 16-bit values in f32 (softmax and norm statistics,
// reduction and GEMM accumulators); only what is stored between kernels is 16-bit. `to` = f32
// returns a copy. Throws kiln::Error for graphs with control flow.
std::unique_ptr<Graph> to_float_precision(const Graph& g, DType to);

}  // namespace kiln
