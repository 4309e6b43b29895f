// compile_cuda's placement of library steps (see step_placement.h).
#include "codegen/cuda/step_placement.h"

#include "codegen/cuda/library_kernels.h"
#include "codegen/cuda/prepare_graph.h"
#include "kiln/error.h"

namespace kiln::codegen::cuda {

namespace {
bool supported_matmul_dtype(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16; }

int64_t batch_of(const std::vector<int64_t>& s) {
  int64_t p = 1;
  for (size_t i = 0; i + 2 < s.size(); ++i) p *= s[i];
  return p;
}
}  // namespace

bool matmul_batch_supported(std::vector<int64_t> as, std::vector<int64_t> bs) {
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  if (as.size() < 2 || bs.size() < 2) return false;
  return batch_of(as) == 1 || batch_of(bs) == 1 || std::equal(as.begin(), as.end() - 2, bs.begin(), bs.end() - 2);
}

void check_cuda_graph(const Graph& g) {
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
  // Sequences and optionals (a graph that only passes one through) and the 8- and 4-bit storage
  // types are CPU-only: refused here, before lowering, so targets and tools report them as such.
  auto check_value = [](const Value* v, const std::string& what) {
    KILN_CHECK(v->type.is_tensor(), "compile_cuda: ", what, " is a ", v->type.to_string(),
               "; sequences and optionals run only on the CPU (kiln::compile)");
    KILN_CHECK(!is_narrow(v->type.dtype), "compile_cuda: ", what, " has dtype ", dtype_name(v->type.dtype),
               "; the 8- and 4-bit types are supported on the CPU only");
  };
  for (const Value* in : g.inputs()) check_value(in, str("input '", in->name, "'"));
  for (const Value* out : g.outputs()) check_value(out, str("output '", out->name, "'"));
  for (const auto& node : g.nodes())
    for (const Value* v : node->outputs) check_value(v, node->describe());
}

StepPlacement place_library_steps(const lower::Program& low) {
  StepPlacement out;
  std::set<const Value*> host_values;
  for (const lower::ProgramStep& step : low.steps) {
    if (!step.library) continue;
    const Node& n = *step.node;
    // Host steps: shape_of, and non-matmul library ops whose operands are all constants or
    // host-step results (the shape arithmetic of symbolic dims).
    bool on_host = n.op == Op::ShapeOf;
    if (n.op == Op::Attention) {  // kept whole only where the fused kernel runs it
      out.attention_kernels.insert(fused_attention_kernel(n));
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
      out.host_steps.insert(size_t(&step - low.steps.data()));
      for (const Value* result : n.outputs) host_values.insert(result);
      continue;
    }
    if (n.op != Op::MatMul) {
      const std::string why = library_kernel_refusal(n);
      KILN_CHECK(why.empty(), why, " (library calls on CUDA: matmul, attention and the kernels of ",
                 "src/codegen/cuda/library_kernels.h; `kiln ops --target cuda` lists every op's support)");
      for (const std::string& name : library_kernel_names(n)) out.library_kernels.insert(name);
      continue;
    }
    KILN_CHECK(supported_matmul_dtype(n.outputs[0]->type.dtype), n.describe(),
               ": CUDA matmul supports f32, f64, f16 and bf16, not ", dtype_name(n.outputs[0]->type.dtype));
    if (n.inputs[0]->type.is_static() && n.inputs[1]->type.is_static())
      KILN_CHECK(matmul_batch_supported(n.inputs[0]->type.static_shape(), n.inputs[1]->type.static_shape()), n.describe(),
                 ": CUDA matmul does not support the batch broadcast ", n.inputs[0]->type.to_string(), " @ ",
                 n.inputs[1]->type.to_string());
  }
  return out;
}

}  // namespace kiln::codegen::cuda
