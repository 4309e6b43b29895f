// kiln::compile: decompose -> schedule -> Loop IR -> one C++ translation unit -> compile cache /
// system compiler -> dlopen -> Executable. A straight list of named stages, each dumpable through
// Executable::explain().
#include <chrono>
#include <cstdlib>
#include <set>

#include "codegen/common/c_emitter.h"
#include "kiln/error.h"
#include "lower/inplace.h"
#include "lower/view_rules.h"
#include "runtime/compile_cache.h"
#include "runtime/executable.h"
#include "runtime/prebuilt.h"

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;
double millis(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Control flow, containers and nodes on strings run in the interpreter (docs/compiler.md).
bool is_host_step(const Node& n) {
  return n.info().has(kSubgraph) || n.info().has(kContainer) || n.has_string_values();
}

bool can_generate(const Node& n) {
  if (n.has_string_values()) return false;  // a host step (executable.cc): kernels never see strings
  if (n.info().has(kElementwise)) return codegen::can_emit_elementwise(n);
  if (n.info().has(kReduction)) {
    bool mean = false;
    return lower::reduction_fold(n.op, &mean).has_value() && n.inputs[0]->type.dtype != DType::Bool;
  }
  return false;
}

// Rewrites high-level ops that no kernel generates directly into primitives, so they fuse.
std::vector<std::string> decompose_for_fusion(Graph& g, const std::set<Op>& keep_whole) {
  std::vector<std::string> notes;
  std::set<int> failed;
  for (bool changed = true; changed;) {
    changed = false;
    for (Node* n : g.node_list()) {
      const OpInfo& info = n->info();
      if (!info.decompose || keep_whole.count(n->op) || can_generate(*n) || lower::is_index_view(*n) || failed.count(n->id))
        continue;
      std::string what = n->describe();
      g.set_insertion_point(n);
      try {
        std::vector<Value*> repl = info.decompose(g, *n);
        for (size_t i = 0; i < repl.size(); ++i) g.replace_all_uses(n->outputs[i], repl[i]);
        g.set_insertion_point(nullptr);
        g.erase_node(n);
        notes.push_back(str("decomposed ", what, " into primitives"));
        changed = true;
      } catch (const Error& e) {
        g.set_insertion_point(nullptr);
        failed.insert(n->id);
        notes.push_back(str("kept ", what, " whole (decomposition failed: ", e.what(), ")"));
      }
    }
  }
  // Remove what a failed decomposition left behind.
  for (bool changed = true; changed;) {
    changed = false;
    auto nodes = g.node_list();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      bool dead = true;
      for (Value* v : (*it)->outputs) dead &= v->uses.empty() && !g.is_output(v);
      if (dead) {
        g.erase_node(*it);
        changed = true;
      }
    }
  }
  return notes;
}

std::vector<std::string> graph_symbols(const Graph& g) {
  std::set<std::string> syms;
  for (const Value* in : g.inputs())
    for (const SymInt& d : in->type.shape) d.collect_symbols(syms);
  return {syms.begin(), syms.end()};
}

// In-place reuse: a kernel's arena output takes the bytes of an arena input of the same size that
// dies in that kernel, when the Loop IR shows each element is read before it is overwritten
// (lower::can_write_in_place). Both params then lose __restrict in the generated code.
void plan_in_place(runtime::CompiledExecutable& exe) {
  exe.arena_in_place_of.assign(exe.arena_values.size(), -1);
  std::map<const Value*, int> arena_index;
  for (size_t i = 0; i < exe.arena_values.size(); ++i) arena_index[exe.arena_values[i]] = int(i);
  std::set<int> taken;  // inputs already overwritten by some output
  for (size_t k = 0; k < exe.steps.size(); ++k) {
    if (exe.steps[k].library) continue;
    lower::LoweredKernel& lk = exe.kernels[size_t(exe.steps[k].kernel)];
    for (size_t q = 0; q < lk.param_values.size(); ++q) {
      auto out_it = arena_index.find(lk.param_values[q]);
      if (!lk.kernel.params[q].is_output || out_it == arena_index.end()) continue;
      const Value* out_v = lk.param_values[q];
      for (size_t p = 0; p < lk.param_values.size(); ++p) {
        const Value* in_v = lk.param_values[p];
        auto in_it = arena_index.find(in_v);
        if (lk.kernel.params[p].is_output || in_it == arena_index.end() || taken.count(in_it->second)) continue;
        if (exe.arena_lifetimes[size_t(in_it->second)].second != int(k)) continue;  // read later
        if (!(in_v->type.numel() == out_v->type.numel()) ||
            dtype_size(in_v->type.dtype) != dtype_size(out_v->type.dtype))
          continue;
        if (!lower::can_write_in_place(lk.kernel, int(p), int(q))) continue;
        exe.arena_in_place_of[size_t(out_it->second)] = in_it->second;
        taken.insert(in_it->second);
        lk.kernel.params[p].may_alias = lk.kernel.params[q].may_alias = true;
        break;
      }
    }
  }
}

