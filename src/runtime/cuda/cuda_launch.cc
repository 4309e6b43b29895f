// Running a binding (see cuda_executable.h): queue its steps on the stream, direct on the first run
// and as a captured CUDA graph after; copy inputs in and outputs out; time each step for a
// scoreboard; and run on device tensors in place for eager ops.
#include <algorithm>
#include <memory>
#include <optional>

#include "kiln/error.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_executable_internal.h"

namespace kiln::cuda {
namespace {

// Host mirror of the generated KilnArgs struct (same member order, sizes and alignment).
struct HostKilnArgs {
  void* bufs[codegen::cuda::kMaxKernelBuffers];
  int64_t syms[codegen::cuda::kMaxKernelSymbols];
  int* status;
};

// Host mirror of the library kernels' KilnLibArgs (library_kernel_source.cc).
struct HostLibArgs {
  const void* in[codegen::cuda::kLibMaxInputs];
  void* out[2];
  int64_t p[codegen::cuda::kLibMaxParams];
  double f[2];
  int* status;
  void* scratch;
};

}  // namespace

void CudaExecutable::enqueue(Binding& b) {
  const DriverApi& api = driver();
  const lower::Schedule& s = lowered->schedule;
  auto device_ptr = [&](const Value* v) -> DevicePtr {
    const Value* root = s.buffer_of(v);
    auto c = constants.find(root);
    if (c != constants.end()) return c->second.data();
    auto e = b.external.find(root);
    if (e != b.external.end()) return e->second;
    return b.buffers.at(root).data();
  };
  // The status word only matters when a kernel can set it (integer division or modulo by zero);
  // clearing it is a driver call per run that eager ops would otherwise pay for nothing.
  if (uses_status_) KILN_CU(api.cuMemsetD8Async(b.status.data(), 0, 4, stream_->handle()));
  for (StepPlan& plan : b.steps) {
    if (plan.skipped) continue;
    if (plan.library) {
      if (plan.matmul)
        plan.matmul->run(device_ptr(plan.buffers[0]), device_ptr(plan.buffers[1]),
                         plan.buffers.size() > 3 ? device_ptr(plan.buffers[3]) : 0, device_ptr(plan.buffers[2]),
                         b.workspace.data(), *stream_, plan.buffers.size() > 4 ? device_ptr(plan.buffers[4]) : 0);
      if (plan.conv)  // buffers: x, w, bias?, y
        plan.conv->run(device_ptr(plan.buffers[0]), device_ptr(plan.buffers[1]),
                       plan.buffers.size() > 3 ? device_ptr(plan.buffers[2]) : 0, device_ptr(plan.buffers.back()),
                       plan.conv_workspace.data(), *stream_);
      for (StepPlan::LibraryLaunch& l : plan.library_launches) {
        if (plan.conv) break;  // the direct conv kernel, planned beside cuDNN's (choose_conv_forms)
        if (l.shape.grid_x == 0) continue;  // nothing to compute (an empty output)
        HostLibArgs args{};
        for (size_t i = 0; i < l.spec.inputs.size(); ++i) args.in[i] = reinterpret_cast<const void*>(device_ptr(l.spec.inputs[i]));
        for (size_t i = 0; i < l.spec.outputs.size(); ++i) args.out[i] = reinterpret_cast<void*>(device_ptr(l.spec.outputs[i]));
        for (size_t i = 0; i < l.spec.params.size(); ++i) args.p[i] = l.spec.params[i];
        args.f[0] = l.spec.value;
        args.status = reinterpret_cast<int*>(b.status.data());
        args.scratch = l.spec.scratch_bytes > 0 ? reinterpret_cast<void*>(l.scratch.data()) : nullptr;
        void* params[] = {&args};
        try {
          launch_kernel(l.fn, l.shape, *stream_, params);
        } catch (const Error& e) {
          throw Error(str(e.what(), " (library kernel ", l.spec.kernel, ": ", l.shape.grid_x, " blocks of ", l.shape.block_x, " threads)"));
        }
      }
      if (plan.attention) {
        codegen::cuda::FusedAttentionArgs args = *plan.attention;
        args.q = reinterpret_cast<const void*>(device_ptr(plan.buffers[0]) + DevicePtr(plan.attention_offsets[0]));
        args.k = reinterpret_cast<const void*>(device_ptr(plan.buffers[1]) + DevicePtr(plan.attention_offsets[1]));
        args.v = reinterpret_cast<const void*>(device_ptr(plan.buffers[2]) + DevicePtr(plan.attention_offsets[2]));
        args.out = reinterpret_cast<void*>(device_ptr(plan.buffers[3]));
        if (plan.buffers.size() > 4)
          args.mask = reinterpret_cast<const void*>(device_ptr(plan.buffers[4]) + DevicePtr(plan.attention_offsets[3]));
        if (args.tk == 0) {  // no keys: the product with an empty v is zeros
          const Value* out = plan.buffers[3];
          KILN_CU(api.cuMemsetD8Async(device_ptr(out), 0, size_t(out->type.numel().evaluate(b.dims)) * dtype_size(out->type.dtype),
                                      stream_->handle()));
        } else if (plan.shape.grid_x > 0 && plan.shape.grid_y > 0) {
          void* params[] = {&args};
          launch_kernel(plan.fn, plan.shape, *stream_, params);
        }
      }
      continue;
    }
    HostKilnArgs args{};
    for (size_t i = 0; i < plan.buffers.size(); ++i) args.bufs[i] = reinterpret_cast<void*>(device_ptr(plan.buffers[i]));
    for (size_t i = 0; i < b.syms.size(); ++i) args.syms[i] = b.syms[i];
    args.status = reinterpret_cast<int*>(b.status.data());
    void* params[] = {&args};
    try {
      launch_kernel(plan.fn, plan.shape, *stream_, params);
    } catch (const Error& e) {  // name the kernel and the shape it was launched with
      const codegen::cuda::CudaKernelSource& ks = kernel_sources.at(size_t(plan.kernel));
      throw Error(str(e.what(), " (kernel ", ks.name, ": ", plan.shape.grid_x, " blocks of ", plan.shape.block_x,
                      " threads, ", plan.shape.shared_bytes, " bytes of dynamic shared memory, cluster ", ks.cluster, ")"));
    }
  }
}

void CudaExecutable::bind(const std::vector<HostTensor>& inputs) {
  CudaDevice::get(options.device).make_current();
  Binding& b = binding_for(inputs);
  const Graph& g = *lowered->graph;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value* v = g.inputs()[i];
    KILN_CHECK(inputs[i].dtype() == v->type.dtype, "input ", i, " ('", v->name, "') is ",
               dtype_name(inputs[i].dtype()), ", the graph wants ", dtype_name(v->type.dtype));
    auto it = b.buffers.find(v);
    if (it != b.buffers.end()) it->second.copy_from_host(inputs[i], *stream_);
  }
  current_ = &b;
}

