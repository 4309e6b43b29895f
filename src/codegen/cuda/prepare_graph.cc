// The CUDA target's graph rewrites (prepare_graph.h).
#include "codegen/cuda/prepare_graph.h"

#include <optional>

#include "codegen/cuda/attention_kernel.h"
#include "lower/split_views.h"

namespace kiln::codegen::cuda {

bool fused_attention_supports(const Node& n) {
  if (n.op != Op::Attention || n.inputs.size() < 3 || n.inputs.size() > 4 || n.outputs.size() != 1) return false;
  const TensorType &q = n.inputs[0]->type, &k = n.inputs[1]->type, &v = n.inputs[2]->type;
  if (q.dtype != DType::BF16 && q.dtype != DType::F16) return false;
  if (k.dtype != q.dtype || v.dtype != q.dtype || n.outputs[0]->type.dtype != q.dtype) return false;
  const int rank = q.rank();
  if (rank < 3 || k.rank() != rank || v.rank() != rank) return false;
  // An additive mask of q's type; with one, q is at most [B, H, T, D], so the mask's batch dims
  // need one stride each (a bool mask is decomposed).
  if (n.inputs.size() == 4 && (n.inputs[3]->type.dtype != q.dtype || rank > 4)) return false;
  for (int i = 0; i < rank - 2; ++i)
    if (!(q.shape[size_t(i)] == k.shape[size_t(i)]) || !(q.shape[size_t(i)] == v.shape[size_t(i)])) return false;
  const std::optional<int64_t> d = q.shape.back().maybe_constant();
  if (!d || !fused_attention_head_dim_supported(*d)) return false;
  return k.shape.back().maybe_constant() == d && v.shape.back().maybe_constant() == d &&
         k.shape[size_t(rank - 2)] == v.shape[size_t(rank - 2)];
}

FusedAttentionKernel fused_attention_kernel(const Node& n) {
  return {n.outputs[0]->type.dtype, *n.inputs[0]->type.shape.back().maybe_constant(), n.inputs.size() == 4,
          n.attrs.get_int("zero_nan_rows") != 0};
}

namespace {

// Fused attention read only by permute [0, 2, 1, 3] (the heads merged back: [B, H, T, D] ->
// [B, T, H, D]) becomes attention with heads_last, which the kernel writes in that layout itself:
// the permute's copy goes, and a reshape to [B, T, H*D] after it is an alias.
bool write_heads_last(Graph& g) {
  std::vector<std::pair<Node*, Node*>> pairs;  // (attention, permute)
  for (Node* n : g.node_list()) {
    if (n->op != Op::Attention || !fused_attention_supports(*n) || n->attrs.get_int("heads_last") != 0) continue;
    const Value* out = n->outputs[0];
    if (out->type.rank() != 4 || out->uses.size() != 1 || g.is_output(out)) continue;
    Node* p = out->uses[0].user;
    if (p->op == Op::Permute && p->attrs.get_ints("perm") == std::vector<int64_t>{0, 2, 1, 3}) pairs.push_back({n, p});
  }
  for (auto [n, p] : pairs) {
    Attrs attrs = n->attrs;
    attrs.set("heads_last", int64_t(1));
    g.set_insertion_point(p);
    Value* y = g.add(Op::Attention, n->inputs, attrs);
    g.replace_all_uses(p->outputs[0], y);
    g.set_insertion_point(nullptr);
    g.erase_node(p);
    g.erase_node(n);
  }
  return !pairs.empty();
}

// A conv whose windows tile the input (kernel == stride, no padding or dilation, one group: ViT's
// patch embedding, ConvNeXt's stem and downsampling) is a matmul of the patches: [N*OH*OW, C*kh*kw]
// x [C*kh*kw, O]. cuDNN's NCHW kernels run it several times slower than cuBLASLt runs the GEMM (608
// us vs ~30 for ViT-B/16's at batch 32 in bf16); the patch gather is one copy kernel, the bias the
// matmul's epilogue, and the layout back to NCHW a view its consumers read (ViT's reshape and
// permute to [N, T, O] cancel it).
bool patch_conv_as_matmul(Graph& g, Node* n) {
  if (n->op != Op::Conv2d || n->attrs.get_int("groups") != 1) return false;
  const TensorType &x = n->inputs[0]->type, &w = n->inputs[1]->type;
  const std::vector<int64_t>& pads = n->attrs.get_ints("pads");
  const std::vector<int64_t>& strides = n->attrs.get_ints("strides");
  const std::vector<int64_t>& dil = n->attrs.get_ints("dilations");
  for (int64_t p : pads)
    if (p != 0) return false;
  if (dil[0] != 1 || dil[1] != 1) return false;
  const std::optional<int64_t> C = x.shape[1].maybe_constant(), H = x.shape[2].maybe_constant(),
                               W = x.shape[3].maybe_constant(), O = w.shape[0].maybe_constant(),
                               kh = w.shape[2].maybe_constant(), kw = w.shape[3].maybe_constant();
  if (!C || !H || !W || !O || !kh || !kw || *kh != strides[0] || *kw != strides[1]) return false;
  if (*kh * *kw == 1 || *H % *kh != 0 || *W % *kw != 0) return false;  // 1x1: cuDNN's own GEMM
  const int64_t oh = *H / *kh, ow = *W / *kw, k = *C * *kh * *kw;
  const SymInt N = x.shape[0];
  g.set_insertion_point(n);
  Value* tiles = g.add(Op::Reshape, {n->inputs[0]}, {{"shape", Shape{N, *C, oh, *kh, ow, *kw}}});
  tiles = g.add(Op::Permute, {tiles}, {{"perm", std::vector<int64_t>{0, 2, 4, 1, 3, 5}}});
  Value* patches = g.add(Op::Reshape, {tiles}, {{"shape", Shape{N * SymInt(oh * ow), k}}});
  Value* weight = g.add(Op::Reshape, {n->inputs[1]}, {{"shape", Shape{*O, k}}});
  weight = g.add(Op::Permute, {weight}, {{"perm", std::vector<int64_t>{1, 0}}});
  Value* y = g.add(Op::MatMul, {patches, weight});
  if (n->inputs.size() == 3) y = g.add(Op::Add, {y, n->inputs[2]});
  y = g.add(Op::Reshape, {y}, {{"shape", Shape{N, oh, ow, *O}}});
  y = g.add(Op::Permute, {y}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}});
  g.replace_all_uses(n->outputs[0], y);
  g.set_insertion_point(nullptr);
  g.erase_node(n);
  return true;
}

