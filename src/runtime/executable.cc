// Running a compiled Executable (see executable.h): bind dims, check guards, place buffers, run
// the steps, and record one scoreboard entry per kernel or library call.
#include "runtime/executable.h"

#include <chrono>
#include <new>
#include <sstream>

#include "kernels/cpu/cost.h"
#include "kernels/cpu/eager.h"
#include "kiln/error.h"
#include "kiln/interp.h"

namespace kiln::runtime {

namespace {

using Clock = std::chrono::steady_clock;
double micros(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

std::vector<int64_t> eval_shape(const Shape& s, const std::map<std::string, int64_t>& b) {
  std::vector<int64_t> out;
  for (const SymInt& d : s) out.push_back(d.evaluate(b));
  return out;
}

int64_t value_bytes(const Value* v, const std::map<std::string, int64_t>& b) {
  return v->type.numel().evaluate(b) * dtype_size(v->type.dtype);
}

void check_guards(const Graph& g, const std::map<std::string, int64_t>& b) {
  for (const ShapeGuard& guard : g.guards()) {
    int64_t lhs = guard.lhs.evaluate(b), rhs = guard.rhs.evaluate(b);
    KILN_CHECK(lhs == rhs, "guard ", guard.to_string(), " fails for these inputs: ",
               guard.lhs.to_string(), " = ", lhs, " but ", guard.rhs.to_string(), " = ", rhs);
  }
}

}  // namespace

const lower::MemoryPlan& CompiledExecutable::plan_for(const std::vector<int64_t>& syms,
                                                      const std::map<std::string, int64_t>& b) {
  auto it = plans_.find(syms);
  if (it != plans_.end()) return it->second;
  std::vector<lower::BufferRequest> reqs;
  for (size_t i = 0; i < arena_values.size(); ++i) {
    const Value* v = arena_values[i];
    reqs.push_back({v->name.empty() ? str("%", v->id) : v->name, value_bytes(v, b),
                    arena_lifetimes[i].first, arena_lifetimes[i].second, arena_in_place_of[i]});
  }
  last_requests_ = reqs;
  return plans_.emplace(syms, lower::plan_memory(reqs)).first->second;
}

RunStats CompiledExecutable::last_run() const {
  std::lock_guard<std::mutex> lock(run_mutex_);
  return last_run_;
}

std::vector<HostTensor> CompiledExecutable::run(const std::vector<HostTensor>& inputs, Scoreboard* sb) {
  std::lock_guard<std::mutex> lock(run_mutex_);
  const Clock::time_point start = Clock::now();
  std::map<std::string, int64_t> bindings = interp::bind_symbols(*graph, inputs);
  check_guards(*graph, bindings);
  std::vector<int64_t> syms;
  std::map<std::string, int64_t> kernel_bindings;  // kernels name extents s0, s1...
  for (const auto& s : symbols) {
    kernel_bindings[str("s", syms.size())] = bindings.at(s);
    syms.push_back(bindings.at(s));
  }

  const lower::MemoryPlan& plan = plan_for(syms, bindings);
  if (plan.arena_bytes > arena_capacity_) {
    arena_.reset(static_cast<uint8_t*>(::operator new[](size_t(plan.arena_bytes), std::align_val_t(64))));
    arena_capacity_ = plan.arena_bytes;
  }

  const auto& outs = graph->outputs();
  std::vector<HostTensor> results(outs.size());
  std::map<const Value*, HostTensor>& held = held_;
  auto pointer_of = [&](const Value* v) -> void* {
    const BufferSlot& slot = slots.at(v);
    switch (slot.kind) {
      case BufferSlot::kInput: return const_cast<void*>(inputs[size_t(slot.index)].raw());
      case BufferSlot::kConstant:
        return const_cast<void*>(v->producer->attrs.get_tensor("value").raw());
      case BufferSlot::kOutput: {
        HostTensor& t = results[size_t(slot.index)];
        if (t.is_tensor() && (!t.defined() || t.raw() == nullptr))
          t = outputs_.take(v->type.dtype, eval_shape(v->type.shape, bindings));
        return t.raw();
      }
      case BufferSlot::kHeld: {
        // Kept from the last run when the shape is the same: no fresh pages to fault in.
        std::vector<int64_t> shape = eval_shape(v->type.shape, bindings);
        auto it = held.find(v);
        if (it == held.end() || !it->second.is_tensor() || it->second.shape() != shape)
          it = held.insert_or_assign(v, HostTensor::empty(v->type.dtype, shape)).first;
        return it->second.raw();
      }
      case BufferSlot::kArena: return arena_.get() + plan.offsets[size_t(slot.index)];
    }
    return nullptr;
  };
  // A tensor for a library operand: the buffer (re-shaped for an alias).
  auto tensor_of = [&](const Value* v) -> HostTensor {
    const Value* root = schedule.buffer_of(v);
    HostTensor t;
    const BufferSlot& slot = slots.at(root);
    if (slot.kind == BufferSlot::kInput) t = inputs[size_t(slot.index)];
    else if (slot.kind == BufferSlot::kConstant) t = root->producer->attrs.get_tensor("value");
    else if (slot.kind == BufferSlot::kOutput) { pointer_of(root); t = results[size_t(slot.index)]; }
    else if (slot.kind == BufferSlot::kHeld) { pointer_of(root); t = held.at(root); }
    else KILN_ASSERT(false && "library operand placed in the arena");
    return root == v ? t : t.reshaped(eval_shape(v->type.shape, bindings));
  };

  int nthreads = options.num_threads;
  if (nthreads > 0) eager::set_num_threads(nthreads);
  std::vector<void*> ptrs;
  // A generated kernel step: its parameters' buffers, one call, the bytes and FLOPs it moved.
  auto run_kernel = [&](size_t step_index, KernelRecord& rec) {
    const Step& step = steps[step_index];
    const lower::LoweredKernel& lk = kernels[size_t(step.kernel)];
    ptrs.clear();
    for (size_t p = 0; p < lk.param_values.size(); ++p) {
      ptrs.push_back(pointer_of(lk.param_values[p]));
      int64_t bytes = value_bytes(lk.param_values[p], bindings);
      (lk.kernel.params[p].is_output ? rec.bytes_written : rec.bytes_read) += bytes;
    }
    int status = 0;
    const Clock::time_point t0 = Clock::now();
    kernel_fns[size_t(step.kernel)](ptrs.data(), syms.data(), nthreads, &status);
    rec.time_us += micros(t0, Clock::now());
    rec.flops += double(lk.kernel.iterations.evaluate(kernel_bindings)) * lk.kernel.ops_per_point;
    if (status != 0) {
      std::string nodes;
      for (const Node* n : schedule.groups[step_index].nodes) nodes += " " + n->describe();
      throw Error(str("kernel ", step.name, ": integer division or modulo by zero in one of:", nodes));
    }
  };
  double kernel_total_us = 0;
  RunStats run_stats;
  // Whether every float input of this run is finite: read once, when a oneDNN step first asks.
  int inputs_finite = -1;
  auto graph_inputs_finite = [&] {
    if (inputs_finite < 0) {
      inputs_finite = 1;
      for (const HostTensor& t : inputs)
        if (t.is_tensor() && !eager::onednn::all_finite(t.raw(), t.numel(), t.dtype())) inputs_finite = 0;
    }
    return inputs_finite == 1;
  };
  // A library or host step: the eager kernel (or the interpreter) on its operand tensors.
  auto run_library = [&](size_t step_index, KernelRecord& rec) {
    const Step& step = steps[step_index];
    std::vector<HostTensor> in;
    for (const Value* v : step.node->inputs) in.push_back(tensor_of(v));
    const Clock::time_point t0 = Clock::now();
    std::vector<HostTensor> produced;
    try {
      // Control flow and containers are host steps: the node runs in the interpreter with its own
      // (possibly symbolic) types, so its sub-graphs see the types they were built for.
      eager::KernelUsed used = eager::KernelUsed::kReference;
      if (step.host) produced = interp::run_node(*step.node, in, bindings);
      else produced = eager::run_op(step.node->op, eager::bind_shape_attrs(step.node->attrs, bindings), in, nullptr, &used);
      ++run_stats.library_steps;
      if (used == eager::KernelUsed::kReference) run_stats.reference_fallbacks.push_back(std::string(op_name(step.node->op)));
    } catch (const Error& e) {
      throw Error(str(step.node->describe(), ": ", e.what()));
    }
    rec.time_us = micros(t0, Clock::now());
    for (size_t i = 0; i < produced.size(); ++i) {
      const Value* v = step.node->outputs[i];
      // Views returned by eager share the operand's storage; outputs must own theirs.
      for (const HostTensor& t : in)
        if (produced[i].is_tensor() && produced[i].raw() == t.raw() && produced[i].nbytes() > 0)
          produced[i] = produced[i].clone();
      const BufferSlot& slot = slots.at(v);
      if (slot.kind == BufferSlot::kOutput) results[size_t(slot.index)] = produced[i];
      else held[v] = produced[i];
      rec.bytes_written += int64_t(produced[i].nbytes());
    }
    for (const HostTensor& t : in) rec.bytes_read += int64_t(t.nbytes());
    if (sb && !step.host) rec.flops = eager::detail::estimate_flops(step.node->op, eager::bind_shape_attrs(step.node->attrs, bindings), in, produced);
  };
  for (size_t step_index = 0; step_index < steps.size(); ++step_index) {
    const Step& step = steps[step_index];
    KernelRecord rec;
    rec.name = step.name;
    rec.source_ops = step.source_ops;
    if (folded_steps.count(step_index)) continue;  // run by the oneDNN primitive before it as post-ops
    if (auto plan = onednn_plans.find(step_index); plan != onednn_plans.end()) {
      const OnednnStepPlan& op = plan->second;
      const Node& node = *step.node;
      auto raw = [&](const Value* v) { return const_cast<const void*>(tensor_of(v).raw()); };
      std::vector<const void*> broadcast;
      for (const Value* v : op.broadcast_operands) broadcast.push_back(pointer_of(schedule.storage_of(v)));
      const void* sum = op.sum_operand ? pointer_of(schedule.storage_of(op.sum_operand)) : nullptr;
      void* y = pointer_of(op.out);
      const void* x = raw(node.inputs[0]);
      const void* w = node.inputs.size() > 1 && !op.concat ? raw(node.inputs[1]) : nullptr;
      const void* bias = op.conv && node.inputs.size() > 2 && node.inputs[2] ? raw(node.inputs[2]) : nullptr;
      const Clock::time_point t0 = Clock::now();
      // Post-ops (kernels/cpu/onednn_post_ops.h), or a kernel that mishandles non-finite values by
      // itself (mishandles_nonfinite), on sources that are not all finite: the exact path.
      const bool constant_w = w && node.inputs[1]->producer && node.inputs[1]->producer->op == Op::Constant;
      bool exact = false;
      if (op.checks_sources() && op.sources_finite_with_inputs) exact = !graph_inputs_finite();
      else if (op.checks_sources())
        exact = op.conv ? !op.conv->sources_finite(x, constant_w ? nullptr : w, broadcast, sum)
                        : !op.matmul->sources_finite(x, constant_w ? nullptr : w, broadcast, sum);
      if (exact) {
        if (op.conv) op.conv->materialize_plain_sources(x, sum);
        KernelRecord eager_step, tail;
        run_library(step_index, eager_step);
        --run_stats.library_steps;  // one step, counted below
        if (op.folded_step >= 0) run_kernel(size_t(op.folded_step), tail);
        // The eager result is held apart from the arena when no kernel step wrote it there.
        if (op.conv) op.conv->adopt_plain_output(op.folded_step >= 0 ? y : raw(node.outputs[0]));
        ++exact_fallbacks;
      } else if (op.conv) {
        op.conv->run(x, w, bias, broadcast, sum, y);
      } else if (op.pool) {
        op.pool->run(x, y);
      } else if (op.concat) {
        std::vector<const void*> xs;
        for (const Value* v : node.inputs) xs.push_back(raw(v));
        op.concat->run(xs, y);
      } else {
        op.matmul->run(x, w, broadcast, sum, y);
      }
      rec.time_us = micros(t0, Clock::now());
      if (op.folded_step >= 0) {
        rec.name += "+" + steps[size_t(op.folded_step)].name;
        for (const std::string& src : steps[size_t(op.folded_step)].source_ops) rec.source_ops.push_back(src);
      }
      ++run_stats.library_steps;
      for (const Value* v : node.inputs)
        if (v) rec.bytes_read += value_bytes(v, bindings);
      for (const Value* v : op.broadcast_operands) rec.bytes_read += value_bytes(v, bindings);
      if (op.sum_operand) rec.bytes_read += value_bytes(op.sum_operand, bindings);
      rec.bytes_written = value_bytes(op.out, bindings);
      // conv: 2 * outputs * (C/groups * kH * kW); matmul: 2 * outputs * K; pool: outputs * kH * kW; concat: none.
      if (op.concat) {
        rec.flops = 0;
      } else if (op.pool) {
        const auto& kernel = node.attrs.get_ints("kernel");
        rec.flops = double(op.out->type.numel().evaluate(bindings)) * double(kernel[0] * kernel[1]);
      } else {
        const Shape& ws = node.inputs[1]->type.shape;
        const SymInt reduced = op.conv ? ws[1] * ws[2] * ws[3] : node.inputs[0]->type.shape.back();
        rec.flops = 2.0 * double(op.out->type.numel().evaluate(bindings)) * double(reduced.evaluate(bindings));
      }
      kernel_total_us += rec.time_us;
      if (sb) sb->add(std::move(rec));
      continue;
    }
    if (step.library) {
      run_library(step_index, rec);
    } else {
      run_kernel(step_index, rec);
    }
    kernel_total_us += rec.time_us;
    if (sb) sb->add(std::move(rec));
  }
  last_run_ = std::move(run_stats);
  // Outputs that are not written by a step: graph inputs, constants, aliases, repeated values.
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!results[i].is_tensor() || (results[i].defined() && results[i].raw() != nullptr)) continue;
    const Value* v = outs[i];
    auto it = slots.find(v);
    if (it != slots.end() && it->second.kind == BufferSlot::kOutput && size_t(it->second.index) != i) {
      const BufferSlot& slot = it->second;
      pointer_of(v);
      results[i] = results[size_t(slot.index)].clone();
    } else {
      results[i] = tensor_of(v).clone();
    }
  }
  if (sb) sb->add_dispatch_us(micros(start, Clock::now()) - kernel_total_us);
  return results;
}