void CudaExecutable::launch() {
  KILN_CHECK(current_ != nullptr, "CudaExecutable::launch before bind");
  Binding& b = *current_;
  choose_conv_forms(b);
  if (!options.use_graphs || b.launches == 0) {
    enqueue(b);  // the first run goes direct: lazy library set-up must not happen under capture
  } else {
    if (!b.graph) {
      CapturedGraph::begin_capture(*stream_);
      try {
        enqueue(b);
      } catch (...) {
        try {
          CapturedGraph::end_capture(*stream_);
        } catch (...) {
        }
        throw;
      }
      b.graph = std::make_unique<CapturedGraph>(CapturedGraph::end_capture(*stream_));
    }
    b.graph->launch(*stream_);
  }
  ++b.launches;
}

std::vector<HostTensor> CudaExecutable::outputs() {
  KILN_CHECK(current_ != nullptr, "CudaExecutable::outputs before bind");
  Binding& b = *current_;
  stream_->synchronize();
  if (uses_status_) {
    HostTensor status = b.status.download(*stream_);
    const int code = int(status.get_f64(0));
    if (code & codegen::cuda::kStatusIndexOutOfRange)
      throw Error("a CUDA gather read an index out of range (indices must lie in [-n, n) for an axis of n)");
    if (code != 0) throw Error("a CUDA kernel hit an integer division or modulo by zero");
  }
  const Graph& g = *lowered->graph;
  const lower::Schedule& s = lowered->schedule;
  std::vector<HostTensor> out;
  for (const Value* v : g.outputs()) {
    const Value* root = s.buffer_of(v);
    HostTensor t;
    auto c = constants.find(root);
    if (c != constants.end()) t = c->second.download(*stream_);
    else t = b.buffers.at(root).download(*stream_);
    out.push_back(root == v ? t : t.reshaped(eval_shape(v->type.shape, b.dims)));
  }
  return out;
}

