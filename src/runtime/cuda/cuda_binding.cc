// One binding of the symbolic dims (see cuda_executable.h): every buffer allocated once (inputs and
// outputs of their own, intermediates in one arena), host steps run on the CPU and uploaded, and
// each step's launch shape or library plan fixed, so repeated runs allocate nothing.
#include <algorithm>
#include <cstring>
#include <memory>

#include "kernels/cpu/eager.h"
#include "kiln/error.h"
#include "kiln/interp.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_executable_internal.h"

namespace kiln::cuda {

CudaExecutable::Binding& CudaExecutable::binding_for(const std::vector<HostTensor>& inputs) {
  const Graph& g = *lowered->graph;
  KILN_CHECK(inputs.size() == g.inputs().size(), "graph '", g.name(), "' takes ", g.inputs().size(),
             " inputs, got ", inputs.size());
  std::map<std::string, int64_t> dims = interp::bind_symbols(g, inputs);
  for (const ShapeGuard& guard : g.guards()) {
    int64_t lhs = guard.lhs.evaluate(dims), rhs = guard.rhs.evaluate(dims);
    KILN_CHECK(lhs == rhs, "guard ", guard.to_string(), " fails for these inputs: ", lhs, " != ", rhs);
  }
  return binding_for_dims(dims, /*external_inputs=*/false);
}

CudaExecutable::Binding& CudaExecutable::binding_for_dims(const std::map<std::string, int64_t>& dims,
                                                          bool external_inputs) {
  const Graph& g = *lowered->graph;
  std::vector<int64_t> syms;
  for (const auto& s : lowered->symbols) syms.push_back(dims.at(s));
  auto it = bindings_.find(syms);
  if (it != bindings_.end()) return *it->second;

  auto b = std::make_unique<Binding>();
  b->dims = dims;
  b->syms = syms;
  for (size_t i = 0; i < syms.size(); ++i) b->kernel_dims[str("s", i)] = syms[i];
  // Inputs and outputs get their own buffers (with external inputs, run_device, the caller's
  // device tensors are read in place); intermediates share one arena laid out by the memory
  // planner (device_memory_plan).
  b->memory = device_memory_plan(dims);
  if (b->memory.plan.arena_bytes > 0)
    b->arena = DeviceTensor::empty(DType::U8, {b->memory.plan.arena_bytes}, *stream_);
  std::map<const Value*, int64_t> arena_offset;
  for (size_t i = 0; i < b->memory.values.size(); ++i) arena_offset[b->memory.values[i]] = b->memory.plan.offsets[i];
  for (const auto& [v, slot] : lowered->slots) {
    if (slot.kind == runtime::BufferSlot::kConstant) continue;
    if (external_inputs && std::find(g.inputs().begin(), g.inputs().end(), v) != g.inputs().end()) continue;
    auto at = arena_offset.find(v);
    b->buffers[v] = at != arena_offset.end() ? b->arena.part(at->second, v->type.dtype, eval_shape(v->type.shape, dims))
                                             : DeviceTensor::empty(v->type.dtype, eval_shape(v->type.shape, dims), *stream_);
  }
  b->status = DeviceTensor::empty(DType::I32, {1}, *stream_);
  const int sms = CudaDevice::get(options.device).info().multiprocessors;

  std::map<const Value*, HostTensor> host_values;
  for (size_t step_index = 0; step_index < lowered->steps.size(); ++step_index) {
    const runtime::Step& step = lowered->steps[step_index];
    StepPlan plan;
    plan.library = step.library;
    plan.skipped = skipped_steps_.count(step_index) != 0;
    if (host_steps_.count(step_index)) {
      // Shape arithmetic (shape_of, and library ops over shapes and constants): its values are
      // known once the dims are, so it runs here on the CPU, once per binding, and is uploaded.
      const Node& n = *step.node;
      std::vector<HostTensor> produced;
      if (n.op == Op::ShapeOf) {
        std::vector<int64_t> shape = eval_shape(n.inputs[0]->type.shape, dims);
        HostTensor t = HostTensor::zeros(n.outputs[0]->type.dtype, {int64_t(shape.size())});
        for (size_t i = 0; i < shape.size(); ++i) t.set_f64(int64_t(i), double(shape[i]));
        produced.push_back(t);
      } else {
        std::vector<HostTensor> in;
        for (const Value* v : n.inputs) {
          const Value* root = lowered->schedule.buffer_of(v);
          HostTensor t = root->producer && root->producer->op == Op::Constant ? root->producer->attrs.get_tensor("value")
                                                                              : host_values.at(root);
          in.push_back(root == v ? t : t.reshaped(eval_shape(v->type.shape, dims)));
        }
        produced = eager::run_op(n.op, eager::bind_shape_attrs(n.attrs, dims), in);
      }
      for (size_t i = 0; i < produced.size(); ++i) {
        host_values[n.outputs[i]] = produced[i];
        b->buffers.at(n.outputs[i]).copy_from_host(produced[i], *stream_);
      }
      plan.skipped = true;
    }
    if (plan.skipped) {
      b->steps.push_back(std::move(plan));
      continue;
    }
    if (step.library && step.node->op == Op::Attention) {
      plan_attention(*step.node, dims, plan);
    } else if (step.library && step.node->op != Op::MatMul) {
      plan_library_kernel(*step.node, dims, sms, plan);
    } else if (step.library) {
      const Node& n = *step.node;
      std::vector<int64_t> as = eval_shape(n.inputs[0]->type.shape, dims);
      std::vector<int64_t> bs = eval_shape(n.inputs[1]->type.shape, dims);
      // numpy's 1-D promotion: [K] is a [1, K] row on the left, a [K, 1] column on the right; the
      // contiguous bytes are the same, so only the sizes change.
      if (as.size() == 1) as.insert(as.begin(), 1);
      if (bs.size() == 1) bs.push_back(1);
      int64_t m = as[as.size() - 2], k = as.back(), nn = bs.back();
      int64_t batch_a = product(as, 0, as.size() - 2), batch_b = product(bs, 0, bs.size() - 2);
      LtMatmul::Batch batch;
      bool same_batch = std::equal(as.begin(), as.end() - 2, bs.begin(), bs.end() - 2);
      if (batch_b == 1) {
        m *= batch_a;  // b is one matrix: a's batches stack into rows
      } else if (batch_a == 1) {
        batch = {batch_b, 0, k * nn, m * nn};
      } else if (same_batch) {
        batch = {batch_a, m * k, k * nn, m * nn};
      } else {
        throw Error(str(n.describe(), ": CUDA matmul does not support the batch broadcast ",
                        dims_to_string(as), " @ ", dims_to_string(bs)));
      }
      MatmulEpilogue epilogue = MatmulEpilogue::None;
      plan.buffers = {n.inputs[0], n.inputs[1], n.outputs[0]};
      auto fused = epilogue_into_.find(step_index);
      if (fused != epilogue_into_.end()) {
        const EpilogueMatch& em = epilogues_.at(step_index);
        epilogue = em.epilogue;
        plan.buffers = {n.inputs[0], n.inputs[1], em.out, em.bias};
        if (em.residual) plan.buffers.push_back(em.residual);
      }
      if (m > 0 && k > 0 && nn > 0)
        plan.matmul = std::make_unique<LtMatmul>(m, nn, k, n.outputs[0]->type.dtype, epilogue, batch,
                                                 fused != epilogue_into_.end() && epilogues_.at(step_index).residual);
    } else {
      const lower::LoweredKernel& lk = lowered->kernels[size_t(step.kernel)];
      const codegen::cuda::CudaKernelSource& ks = kernel_sources[size_t(step.kernel)];
      plan.kernel = step.kernel;
      plan.fn = functions[size_t(step.kernel)];
      plan.buffers = lk.param_values;
      int64_t points = 1;
      for (const auto& e : ks.outer_extents) points *= e.evaluate(b->kernel_dims);
      if (ks.mapping == codegen::cuda::GridMapping::kPointwise) {
        int64_t threads = options.block_threads;
        plan.shape.block_x = unsigned(threads);
        const int64_t work = (points + ks.points_per_thread - 1) / ks.points_per_thread;
        plan.shape.grid_x = unsigned(std::clamp<int64_t>((work + threads - 1) / threads, 1, int64_t(sms) * 16));
      } else {
        plan.shape.block_x = unsigned(ks.block_threads);  // the kernel's loops stride by exactly this
        plan.shape.shared_bytes = unsigned(ks.shared_bytes);  // its staged rows
        // Register-row kernels split over a cluster take `cluster` blocks per row. As many
        // clusters as run at once, each taking every G-th row with the next row's loads in flight
        // while it computes this one; a grid of several waves of clusters gave each only a few rows
        // to overlap and paid for every wave's start.
        const int64_t c = ks.cluster;
        int64_t rows_at_once = std::max<int64_t>(1, int64_t(sms) * 32 / c);
        if (c > 1 && row_forms.registers.persistent_clusters) {
          const int resident = max_active_clusters(plan.fn, ks.block_threads, int(c), unsigned(ks.shared_bytes));
          if (resident > 0) rows_at_once = resident;
        } else if (c == 1 && ks.bulk_stages > 0) {  // a block's ring pays off over many rows
          const int per_sm = max_active_blocks_per_multiprocessor(plan.fn, ks.block_threads, unsigned(ks.shared_bytes));
          if (per_sm > 0) rows_at_once = int64_t(sms) * per_sm;
        }
        plan.shape.grid_x = unsigned(c * std::clamp<int64_t>(points, 1, rows_at_once));
      }
    }
    b->steps.push_back(std::move(plan));
  }
  bool any_matmul = false;
  for (const StepPlan& plan : b->steps) any_matmul |= plan.matmul != nullptr;
  if (any_matmul) b->workspace = DeviceTensor::empty(DType::U8, {int64_t(LtMatmul::kWorkspaceBytes)}, *stream_);
  for (StepPlan& plan : b->steps)
    for (StepPlan::LibraryLaunch& l : plan.library_launches)
      if (l.spec.scratch_bytes > 0) {
        l.scratch = DeviceTensor::empty(DType::U8, {l.spec.scratch_bytes}, *stream_);
        if (!l.spec.table.empty()) {  // resize's taps: the same for every run of this binding
          HostTensor table = HostTensor::zeros(DType::F64, {int64_t(l.spec.table.size())});
          std::memcpy(table.raw(), l.spec.table.data(), l.spec.table.size() * sizeof(double));
          l.scratch.part(0, DType::F64, {int64_t(l.spec.table.size())}).copy_from_host(table, *stream_);
        }
      }
  Binding& ref = *b;
  bindings_[syms] = std::move(b);
  return ref;
}

void CudaExecutable::plan_library_kernel(const Node& n, const std::map<std::string, int64_t>& dims, int sms,
                                         StepPlan& plan) const {
  plan.buffers.assign(n.inputs.begin(), n.inputs.end());
  if (n.op == Op::Conv2d && options.use_cudnn && !codegen::cuda::is_channels_last(n) &&
      !(options.depthwise_kernel && codegen::cuda::is_depthwise_conv(n))) {
    const std::vector<int64_t>& pads = n.attrs.get_ints("pads");
    const DType dtype = n.outputs[0]->type.dtype;
    if (CudnnConv::refusal(dtype, pads[0], pads[1], pads[2], pads[3]).empty()) {
      std::vector<int64_t> x = eval_shape(n.inputs[0]->type.shape, dims), w = eval_shape(n.inputs[1]->type.shape, dims);
      std::vector<int64_t> y = eval_shape(n.outputs[0]->type.shape, dims);
      const auto& s = n.attrs.get_ints("strides");
      const auto& d = n.attrs.get_ints("dilations");
      CudnnConvShape shape{x[0], x[1], x[2], x[3], w[0], w[2], w[3], y[2], y[3], pads[0], pads[1], s[0], s[1], d[0], d[1],
                           n.attrs.get_int("groups"), n.inputs.size() > 2};
      if (product(y, 0, y.size()) > 0 && product(x, 0, x.size()) > 0) {
        plan.conv = std::make_unique<CudnnConv>(shape, dtype);
        plan.buffers.push_back(n.outputs[0]);
        if (plan.conv->workspace_bytes() > 0)
          plan.conv_workspace = DeviceTensor::empty(DType::U8, {int64_t(plan.conv->workspace_bytes())}, *stream_);
      }
    }
  }
  for (codegen::cuda::LibraryLaunch& spec : codegen::cuda::plan_library_kernel(n, dims, options.depthwise_kernel)) {
    StepPlan::LibraryLaunch l;
    l.fn = library_functions_.at(spec.kernel);
    const int64_t threads = 256;  // the kernels' __launch_bounds__
    l.shape.block_x = unsigned(threads);
    l.shape.grid_x = unsigned(std::clamp<int64_t>((spec.points + threads - 1) / threads, 0, int64_t(sms) * 32));
    l.spec = std::move(spec);
    plan.library_launches.push_back(std::move(l));
  }
}

}  // namespace kiln::cuda