// Stage 1-3 for one graph: everything up to the kernels' Loop IR. `cpu_rows`: the CPU row schedule
// (lower_group.h: values kept in output rows between passes); other targets arrange rows
// their own way.
std::shared_ptr<runtime::CompiledExecutable> lower_graph(const Graph& input, const CompileOptions& opt,
                                                         const std::string& kernel_prefix, bool cpu_rows) {
  auto exe = std::make_shared<runtime::CompiledExecutable>();
  exe->options = opt;
  exe->graph = input.clone();
  Graph& g = *exe->graph;
  if (opt.decompose) exe->decomposition_notes = decompose_for_fusion(g, opt.keep_whole);
  exe->symbols = graph_symbols(g);
  lower::ScheduleOptions so;
  so.fuse = opt.fuse;
  so.attention_reads_views = opt.attention_reads_views;
  so.tails_fold_into_library_calls = cpu_rows && opt.onednn;  // the CPU target folds them into oneDNN post-ops
  so.can_generate = can_generate;
  exe->schedule = lower::schedule(g, so);
  const lower::Schedule& s = exe->schedule;

  lower::LowerContext ctx;
  ctx.symbols = exe->symbols;
  ctx.parallel_threshold = opt.parallel_threshold;
  ctx.keep_row_values_in_outputs = cpu_rows;
  for (const auto& grp : s.groups) {
    runtime::Step step;
    step.name = grp.name();
    for (const Node* n : grp.nodes) step.source_ops.push_back(std::string(op_name(n->op)));
    if (grp.library) {
      step.library = true;
      step.node = grp.nodes[0];
      step.host = is_host_step(*step.node);
      ++exe->stats_.library_calls;
    } else {
      ctx.kernel_name = str(kernel_prefix, "k", exe->kernels.size());
      step.kernel = int(exe->kernels.size());
      exe->kernels.push_back(lower::lower_group(s, grp, ctx));
      ++exe->stats_.kernels_generated;
    }
    exe->steps.push_back(step);
  }

  // Buffer placement: inputs, constants, outputs, then held tensors or arena slots.
  for (size_t i = 0; i < g.inputs().size(); ++i) exe->slots[g.inputs()[i]] = {runtime::BufferSlot::kInput, int(i)};
  for (const auto& n : g.nodes())
    if (n->op == Op::Constant) exe->slots[n->outputs[0]] = {runtime::BufferSlot::kConstant, 0};
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Value* v = g.outputs()[i];
    if (exe->slots.count(v) || s.residence_of(v) != lower::Residence::kBuffer) continue;
    exe->slots[v] = {runtime::BufferSlot::kOutput, int(i)};
  }
  std::map<const Value*, int> produced_at, last_read;
  for (size_t k = 0; k < exe->steps.size(); ++k) {
    const runtime::Step& step = exe->steps[k];
    if (step.library) {
      for (const Value* v : step.node->outputs) produced_at[v] = int(k);
      continue;
    }
    const auto& lk = exe->kernels[size_t(step.kernel)];
    for (size_t p = 0; p < lk.param_values.size(); ++p) {
      if (lk.kernel.params[p].is_output) produced_at[lk.param_values[p]] = int(k);
      else last_read[lk.param_values[p]] = int(k);
    }
  }
  for (const auto& [v, step_index] : produced_at) {
    if (exe->slots.count(v)) continue;
    bool kernel_only = !exe->steps[size_t(step_index)].library;
    for (const Use& u : v->uses) {
      if (u.user->op == Op::Constant) continue;
      auto r = s.residence.find(u.user->outputs[0]);
      bool through_alias = r != s.residence.end() && r->second == lower::Residence::kAlias;
      int grp_id = s.group_of.count(u.user->outputs[0]) ? s.group_of.at(u.user->outputs[0]) : -1;
      bool by_library = grp_id >= 0 && s.groups[size_t(grp_id)].library;
      if (through_alias || by_library) kernel_only = false;
    }
    if (!kernel_only) {
      exe->slots[v] = {runtime::BufferSlot::kHeld, 0};
      continue;
    }
    exe->slots[v] = {runtime::BufferSlot::kArena, int(exe->arena_values.size())};
    exe->arena_values.push_back(v);
    int last = last_read.count(v) ? last_read.at(v) : step_index;
    exe->arena_lifetimes.push_back({step_index, last});
  }
  plan_in_place(*exe);
  return exe;
}