void CudaExecutable::record(Binding& b, Scoreboard* sb) {
  choose_conv_forms(b);
  // Timed direct launches, one event pair per step (graph replay has no per-kernel times).
  std::vector<std::unique_ptr<Event>> marks;
  for (size_t i = 0; i <= b.steps.size(); ++i) marks.push_back(std::make_unique<Event>(true));
  marks[0]->record(*stream_);
  // Enqueue step by step so each gets its own events.
  std::vector<StepPlan> all;
  all.swap(b.steps);
  for (size_t i = 0; i < all.size(); ++i) {
    b.steps.clear();
    b.steps.push_back(std::move(all[i]));
    enqueue(b);
    all[i] = std::move(b.steps[0]);
    marks[i + 1]->record(*stream_);
  }
  b.steps.swap(all);
  marks.back()->synchronize();
  for (size_t i = 0; i < b.steps.size(); ++i) {
    if (b.steps[i].skipped) continue;
    const runtime::Step& step = lowered->steps[i];
    KernelRecord rec;
    rec.name = step.name;
    rec.source_ops = step.source_ops;
    rec.time_us = 1000.0 * marks[i + 1]->elapsed_ms_since(*marks[i]);
    const StepPlan& plan = b.steps[i];
    if (plan.library) {
      // Attention's buffers may be those its operands are views of: count the operands.
      std::vector<const Value*> moved = plan.buffers;
      size_t first_written = 2;  // matmul: a, b, then the product
      if (plan.attention) {  // q, k, v, the mask, then the output
        moved.assign(step.node->inputs.begin(), step.node->inputs.end());
        first_written = moved.size();
        moved.push_back(step.node->outputs[0]);
      }
      const bool node_io = !plan.library_launches.empty() || plan.conv;
      if (node_io) {  // every operand read once, every result written once
        moved.assign(step.node->inputs.begin(), step.node->inputs.end());
        first_written = moved.size();
        moved.insert(moved.end(), step.node->outputs.begin(), step.node->outputs.end());
      }
      for (size_t k = 0; k < moved.size(); ++k) {
        const Value* v = moved[k];
        int64_t bytes = v->type.numel().evaluate(b.dims) * dtype_size(v->type.dtype);
        bool written = node_io ? k >= first_written : k == first_written;
        (written ? rec.bytes_written : rec.bytes_read) += bytes;
      }
      if (plan.matmul && plan.buffers.size() > 3) rec.name += "+epilogue";
      if (plan.matmul) rec.flops = plan.matmul->flops();
      if (plan.attention) rec.flops = plan.attention_flops;
      if (plan.conv) rec.name += str(" [cudnn ", plan.conv->algorithm(), "]"), rec.flops = plan.conv->flops();
    } else {
      const lower::LoweredKernel& lk = lowered->kernels[size_t(plan.kernel)];
      for (size_t p = 0; p < lk.param_values.size(); ++p) {
        const Value* v = lk.param_values[p];
        int64_t bytes = v->type.numel().evaluate(b.dims) * dtype_size(v->type.dtype);
        (lk.kernel.params[p].is_output ? rec.bytes_written : rec.bytes_read) += bytes;
      }
      rec.flops = double(lk.kernel.iterations.evaluate(b.kernel_dims)) * lk.kernel.ops_per_point;
    }
    sb->add(std::move(rec));
  }
}

