// Planning what the GPU runs, apart from any binding's buffers: which matmul epilogues cuBLASLt
// can take, which batch shapes it can run, where intermediates lie in the device arena, and the
// launch of a fused attention node.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "codegen/cuda/prepare_graph.h"
#include "kiln/error.h"
#include "lower/strided_view.h"
#include "runtime/cuda/cuda_executable_internal.h"

namespace kiln::cuda {

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
  if (y->type.dtype == DType::F64) return std::nullopt;  // f64 GEMMs run without epilogues
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

// GPT-2's MLP as exported: matmul, + bias, a reshape back to [B, T, F] (an alias), then gelu in the
// tanh form: that gelu's output when the gelu is alone in the kernel of step `step` and reads the
// biased product only, so a Bias epilogue can grow into GeluBias writing it (the same bytes).
const Value* gelu_after_reshape(const EpilogueMatch& m, const runtime::CompiledExecutable& low, size_t step) {
  if (m.epilogue != MatmulEpilogue::Bias || m.residual || step >= low.steps.size() || low.steps[step].library)
    return nullptr;
  const Value* biased = m.out;
  if (biased->uses.size() != 1 || low.graph->is_output(biased)) return nullptr;
  const Node* reshape = biased->uses[0].user;
  if (reshape->op != Op::Reshape || reshape->outputs[0]->uses.size() != 1 || low.graph->is_output(reshape->outputs[0]))
    return nullptr;
  const Node* gelu = reshape->outputs[0]->uses[0].user;
  if (gelu->op != Op::Gelu || gelu->attrs.get_string("approximate") != "tanh") return nullptr;
  const lower::FusionGroup& grp = low.schedule.groups[step];
  if (grp.nodes.size() != 1 || grp.nodes[0] != gelu || grp.outputs.size() != 1) return nullptr;
  return gelu->outputs[0];
}

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
  // A graph output that is a view of an intermediate (unsqueeze(eq(a, b))) is read after the last
  // step, when the outputs are copied out: its buffer lives to the end of the run.
  for (const Value* o : lowered->graph->outputs())
    if (const Value* root = sched.buffer_of(o); first.count(root)) last[root] = int(lowered->steps.size());
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
  cg::FusedAttentionArgs a;
  if (n.inputs.size() == 4) {  // the additive mask: any strided view, broadcast dims at stride 0
    const Value* m = n.inputs[3];
    const std::vector<int64_t> shape = eval_shape(m->type.shape, dims);
    lower::StridedView view = lower::row_major_view(m, shape);
    if (is_view(m)) {
      auto strided = lower::strided_view(m, is_view);
      KILN_CHECK(strided.has_value(), n.describe(), ": the mask is a view the fused attention kernel cannot walk");
      view = *strided;
    }
    // Strides along the scores' dims ([H, Tq, Tk] or [B, H, Tq, Tk]), the mask's aligned right.
    std::vector<int64_t> strides(rank, 0);
    for (size_t i = 0; i < shape.size(); ++i)
      strides[rank - shape.size() + i] = shape[i] == 1 ? 0 : view.strides[i];
    a.m_key = strides[rank - 1], a.m_row = strides[rank - 2], a.m_head = strides[rank - 3];
    a.m_outer = rank == 4 ? strides[0] : 0;
    plan.attention_offsets[3] = view.offset * int64_t(dtype_size(m->type.dtype));
    plan.buffers.push_back(view.source);  // after the output: buffers[4]
  }
  const int64_t query_blocks = (tq + cg::kFusedAttentionQueryRows - 1) / cg::kFusedAttentionQueryRows;
  KILN_CHECK(heads <= std::numeric_limits<int32_t>::max() && query_blocks <= 65535 && tk <= std::numeric_limits<int32_t>::max(),
             n.describe(), ": too large for the fused attention kernel's grid (", heads, " heads of ", tq, " queries, ", tk,
             " keys)");
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
  plan.fn = attention_functions_.at(cg::fused_attention_kernel_name(cg::fused_attention_kernel(n)));
  plan.shape.grid_x = unsigned(heads);
  plan.shape.grid_y = unsigned(query_blocks);
  plan.shape.block_x = unsigned(cg::kFusedAttentionThreads);
  plan.shape.shared_bytes = unsigned(cg::fused_attention_shared_bytes(d));
  int64_t pairs = 0;  // (query, key) pairs kept: the two products' multiply-adds
  for (int64_t i = 0; i < tq; ++i) pairs += a.causal ? std::clamp<int64_t>(i + a.causal_offset + 1, 0, tk) : tk;
  plan.attention_flops = 4.0 * double(heads) * double(pairs) * double(d);
}

}  // namespace kiln::cuda