std::string CompiledExecutable::step_note(size_t i) const {
  const Step& s = steps.at(i);
  if (auto plan = onednn_plans.find(i); plan != onednn_plans.end()) return plan->second.note;
  if (folded_steps.count(i))
    return str("folded into the ", steps[i - 1].node->op == Op::Conv2d ? "conv" : "matmul", " before it");
  if (s.library && !s.host && s.node->op == Op::Conv2d) return "eager im2col + OpenBLAS";
  if (s.library && !s.host && s.node->op == Op::MatMul) return "eager OpenBLAS";
  return "";
}

std::string CompiledExecutable::explain() const {
  std::ostringstream os;
  os << "== compiled graph '" << graph->name() << "': " << stats_.kernels_generated
     << " generated kernels, " << stats_.library_calls << " library calls ==\n";
  if (!symbols.empty()) {
    os << "symbolic dims passed to kernels at run time:";
    for (size_t i = 0; i < symbols.size(); ++i) os << " s" << i << "=" << symbols[i];
    os << "\n";
  }
  for (const auto& note : decomposition_notes) os << note << "\n";
  os << schedule.explain();
  os << "steps:\n";
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    os << "  " << s.name << (s.library ? "  [library call]" : "");
    const std::string note = step_note(i);
    if (folded_steps.count(i)) os << "  [" << note << "]";
    else if (!note.empty()) os << "  " << note;
    os << "\n";
  }
  os << "\n== Loop IR ==\n";
  for (const auto& k : kernels) os << lower::print_kernel(k.kernel) << "\n";
  // The memory plan for static graphs (symbolic graphs plan per binding at run time).
  bool is_static = true;
  for (const Value* in : graph->inputs()) is_static &= in->type.is_static();
  os << "== memory ==\n";
  if (is_static) {
    std::vector<lower::BufferRequest> reqs;
    for (size_t i = 0; i < arena_values.size(); ++i) {
      const Value* v = arena_values[i];
      reqs.push_back({v->name.empty() ? str("%", v->id) : v->name,
                      v->type.numel().constant() * dtype_size(v->type.dtype), arena_lifetimes[i].first,
                      arena_lifetimes[i].second, arena_in_place_of[i]});
    }
    os << lower::plan_memory(reqs).to_string(reqs);
  } else {
    os << "planned per binding of the symbolic dims on first run with those dims\n";
  }
  os << "\n== compiler ==\n" << compiler_command << "\ncache key " << stats_.cache_key
     << (stats_.cache_hit ? " (hit)" : " (miss)") << ", shared object " << stats_.shared_object << "\n";
  os << "\n== generated source ==\n" << source_;
  return os.str();
}

}  // namespace kiln::runtime