// The CPU's library choices that depend on the lowered program: oneDNN convs and matmuls and their
// folded elementwise tails.
void plan_library_steps(runtime::CompiledExecutable& exe) {
  const char* env = std::getenv("KILN_ONEDNN");
  if (!exe.options.onednn || (env && std::string(env) == "0")) return;
  exe.onednn_plans = runtime::plan_onednn_steps(exe);
  for (const auto& [step, plan] : exe.onednn_plans)
    if (plan.folded_step >= 0) exe.folded_steps.insert(size_t(plan.folded_step));
}

std::vector<std::shared_ptr<Executable>> finish(std::vector<std::shared_ptr<runtime::CompiledExecutable>>& exes,
                                                const std::shared_ptr<codegen::cpu::SharedObject>& so,
                                                const CompileStats& stats, const std::string& command,
                                                const std::string& source);

std::vector<std::shared_ptr<Executable>> compile_all(const std::vector<const Graph*>& graphs,
                                                     const CompileOptions& opt) {
  const Clock::time_point t0 = Clock::now();
  std::vector<std::shared_ptr<runtime::CompiledExecutable>> exes;
  std::vector<const lower::LoopKernel*> all;
  for (size_t i = 0; i < graphs.size(); ++i) {
    KILN_CHECK(graphs[i] != nullptr, "compile: graph ", i, " is null");
    exes.push_back(lower_graph(*graphs[i], opt, graphs.size() > 1 ? str("kiln_g", i, "_") : "kiln_", true));
    plan_library_steps(*exes.back());
    for (const auto& k : exes.back()->kernels) all.push_back(&k.kernel);
  }
  std::string source = codegen::cpu::translation_unit(all);
  const Clock::time_point t1 = Clock::now();

  CompileStats stats;
  stats.lower_ms = millis(t0, t1);
  std::shared_ptr<codegen::cpu::SharedObject> so;
  std::string command;
  if (!all.empty()) {
    // Generated kernels use this CPU's vector ISA (AVX2, AVX-512); the cache key tells machines apart.
    codegen::cpu::CompilerConfig cfg = codegen::cpu::default_compiler(opt.march_native, opt.extra_flags, /*host_isa=*/true);
    command = cfg.command_line("<source>.cc", "<key>.so") + "   # " + cfg.identity;
    runtime::CompileCache cache(compile_cache_dir(opt));
    stats.cache_key = runtime::CompileCache::key(source, cfg.identity, cfg.flags);
    auto build = [&](const std::string& src, const std::string& out) {
      codegen::cpu::compile_shared_object(cfg, src, out);
    };
    std::string path;
    const Clock::time_point c0 = Clock::now();
    if (opt.use_cache) {
      path = cache.get_or_build(stats.cache_key, source, build, &stats.cache_hit);
    } else {
      // Still written through the cache directory so a failed build leaves its source to read.
      path = cache.dir() + "/" + stats.cache_key + ".nocache.so";
      std::string src = cache.dir() + "/" + stats.cache_key + ".nocache.cc";
      FILE* f = std::fopen(src.c_str(), "w");
      KILN_CHECK(f != nullptr, "cannot write ", src);
      std::fputs(source.c_str(), f);
      std::fclose(f);
      build(src, path);
    }
    const Clock::time_point c1 = Clock::now();
    stats.compile_ms = stats.cache_hit ? 0 : millis(c0, c1);
    so = std::make_shared<codegen::cpu::SharedObject>(path);
    stats.shared_object = path;
    stats.load_ms = millis(c1, Clock::now());
  }
  return finish(exes, so, stats, command, source);
}