// A conv over a few input channels (a CNN's stem: ResNet's 7x7 over RGB, C*kH*kW = 147) is the
// weights [O, C*kH*kW] times its im2col columns [N, C*kH*kW, OH*OW]: one gather kernel and a
// batched cuBLASLt GEMM whose output is already NCHW. cuDNN's NCHW kernels run such convs far off
// the tensor cores (ResNet-50's stem at batch 32 in bf16: ~700 us, the model's slowest step).
bool thin_conv_as_matmul(Graph& g, Node* n) {
  if (n->op != Op::Conv2d || n->attrs.get_int("groups") != 1) return false;
  const TensorType &x = n->inputs[0]->type, &w = n->inputs[1]->type;
  if (x.dtype != DType::BF16 && x.dtype != DType::F16 && x.dtype != DType::F32) return false;
  if (!x.is_static() || !w.is_static() || x.rank() != 4) return false;
  const int64_t C = x.shape[1].constant(), O = w.shape[0].constant(), kh = w.shape[2].constant(), kw = w.shape[3].constant();
  const int64_t k = C * kh * kw;
  if (C > 4 || kh * kw == 1 || k > 256) return false;
  const TensorType& y = n->outputs[0]->type;
  const SymInt N = x.shape[0], oh = y.shape[2], ow = y.shape[3];
  g.set_insertion_point(n);
  Value* cols = g.add(Op::Im2Col, {n->inputs[0]},
                      {{"kernel", std::vector<int64_t>{kh, kw}}, {"strides", n->attrs.get_ints("strides")},
                       {"pads", n->attrs.get_ints("pads")}, {"dilations", n->attrs.get_ints("dilations")}});
  Value* weight = g.add(Op::Reshape, {n->inputs[1]}, {{"shape", Shape{O, k}}});
  Value* out = g.add(Op::MatMul, {weight, cols});
  out = g.add(Op::Reshape, {out}, {{"shape", Shape{N, SymInt(O), oh, ow}}});
  if (n->inputs.size() == 3)
    out = g.add(Op::Add, {out, g.add(Op::Reshape, {n->inputs[2]}, {{"shape", Shape{SymInt(O), SymInt(1), SymInt(1)}}})});
  g.replace_all_uses(n->outputs[0], out);
  g.set_insertion_point(nullptr);
  g.erase_node(n);
  return true;
}

}  // namespace

// split -> one static slice per piece: slices are views the kernels read through, so the pieces
// are never copied (the GPU has no library kernel for split); conv2d's bias -> an add after it.
bool prepare_graph_for_cuda(Graph& g, bool fused_attention) {
  bool changed = false;
  for (Node* n : g.node_list()) {
    // Attention the fused kernel cannot run becomes primitives here; the rest stays whole
    // (compile_cuda keeps it out of the generic decomposition).
    if (n->op == Op::Attention && !(fused_attention && fused_attention_supports(*n))) {
      g.set_insertion_point(n);
      std::vector<Value*> parts = n->info().decompose(g, *n);
      for (size_t i = 0; i < parts.size(); ++i) g.replace_all_uses(n->outputs[i], parts[i]);
      g.set_insertion_point(nullptr);
      g.erase_node(n);
      changed = true;
      continue;
    }
    if (patch_conv_as_matmul(g, n) || thin_conv_as_matmul(g, n)) {
      changed = true;
      continue;
    }
    // conv2d + bias -> conv2d, then add: cuDNN writes the product and the bias joins the fused
    // kernel after it (relu, the residual add) instead of one more pass over the output. Only
    // where cuDNN can take it (symmetric pads); the direct kernel adds the bias for free.
    if (n->op == Op::Conv2d && n->inputs.size() == 3) {
      const std::vector<int64_t>& pads = n->attrs.get_ints("pads");
      if (pads[0] != pads[2] || pads[1] != pads[3]) continue;
      g.set_insertion_point(n);
      Value* y = g.add(Op::Conv2d, {n->inputs[0], n->inputs[1]}, n->attrs);
      Value* bias = g.add(Op::Reshape, {n->inputs[2]}, {{"shape", Shape{n->inputs[2]->type.shape[0], SymInt(1), SymInt(1)}}});
      g.replace_all_uses(n->outputs[0], g.add(Op::Add, {y, bias}));
      g.set_insertion_point(nullptr);
      g.erase_node(n);
      changed = true;
      continue;
    }
  }
  changed |= lower::split_into_slices(g);
  if (fused_attention) changed |= write_heads_last(g);
  return changed;
}

}  // namespace kiln::codegen::cuda
