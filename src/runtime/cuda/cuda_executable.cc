// compile_cuda and the GPU run loop (see cuda_executable.h): lower with the shared front half,
// print CUDA, NVRTC -> cubin through the compile cache, then per binding of the dims allocate every
// buffer once, plan each launch, and capture the launches into a CUDA graph after a first direct run.
#include "runtime/cuda/cuda_executable.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <cmath>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>

#include "codegen/cuda/prepare_graph.h"
#include "kernels/cpu/eager.h"
#include "kiln/error.h"
#include "kiln/interp.h"
#include "lower/strided_view.h"
#include "runtime/compile_cache.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/nvrtc_compiler.h"

namespace kiln {

namespace cuda {
namespace {

using Clock = std::chrono::steady_clock;
double millis(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Host mirror of the generated KilnArgs struct (same member order, sizes and alignment).
struct HostKilnArgs {
  void* bufs[codegen::cuda::kMaxKernelBuffers];
  int64_t syms[codegen::cuda::kMaxKernelSymbols];
  int* status;
};

std::vector<int64_t> eval_shape(const Shape& s, const std::map<std::string, int64_t>& b) {
  std::vector<int64_t> out;
  for (const SymInt& d : s) out.push_back(d.evaluate(b));
  return out;
}

int64_t product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= v[i];
  return p;
}

const std::vector<std::string> kNvrtcOptions = {"--std=c++17", "-diag-suppress=550,177"};

bool supported_matmul_dtype(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), "cannot read ", path);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

// A fused kernel that is exactly `matmul_out + bias[N]`, optionally followed by an activation
// (relu, or gelu's tanh form, the one cuBLASLt implements) or by `+ residual` (a buffer of the
// product's shape), for the matmul step before it: cuBLASLt applies it in the GEMM's epilogue
// (the residual as its C operand with beta = 1), so the product is written once instead of
// written, read and written again, and the kernel's launch disappears.
std::optional<EpilogueMatch> match_epilogue(const Node& matmul, const runtime::CompiledExecutable& low, size_t kernel_step) {
  const runtime::Step& step = low.steps[kernel_step];
  if (step.library) return std::nullopt;
  const lower::FusionGroup& grp = low.schedule.groups[kernel_step];
  if (grp.nodes.empty() || grp.nodes.size() > 2 || grp.outputs.size() != 1) return std::nullopt;
  const Node* add = grp.nodes[0];
  const Value* y = matmul.outputs[0];
  if (add->op != Op::Add || y->uses.size() != 1 || low.graph->is_output(y)) return std::nullopt;
  int yi = add->inputs[0] == y ? 0 : add->inputs[1] == y ? 1 : -1;
  if (yi < 0) return std::nullopt;
  const Value* bias = add->inputs[1 - yi];
  const Shape& ys = y->type.shape;
  // bias: [N], or [1, ..., 1, N] as traced models write it (same bytes).
  const Shape& bs = bias->type.shape;
  if (bias->type.dtype != y->type.dtype || bs.empty() || bs.size() > ys.size() || !(bs.back() == ys.back()))
    return std::nullopt;
  for (size_t i = 0; i + 1 < bs.size(); ++i)
    if (!(bs[i] == SymInt(1))) return std::nullopt;
  if (low.schedule.residence_of(bias) != lower::Residence::kBuffer) return std::nullopt;
  EpilogueMatch m;
  m.bias = bias;
  m.epilogue = MatmulEpilogue::Bias;
  m.out = add->outputs[0];
  if (grp.nodes.size() == 2) {
    const Node* next = grp.nodes[1];
    if (add->outputs[0]->uses.size() != 1 || std::find(next->inputs.begin(), next->inputs.end(), add->outputs[0]) ==
                                                 next->inputs.end())
      return std::nullopt;
    if (next->op == Op::Add && next->inputs.size() == 2) {
      const Value* residual = next->inputs[0] == add->outputs[0] ? next->inputs[1] : next->inputs[0];
      if (residual == add->outputs[0] || residual->type.dtype != y->type.dtype || !(residual->type.shape == ys) ||
          low.schedule.residence_of(residual) != lower::Residence::kBuffer)
        return std::nullopt;
      m.residual = residual;
    } else if (next->op == Op::Relu && next->inputs.size() == 1) {
      m.epilogue = MatmulEpilogue::ReluBias;
    } else if (next->op == Op::Gelu && next->inputs.size() == 1 && next->attrs.get_string("approximate") == "tanh") {
      m.epilogue = MatmulEpilogue::GeluBias;
    } else {
      return std::nullopt;
    }
    m.out = next->outputs[0];
  }
  if (grp.outputs[0] != m.out) return std::nullopt;
  return m;
}

bool cuda_matmul_batch_supported(std::vector<int64_t> as, std::vector<int64_t> bs) {
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  if (as.size() < 2 || bs.size() < 2) return false;
  int64_t batch_a = product(as, 0, as.size() - 2), batch_b = product(bs, 0, bs.size() - 2);
  return batch_a == 1 || batch_b == 1 || std::equal(as.begin(), as.end() - 2, bs.begin(), bs.end() - 2);
}

struct CudaExecutable::Binding {
  std::map<std::string, int64_t> dims;      // graph symbols
  std::map<std::string, int64_t> kernel_dims;  // s0, s1, ...
  std::vector<int64_t> syms;
  std::map<const Value*, DeviceTensor> buffers;
  std::vector<StepPlan> steps;
  DeviceTensor workspace;
  DeviceTensor status;
  std::unique_ptr<CapturedGraph> graph;
  int launches = 0;
  std::map<const Value*, DevicePtr> external;  // run_device: graph inputs read from the caller's tensors
  DeviceArenaPlan memory;  // where the intermediates lie in `arena`
  DeviceTensor arena;
};

// Every intermediate buffer (neither input, output nor constant) with the steps that write and
// last read it — through views, kernel parameters and library calls alike (the CPU's arena leaves
// out buffers a library call touches; on the GPU they are device buffers like any other) — laid
// out by the memory planner. Adjusted for how the GPU runs the steps: a matmul with a folded
// epilogue writes the epilogue kernel's output at its own step; a host step's outputs are
// uploaded once per binding and must outlive every run (they keep buffers of their own); and no
// kernel writes over its input (the CUDA kernels' pointers are __restrict__). Offsets are
// 256-byte aligned, as cuBLASLt prefers.
DeviceArenaPlan CudaExecutable::device_memory_plan(const std::map<std::string, int64_t>& dims) const {
  const lower::Schedule& sched = lowered->schedule;
  std::set<const Value*> own;
  for (size_t step : host_steps_)
    for (const Value* v : lowered->steps[step].node->outputs) own.insert(sched.buffer_of(v));
  std::map<const Value*, int> first, last;
  auto wrote = [&](const Value* v, int k) {
    const Value* root = sched.buffer_of(v);
    auto it = first.find(root);
    if (it == first.end() || k < it->second) first[root] = k;
  };
  auto read = [&](const Value* v, int k) {
    const Value* root = sched.buffer_of(v);
    last[root] = std::max(last.count(root) ? last[root] : k, k);
  };
  for (size_t k = 0; k < lowered->steps.size(); ++k) {
    const runtime::Step& step = lowered->steps[k];
    if (step.library) {
      for (const Value* v : step.node->inputs) read(sched.storage_of(v), int(k));
      for (const Value* v : step.node->outputs) wrote(v, int(k));
      continue;
    }
    const lower::LoweredKernel& lk = lowered->kernels[size_t(step.kernel)];
    for (size_t p = 0; p < lk.param_values.size(); ++p)
      lk.kernel.params[p].is_output ? wrote(lk.param_values[p], int(k)) : read(lk.param_values[p], int(k));
  }
  for (const auto& [matmul, match] : epilogues_) wrote(match.out, int(matmul));
  DeviceArenaPlan out;
  std::vector<lower::BufferRequest> requests;
  for (const auto& [v, slot] : lowered->slots) {
    if (slot.kind != runtime::BufferSlot::kHeld && slot.kind != runtime::BufferSlot::kArena) continue;
    if (own.count(v) || !first.count(v)) continue;
    lower::BufferRequest r;
    r.label = v->name.empty() ? str("%", v->id) : v->name;
    r.bytes = numel_of(eval_shape(v->type.shape, dims)) * dtype_size(v->type.dtype);
    r.first_step = first.at(v);
    r.last_step = std::max(r.first_step, last.count(v) ? last.at(v) : r.first_step);
    requests.push_back(r);
    out.values.push_back(v);
  }
  out.plan = lower::plan_memory(requests, 256);
  return out;
}

// One fused attention launch for these dims: a block per 64 query rows of each (batch, head).
void CudaExecutable::plan_attention(const Node& n, const std::map<std::string, int64_t>& dims, StepPlan& plan) const {
  namespace cg = codegen::cuda;
  const std::vector<int64_t> q = eval_shape(n.inputs[0]->type.shape, dims), k = eval_shape(n.inputs[1]->type.shape, dims);
  const size_t rank = q.size();
  const int64_t heads = product(q, 0, rank - 2), tq = q[rank - 2], tk = k[rank - 2], d = q.back();
  // Where q, k and v lie: their own row-major buffers, or the buffers unmaterialised views of them
  // read (the scheduler leaves a view in place only where lower::batched_rows accepts it).
  const lower::Schedule& sched = lowered->schedule;
  auto is_view = [&](const Value* v) { return sched.is_view(v); };
  std::array<lower::BatchedRows, 3> walks;
  for (size_t i = 0; i < 3; ++i) {
    const Value* v = n.inputs[i];
    const std::vector<int64_t> shape = eval_shape(v->type.shape, dims);
    lower::StridedView view = lower::row_major_view(v, shape);
    if (is_view(v)) {
      auto strided = lower::strided_view(v, is_view);
      KILN_CHECK(strided.has_value(), n.describe(), ": operand ", i, " is a view the fused attention kernel cannot walk");
      view = *strided;
    }
    auto rows = lower::batched_rows(shape, view, dtype_size(v->type.dtype));
    KILN_CHECK(rows.has_value(), n.describe(), ": operand ", i, " is not laid out as the fused attention kernel reads it");
    walks[i] = *rows;
    plan.attention_offsets[i] = view.offset * int64_t(dtype_size(v->type.dtype));
    plan.buffers.push_back(view.source);
  }
  plan.buffers.push_back(n.outputs[0]);
  const int64_t query_blocks = (tq + cg::kFusedAttentionQueryRows - 1) / cg::kFusedAttentionQueryRows;
  KILN_CHECK(heads <= std::numeric_limits<int32_t>::max() && query_blocks <= 65535 && tk <= std::numeric_limits<int32_t>::max(),
             n.describe(), ": too large for the fused attention kernel's grid (", heads, " heads of ", tq, " queries, ", tk,
             " keys)");
  cg::FusedAttentionArgs a;
  a.q_outer = walks[0].outer_stride, a.q_head = walks[0].head_stride, a.q_row = walks[0].row_stride;
  a.k_outer = walks[1].outer_stride, a.k_head = walks[1].head_stride, a.k_row = walks[1].row_stride;
  a.v_outer = walks[2].outer_stride, a.v_head = walks[2].head_stride, a.v_row = walks[2].row_stride;
  a.heads = int(std::max<int64_t>(1, walks[0].heads));
  // The output is contiguous: [..., H, Tq, D], or [B, Tq, H, D] with heads_last.
  const int64_t h = a.heads;
  if (n.attrs.get_int("heads_last") != 0) a.o_outer = tq * h * d, a.o_head = d, a.o_row = h * d;
  else a.o_outer = h * tq * d, a.o_head = tq * d, a.o_row = d;
  a.tq = int(tq);
  a.tk = int(tk);
  a.causal = n.attrs.get_int("causal") != 0;
  a.causal_offset = int(tk - tq);
  const double scale = n.attrs.get_float("scale") != 0 ? n.attrs.get_float("scale") : 1.0 / std::sqrt(double(d));
  a.scale_log2 = float(scale * 1.4426950408889634);  // log2(e)
  plan.attention = a;
  const auto [dtype, head_dim] = cg::fused_attention_kernel(n);
  plan.fn = attention_functions_.at(cg::fused_attention_kernel_name(dtype, head_dim));
  plan.shape.grid_x = unsigned(heads);
  plan.shape.grid_y = unsigned(query_blocks);
  plan.shape.block_x = unsigned(cg::kFusedAttentionThreads);
  plan.shape.shared_bytes = unsigned(cg::fused_attention_shared_bytes(d));
  int64_t pairs = 0;  // (query, key) pairs kept: the two products' multiply-adds
  for (int64_t i = 0; i < tq; ++i) pairs += a.causal ? std::clamp<int64_t>(i + a.causal_offset + 1, 0, tk) : tk;
  plan.attention_flops = 4.0 * double(heads) * double(pairs) * double(d);
}

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
        if (c > 1 && options.row_persistent_clusters) {
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
  Binding& ref = *b;
  bindings_[syms] = std::move(b);
  return ref;
}

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
      if (plan.attention) {
        codegen::cuda::FusedAttentionArgs args = *plan.attention;
        args.q = reinterpret_cast<const void*>(device_ptr(plan.buffers[0]) + DevicePtr(plan.attention_offsets[0]));
        args.k = reinterpret_cast<const void*>(device_ptr(plan.buffers[1]) + DevicePtr(plan.attention_offsets[1]));
        args.v = reinterpret_cast<const void*>(device_ptr(plan.buffers[2]) + DevicePtr(plan.attention_offsets[2]));
        args.out = reinterpret_cast<void*>(device_ptr(plan.buffers[3]));
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
    if (status.get_f64(0) != 0) throw Error("a CUDA kernel hit an integer division or modulo by zero");
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
      if (plan.attention) moved = {step.node->inputs[0], step.node->inputs[1], step.node->inputs[2], step.node->outputs[0]};
      for (size_t k = 0; k < moved.size(); ++k) {
        const Value* v = moved[k];
        int64_t bytes = v->type.numel().evaluate(b.dims) * dtype_size(v->type.dtype);
        (k == (plan.attention ? 3 : 2) ? rec.bytes_written : rec.bytes_read) += bytes;
      }
      if (plan.matmul && plan.buffers.size() > 3) rec.name += "+epilogue";
      if (plan.matmul) rec.flops = plan.matmul->flops();
      if (plan.attention) rec.flops = plan.attention_flops;
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
  if (sb) record(b, sb);
  else enqueue(b);
  ++b.launches;
  if (uses_status_) {  // integer division: as the CPU eager kernels, report a zero divisor now
    HostTensor status = b.status.download(*stream_);
    KILN_CHECK(status.get_f64(0) == 0, "graph '", g.name(), "': integer division or modulo by zero");
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

std::string CudaExecutable::explain() const {
  std::ostringstream os;
  os << "== CUDA graph '" << lowered->graph->name() << "': " << stats_.kernels_generated << " generated kernels, "
     << stats_.library_calls << " library calls (cuBLASLt, fused attention) ==\n";
  for (const auto& note : lowered->decomposition_notes) os << note << "\n";
  os << lowered->schedule.explain();
  os << "\n== Loop IR ==\n";
  for (const auto& k : lowered->kernels) os << lower::print_kernel(k.kernel) << "\n";
  os << "== device memory ==\n";
  bool is_static = true;
  for (const Value* in : lowered->graph->inputs()) is_static &= in->type.is_static();
  if (is_static) {
    const DeviceArenaPlan arena = device_memory_plan({});
    os << arena.values.size() << " intermediates in one " << arena.plan.arena_bytes << "-byte arena ("
       << arena.plan.naive_bytes << " bytes as one buffer each)\n\n";
  } else {
    os << "intermediates planned per binding of the symbolic dims\n\n";
  }
  os << "== NVRTC ==\ncache key " << stats_.cache_key << (stats_.cache_hit ? " (hit)" : " (miss)") << ", compile "
     << stats_.compile_ms << " ms\n\n== generated CUDA ==\n" << source_;
  return os.str();
}

}  // namespace cuda

std::string cuda_unavailable_reason() {
  const cuda::DriverStatus& st = cuda::driver_status();
  if (!st.has_device()) return st.message;
  if (!cuda::nvrtc_status().loaded) return cuda::nvrtc_status().message;
  return "";
}

std::shared_ptr<Executable> compile_cuda(const Graph& g, const CudaCompileOptions& options) {
  using namespace cuda;
  const Clock::time_point t0 = Clock::now();
  auto exe = std::make_shared<CudaExecutable>();
  exe->options = options;
  for (const auto& node : g.nodes())
    KILN_CHECK(!node->info().has(kSubgraph) && !node->info().has(kContainer), "compile_cuda: ", node->describe(),
               ": control flow (if/loop/scan) and sequence/optional ops run only on the CPU (kiln::compile runs ",
               "them as host steps); the CUDA backend does not support op '", op_name(node->op), "'");
  for (const auto& node : g.nodes())
    KILN_CHECK(!node->has_string_values(), "compile_cuda: ", node->describe(),
               ": string (str) tensors run only on the CPU (kiln::compile runs such nodes as host steps)");
  for (const Value* in : g.inputs())
    KILN_CHECK(!(in->type.is_tensor() && in->type.dtype == DType::Str), "compile_cuda: input '", in->name,
               "' has dtype str; string tensors run only on the CPU (kiln::compile)");
  CudaDevice& device = CudaDevice::get(options.device);
  device.make_current();
  // The fused attention kernel needs mma.sync on f16/bf16 and cp.async (sm_80).
  const bool fused_attention = options.fused_attention && device.info().compute_major >= 8;
  std::unique_ptr<Graph> prepared = g.clone();
  codegen::cuda::prepare_graph_for_cuda(*prepared, fused_attention);
  CompileOptions base = options.base;
  if (fused_attention) base.keep_whole.insert(Op::Attention), base.attention_reads_views = true;
  exe->lowered = runtime::lower_for_target(*prepared, base, "kiln_cu_");
  const runtime::CompiledExecutable& low = *exe->lowered;
  std::set<const Value*> host_values;
  std::set<std::pair<DType, int64_t>> attention_kernels;
  for (const runtime::Step& step : low.steps) {
    if (!step.library) continue;
    const Node& n = *step.node;
    // Host steps: shape_of, and non-matmul library ops whose operands are all constants or
    // host-step results (the shape arithmetic of symbolic dims).
    bool on_host = n.op == Op::ShapeOf;
    if (n.op == Op::Attention) {  // kept whole only where the fused kernel runs it
      attention_kernels.insert(codegen::cuda::fused_attention_kernel(n));
      continue;
    }
    if (!on_host && n.op != Op::MatMul) {
      on_host = true;
      for (const Value* v : n.inputs) {
        const Value* root = low.schedule.buffer_of(v);
        bool constant = root->producer && root->producer->op == Op::Constant;
        on_host &= constant || host_values.count(root) != 0;
      }
    }
    if (on_host) {
      exe->host_steps_.insert(size_t(&step - low.steps.data()));
      for (const Value* out : n.outputs) host_values.insert(out);
      continue;
    }
    KILN_CHECK(n.op == Op::MatMul, n.describe(), ": the CUDA backend has no kernel for op '", op_name(n.op),
               "' (library calls on CUDA: matmul; shape_of is computed on the host)");
    KILN_CHECK(supported_matmul_dtype(n.outputs[0]->type.dtype), n.describe(), ": CUDA matmul supports f32, f16 and bf16, not ",
               dtype_name(n.outputs[0]->type.dtype));
  }
  if (options.fuse_epilogues) {
    for (size_t i = 0; i + 1 < low.steps.size(); ++i) {
      if (!low.steps[i].library || low.steps[i].node->op != Op::MatMul) continue;
      const Value* y = low.steps[i].node->outputs[0];
      if (y->uses.size() != 1) continue;
      // The consumer group of the product must be the very next step.
      auto g = low.schedule.group_of.find(y->uses[0].user->outputs[0]);
      if (g == low.schedule.group_of.end() || size_t(g->second) != i + 1) continue;
      if (auto m = match_epilogue(*low.steps[i].node, low, i + 1)) {
        exe->epilogues_[i] = *m;
        exe->epilogue_into_[i] = i + 1;
        exe->skipped_steps_.insert(i + 1);
      }
    }
  }
  codegen::cuda::CudaEmitOptions emit;
  // The opt-in shared memory per block, less what the block reductions declare statically.
  emit.shared_budget_bytes = std::max<int64_t>(0, int64_t(device.info().max_shared_per_block_optin) - 1024);
  emit.register_rows = options.register_rows;
  emit.vector_points = options.vector_points;
  emit.registers.max_per_thread = std::max(1, options.row_max_per_thread);
  emit.registers.max_threads = std::clamp(options.row_max_threads, 32, 1024);
  emit.registers.register_words = std::max(1, options.row_register_words);
  emit.registers.max_cluster = device.info().compute_major >= 9 ? std::clamp(options.row_max_cluster, 1, 16) : 1;
  emit.registers.preferred_threads = std::clamp(options.row_preferred_threads, 32, 1024);
  emit.registers.prefetch = options.row_prefetch;
  emit.registers.fuse_reductions = options.row_fuse_reductions;
  emit.registers.fuse_norm_max_per_thread = options.row_fuse_norm_max_per_thread;
  emit.registers.occupancy_threads = std::clamp(options.row_occupancy_threads, 32, 2048);
  emit.registers.chunks = options.row_chunks;
  emit.registers.bulk_stages = options.row_bulk_stages;
  emit.registers.bulk_min_per_thread = std::max(1, options.row_bulk_min_per_thread);
  emit.registers.cluster_mail = options.row_cluster_mail && device.info().compute_major >= 9;
  emit.registers.weights_in_shared = options.row_weights_in_shared;
  if (device.info().compute_major >= 9) {  // cp.async.bulk and mbarrier transaction counts
    emit.registers.shared_per_multiprocessor = device.info().max_shared_per_multiprocessor;
    emit.registers.shared_per_block = emit.shared_budget_bytes;
  }
  for (const auto& lk : low.kernels) exe->kernel_sources.push_back(codegen::cuda::emit_cuda_kernel(lk.kernel, emit));
  exe->source_ = codegen::cuda::cuda_translation_unit(exe->kernel_sources);
  exe->source_ += codegen::cuda::fused_attention_source(attention_kernels);
  for (const auto& k : exe->kernel_sources) exe->uses_status_ |= k.source.find(", kiln_status)") != std::string::npos;
  exe->stats_.kernels_generated = low.stats_.kernels_generated;
  exe->stats_.library_calls = low.stats_.library_calls;
  const Clock::time_point t1 = Clock::now();
  exe->stats_.lower_ms = millis(t0, t1);

  if (!low.kernels.empty() || !attention_kernels.empty()) {
    const std::string arch = device.info().arch();
    const NvrtcStatus& nv = nvrtc_status();
    KILN_CHECK(nv.loaded, nv.message);
    const std::string identity = str("nvrtc ", nv.major, ".", nv.minor, " ", arch);
    runtime::CompileCache cache(compile_cache_dir(options.base));
    exe->stats_.cache_key = runtime::CompileCache::key(exe->source_, identity, kNvrtcOptions);
    auto build = [&](const std::string& src_path, const std::string& out_path) {
      (void)src_path;
      std::vector<char> cubin = nvrtc_compile(exe->source_, "kiln_graph.cu", arch, kNvrtcOptions);
      std::ofstream out(out_path, std::ios::binary);
      out.write(cubin.data(), std::streamsize(cubin.size()));
      KILN_CHECK(out.good(), "cannot write ", out_path);
    };
    const Clock::time_point c0 = Clock::now();
    std::string path = options.base.use_cache
                           ? cache.get_or_build(exe->stats_.cache_key, exe->source_, build, &exe->stats_.cache_hit)
                           : "";
    std::vector<char> cubin;
    if (path.empty()) cubin = nvrtc_compile(exe->source_, "kiln_graph.cu", arch, kNvrtcOptions);
    else cubin = read_file(path);
    const Clock::time_point c1 = Clock::now();
    exe->stats_.compile_ms = exe->stats_.cache_hit ? 0 : millis(c0, c1);
    exe->stats_.shared_object = path;
    exe->module = std::make_unique<CudaModule>(cubin);
    for (const auto& k : exe->kernel_sources) {
      exe->functions.push_back(exe->module->function(k.name));
      // Static and dynamic shared memory together may exceed the 48 KiB a kernel gets without
      // opting in even when the dynamic part alone does not (48 KiB of staged rows did).
      if (k.shared_bytes > 0) allow_dynamic_shared(exe->functions.back(), int(k.shared_bytes));
      if (k.cluster > 8) allow_non_portable_cluster(exe->functions.back());
    }
    for (const auto& [dtype, d] : attention_kernels) {
      const std::string name = codegen::cuda::fused_attention_kernel_name(dtype, d);
      CUfunction fn = exe->module->function(name);
      allow_dynamic_shared(fn, int(codegen::cuda::fused_attention_shared_bytes(d)));
      exe->attention_functions_[name] = fn;
    }
    exe->stats_.load_ms = millis(c1, Clock::now());
  }
  exe->stream_ = std::make_unique<Stream>();
  for (const auto& n : low.graph->nodes())
    if (n->op == Op::Constant)
      exe->constants[n->outputs[0]] = DeviceTensor::upload(n->attrs.get_tensor("value"), *exe->stream_);
  exe->stream_->synchronize();
  return exe;
}

}  // namespace kiln