// Binds every executable's kernels to `so` and hands out the shared stats.
std::vector<std::shared_ptr<Executable>> finish(std::vector<std::shared_ptr<runtime::CompiledExecutable>>& exes,
                                                const std::shared_ptr<codegen::cpu::SharedObject>& so,
                                                const CompileStats& stats, const std::string& command,
                                                const std::string& source) {
  std::vector<std::shared_ptr<Executable>> out;
  for (auto& exe : exes) {
    exe->shared_object = so;
    exe->compiler_command = command;
    exe->source_ = source;
    int generated = exe->stats_.kernels_generated, library = exe->stats_.library_calls;
    exe->stats_ = stats;
    exe->stats_.kernels_generated = generated;
    exe->stats_.library_calls = library;
    exe->kernel_fns.clear();
    for (const auto& lk : exe->kernels) exe->kernel_fns.push_back(so->kernel(lk.kernel.name));
    out.push_back(exe);
  }
  return out;
}

}  // namespace

std::string compile_cache_dir(const CompileOptions& options) {
  return options.cache_dir.empty() ? runtime::default_cache_dir() : options.cache_dir;
}

namespace runtime {
std::shared_ptr<Executable> link_prebuilt(const Graph& g, const CompileOptions& options, const std::string& so_path,
                                          const std::function<void(const std::string&)>& check_source) {
  const Clock::time_point t0 = Clock::now();
  std::vector<std::shared_ptr<CompiledExecutable>> exes = {lower_graph(g, options, "kiln_", true)};
  plan_library_steps(*exes[0]);
  std::vector<const lower::LoopKernel*> all;
  for (const auto& k : exes[0]->kernels) all.push_back(&k.kernel);
  std::string source = codegen::cpu::translation_unit(all);
  check_source(source);
  CompileStats stats;
  const Clock::time_point t1 = Clock::now();
  stats.lower_ms = millis(t0, t1);
  std::shared_ptr<codegen::cpu::SharedObject> so;
  if (!all.empty()) {
    KILN_CHECK(!so_path.empty(), "prebuilt graph '", g.name(), "' needs generated kernels but no shared object was given");
    so = std::make_shared<codegen::cpu::SharedObject>(so_path);
    stats.shared_object = so_path;  // compile_ms stays 0: no compiler ran
  }
  stats.load_ms = millis(t1, Clock::now());
  return finish(exes, so, stats, "(prebuilt: " + so_path + ")", source).at(0);
}
}  // namespace runtime

namespace {

class CompiledTraceExecutor : public Executor {
 public:
  CompiledTraceExecutor(const Graph& g, const CompileOptions& options) : exe_(compile(g, options)) {}
  std::string name() const override { return "compiled"; }
  std::vector<HostTensor> run(const std::vector<HostTensor>& inputs) override { return exe_->run(inputs); }

 private:
  std::shared_ptr<Executable> exe_;
};

}  // namespace

ExecutorFactory compiled_executor(const CompileOptions& options) {
  return [options](const Graph& g) -> std::unique_ptr<Executor> {
    return std::make_unique<CompiledTraceExecutor>(g, options);
  };
}

std::shared_ptr<Executable> compile(const Graph& g, const CompileOptions& options) {
  return compile_all({&g}, options).at(0);
}

std::vector<std::shared_ptr<Executable>> compile_batch(const std::vector<const Graph*>& graphs,
                                                       const CompileOptions& options) {
  return compile_all(graphs, options);
}

// The target-independent front half of compile (decompose, schedule, Loop IR, buffer placement),
// for other targets (the CUDA backend) that print and load the kernels their own way.
namespace runtime {
std::shared_ptr<CompiledExecutable> lower_for_target(const Graph& g, const CompileOptions& options,
                                                     const std::string& kernel_prefix) {
  return lower_graph(g, options, kernel_prefix, false);
}
}  // namespace runtime

}  // namespace kiln