std::vector<HostTensor> CudaExecutable::run(const std::vector<HostTensor>& inputs, Scoreboard* sb) {
  std::lock_guard<std::mutex> lock(run_mutex_);
  bind(inputs);
  if (sb) {
    record(*current_, sb);
    ++current_->launches;
  } else {
    launch();
  }
  return outputs();
}

namespace {
// Whether `shape` is static and equal to `dims` (per eager op: no vector built to compare).
bool has_static_shape(const Shape& shape, const std::vector<int64_t>& dims) {
  if (shape.size() != dims.size()) return false;
  for (size_t i = 0; i < dims.size(); ++i) {
    const std::optional<int64_t> d = shape[i].maybe_constant();
    if (!d || *d != dims[i]) return false;
  }
  return true;
}
}  // namespace

std::vector<DeviceTensor> CudaExecutable::run_device(const std::vector<DeviceTensor>& inputs, Scoreboard* sb) {
  std::lock_guard<std::mutex> lock(run_mutex_);
  const Graph& g = *lowered->graph;
  KILN_CHECK(inputs.size() == g.inputs().size(), "graph '", g.name(), "' takes ", g.inputs().size(), " inputs, got ",
             inputs.size());
  KILN_CHECK(lowered->symbols.empty(), "graph '", g.name(), "': run_device needs static shapes");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value* v = g.inputs()[i];
    KILN_CHECK(inputs[i].dtype() == v->type.dtype && has_static_shape(v->type.shape, inputs[i].shape()), "input ", i,
               " ('", v->name, "') is ", dtype_name(inputs[i].dtype()), dims_to_string(inputs[i].shape()),
               ", the graph wants ", v->type.to_string());
  }
  Binding& b = binding_for_dims({}, /*external_inputs=*/true);
  const lower::Schedule& s = lowered->schedule;
  for (size_t i = 0; i < inputs.size(); ++i) b.external[s.buffer_of(g.inputs()[i])] = inputs[i].data();
  // Fresh output buffers every run: the tensors handed out below must not be overwritten later.
  for (const Value* v : g.outputs()) {
    const Value* root = s.buffer_of(v);
    if (b.buffers.count(root)) b.buffers[root] = DeviceTensor::empty(root->type.dtype, root->type.static_shape(), *stream_);
  }
  choose_conv_forms(b);
  if (sb) record(b, sb);
  else enqueue(b);
  ++b.launches;
  if (uses_status_) {  // integer division: as the CPU eager kernels, report a zero divisor now
    HostTensor status = b.status.download(*stream_);
    const int code = int(status.get_f64(0));
    KILN_CHECK(!(code & codegen::cuda::kStatusIndexOutOfRange), "graph '", g.name(), "': a gather index out of range");
    KILN_CHECK(code == 0, "graph '", g.name(), "': integer division or modulo by zero");
  }
  std::vector<DeviceTensor> out;
  for (const Value* v : g.outputs()) {
    const Value* root = s.buffer_of(v);
    DeviceTensor t;
    if (auto c = constants.find(root); c != constants.end()) t = c->second;
    else if (auto e = std::find(g.inputs().begin(), g.inputs().end(), root); e != g.inputs().end())
      t = inputs[size_t(e - g.inputs().begin())];
    else t = b.buffers.at(root);
    out.push_back(root == v ? t : t.reshaped(v->type.static_shape()));
  }
  b.external.clear();
  return out;
}

}  // namespace kiln::cuda
