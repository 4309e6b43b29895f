// The reference as generated kernels compute f16/bf16 graphs (see widened.h).
#include "fuzz/widened.h"

#include <map>

#include "kiln/error.h"
#include "kiln/interp.h"
#include "kiln/passes.h"
#include "common/compare.h"

namespace kiln::fuzz {

bool is_16bit_float(DType d) { return d == DType::F16 || d == DType::BF16; }

// Ops that read an f16/bf16 operand computed inside a kernel rounded to its dtype (the documented
// precision semantics, docs/testing.md): comparisons and the steps of floor/ceil/round/sign/cast.
bool reads_rounded_operand(const Node& n) {
  return n.info().has(kComparison) || n.op == Op::Floor || n.op == Op::Ceil || n.op == Op::Round ||
         n.op == Op::Sign || n.op == Op::Cast;
}

namespace {

// The operand rounded to `dtype` and widened back to f32, replacing the operand `index` of `user`.
void round_operand(Graph& w, Node* user, int index, DType dtype) {
  Value* rounded = w.add(Op::Cast, {user->inputs[index]}, {{"dtype", dtype}});
  w.set_operand(user, index, w.add(Op::Cast, {rounded}, {{"dtype", DType::F32}}));
}

// The graph as generated kernels compute it: every f16/bf16 value in f32, except where the graph
// rounds — a cast to f16/bf16, a constant or a source of that dtype keeps its 16-bit result and is
// widened after it — and where an op reads a rounded operand (reads_rounded_operand). Null when
// nothing is 16-bit.
std::unique_ptr<Graph> widened(const Graph& g) {
  std::unique_ptr<Graph> w = g.clone();
  std::map<const Value*, DType> narrow;  // the 16-bit values and their dtypes
  for (Value* v : w->inputs())
    if (is_16bit_float(v->type.dtype)) narrow[v] = v->type.dtype, v->type.dtype = DType::F32;
  std::vector<Node*> nodes = w->node_list();
  for (Node* n : nodes) {
    bool rounds = n->op == Op::Cast || n->info().has(kSource);
    for (Value* v : n->outputs) {
      if (!is_16bit_float(v->type.dtype)) continue;
      narrow[v] = v->type.dtype;
      if (!rounds) {
        v->type.dtype = DType::F32;
        continue;
      }
      std::vector<Use> uses = v->uses;
      Value* wide = w->add(Op::Cast, {v}, {{"dtype", DType::F32}});
      for (const Use& u : uses) w->set_operand(u.user, u.operand_index, wide);
      std::vector<Value*> outs = w->outputs();
      for (Value*& o : outs)
        if (o == v) o = wide;
      w->set_outputs(outs);
    }
  }
  if (narrow.empty()) return nullptr;
  for (Node* n : nodes) {
    if (!reads_rounded_operand(*n)) continue;
    for (int i = 0; i < int(n->inputs.size()); ++i)  // rounding an exact value changes nothing
      if (narrow.count(n->inputs[i])) round_operand(*w, n, i, narrow.at(n->inputs[i]));
  }
  try {
    w->topological_sort();
    verify(*w);
    return w;
  } catch (const Error&) {
    return nullptr;
  }
}

}  // namespace

// Generated kernels compute f16/bf16 values in float and round at stores (as PyTorch's opmath and
// torch.compile do); the interpreter rounds after every op. A result that differs from the per-op
// rounded reference but agrees with the reference run on the widened graph is a precision
// semantics difference (a domain edge like acos(cosh(x)) just above 1, an exp that amplifies one
// rounding), not a wrong kernel. The widened graph is tried as written and with the target's
// decompositions applied: a decomposed layer norm computes its variance in f32 primitives, which
// overflow where the interpreter's whole layer norm (in double) does not.
bool matches_widened_reference(const Target& target, const Graph& g, const std::vector<HostTensor>& inputs,
                               const HostTensor& got, size_t output) {
  std::unique_ptr<Graph> wide = widened(g);
  if (!wide) return false;
  std::vector<HostTensor> wide_inputs;
  for (const HostTensor& t : inputs)
    wide_inputs.push_back(is_16bit_float(t.dtype())
                              ? HostTensor::from_doubles(DType::F32, t.shape(), t.to_doubles()) : t);
  auto agrees = [&](const Graph& reference) {
    try {
      HostTensor w = interp::run(reference, wide_inputs).at(output);
      if (w.dtype() != got.dtype()) w = HostTensor::from_doubles(got.dtype(), w.shape(), w.to_doubles());
      return testing::compare_tensors(got, w).empty();
    } catch (const Error&) {
      return false;
    }
  };
  if (agrees(*wide)) return true;
  OptimizeOptions decompose_only;
  decompose_only.target = target.optimize_options().target;
  decompose_only.pass_list = {"decomposition"};
  try {
    optimize(*wide, decompose_only);
  } catch (const Error&) {
    return false;
  }
  return agrees(*wide);
}

}  // namespace kiln::fuzz
