// ONNX reductions and axis-wise ops: Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax, CumSum,
// TopK. Why: ONNX moved reduction axes from attributes to inputs (opset 13 for ReduceSum, 18 for
// the rest) and has a few composite reductions (L2, LogSumExp) that are short chains in Kiln.
#include "frontend/onnx/importer.h"

namespace kiln::onnx_import {

namespace {

enum class ReduceKind { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

void reduce(NodeCtx& c, ReduceKind kind) {
  Value* x = c.input(0);
  int axes_input_since = kind == ReduceKind::Sum ? 13 : 18;
  std::vector<int64_t> axes;
  if (c.opset() >= axes_input_since) {
    if (c.has_input(1)) axes = c.require_ints(1, "axes");
  } else {
    axes = c.attr_ints("axes");
  }
  int64_t keepdims = c.attr_int("keepdims", 1);
  if (axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0) {
    c.set_output(0, x);
    return;
  }
  for (auto& a : axes) a = normalize_axis(c, a, x->type.rank());
  if (axes.empty())  // all axes, spelled out so rank-0 inputs stay valid
    for (int i = 0; i < x->type.rank(); ++i) axes.push_back(i);
  Attrs attrs{{"axes", axes}, {"keepdim", keepdims}};
  if (x->type.dtype == DType::Bool && (kind == ReduceKind::Max || kind == ReduceKind::Min)) {
    // max/min over bool = any/all: reduce as u8 and cast back.
    Value* r = c.emit(kind == ReduceKind::Max ? Op::ReduceMax : Op::ReduceMin, {c.cast(x, DType::U8)}, attrs);
    c.set_output(0, c.cast(r, DType::Bool));
    return;
  }
  auto sum = [&](Value* v) { return axes.empty() ? v : c.emit(Op::ReduceSum, {v}, attrs); };
  Value* out = nullptr;
  switch (kind) {
    case ReduceKind::Sum: out = sum(x); break;
    case ReduceKind::Mean: out = axes.empty() ? x : c.emit(Op::ReduceMean, {x}, attrs); break;
    case ReduceKind::Max: out = axes.empty() ? x : c.emit(Op::ReduceMax, {x}, attrs); break;
    case ReduceKind::Min: out = axes.empty() ? x : c.emit(Op::ReduceMin, {x}, attrs); break;
    case ReduceKind::Prod: out = axes.empty() ? x : c.emit(Op::ReduceProd, {x}, attrs); break;
    case ReduceKind::L1: out = sum(c.emit(Op::Abs, {x})); break;
    case ReduceKind::SumSquare: out = sum(c.emit(Op::Mul, {x, x})); break;
    case ReduceKind::L2: {
      Value* ss = sum(c.emit(Op::Mul, {x, x}));
      out = is_float(x->type.dtype) ? c.emit(Op::Sqrt, {ss})
                                    : c.cast(c.emit(Op::Sqrt, {c.cast(ss, DType::F64)}), x->type.dtype);
      break;
    }
    case ReduceKind::LogSum: out = c.emit(Op::Log, {sum(x)}); break;
    case ReduceKind::LogSumExp: out = c.emit(Op::Log, {sum(c.emit(Op::Exp, {x}))}); break;
  }
  c.set_output(0, out);
}

void arg_reduce(NodeCtx& c, Op op) {
  Value* x = c.input(0);
  int axis = normalize_axis(c, c.attr_int("axis", 0), x->type.rank());
  int64_t keep = c.attr_int("keepdims", 1);
  Attrs attrs{{"axis", int64_t(axis)}, {"keepdim", keep}};
  if (c.attr_int("select_last_index", 0) == 0) {
    c.set_output(0, c.emit(op, {x}, attrs));
    return;
  }
  // Last index of the extreme = (dim - 1) - first index in the reversed tensor.
  auto dim = x->type.shape[size_t(axis)].maybe_constant();
  if (!dim) c.unsupported("select_last_index over a symbolic dim");
  Value* rev = c.emit(Op::Slice, {x}, {{"starts", std::vector<int64_t>{-1}},
                                       {"ends", std::vector<int64_t>{-(int64_t(1) << 62)}},
                                       {"axes", std::vector<int64_t>{axis}},
                                       {"steps", std::vector<int64_t>{-1}}});
  Value* idx = c.emit(op, {rev}, attrs);
  c.set_output(0, c.emit(Op::Sub, {c.scalar_like(idx, double(*dim - 1)), idx}));
}

// Opset < 13 softmax works on the input flattened to 2-D at `axis`.
void softmax_like(NodeCtx& c, Op op) {
  Value* x = c.input(0);
  int rank = x->type.rank();
  if (c.opset() >= 13) {
    int axis = normalize_axis(c, c.attr_int("axis", -1), rank);
    c.set_output(0, c.emit(op, {x}, {{"axis", int64_t(axis)}}));
    return;
  }
  int64_t axis = c.attr_int("axis", 1);
  if (axis < 0) axis += rank;
  SymInt outer(1), inner(1);
  for (int i = 0; i < rank; ++i) (i < axis ? outer : inner) = (i < axis ? outer : inner) * x->type.shape[size_t(i)];
  Value* flat = c.reshape(x, {outer, inner});
  c.set_output(0, c.reshape(c.emit(op, {flat}, {{"axis", int64_t(1)}}), x->type.shape));
}

void hardmax(NodeCtx& c) {
  Value* x = c.input(0);
  int rank = x->type.rank();
  int axis = normalize_axis(c, c.attr_int("axis", -1), rank);
  Value* arg = c.emit(Op::ArgMax, {x}, {{"axis", int64_t(axis)}, {"keepdim", int64_t(1)}});
  Shape ar_shape(size_t(rank), SymInt(1));
  ar_shape[size_t(axis)] = x->type.shape[size_t(axis)];
  Value* ar = c.emit(Op::Arange, {}, {{"size", Shape{x->type.shape[size_t(axis)]}}, {"dtype", DType::I64}});
  Value* hit = c.emit(Op::Eq, {arg, c.reshape(ar, ar_shape)});
  c.set_output(0, c.cast(hit, x->type.dtype));
}

void cumsum(NodeCtx& c) {
  Value* x = c.input(0);
  int64_t axis = c.require_ints(1, "axis").at(0);
  axis = normalize_axis(c, axis, x->type.rank());
  c.set_output(0, c.emit(Op::CumSum, {x}, {{"axis", axis}, {"exclusive", c.attr_int("exclusive", 0)},
                                          {"reverse", c.attr_int("reverse", 0)}}));
}

// TopK with k = the whole (symbolic) axis is how both PyTorch exporters write torch.sort and
// argsort with dynamic axes (k = Shape(x)[axis]): a stable sort.
void topk(NodeCtx& c) {
  Value* x = c.input(0);
  int axis = normalize_axis(c, c.attr_int("axis", -1), x->type.rank());
  if (c.opset() >= 10 && !c.known(1)) {
    std::optional<std::vector<SymInt>> k = c.known_dims(1);
    if (k && k->size() == 1 && (*k)[0] == x->type.shape[size_t(axis)]) {
      auto outs = c.emit_multi(Op::Sort, {x}, {{"axis", int64_t(axis)}, {"descending", c.attr_int("largest", 1)}});
      c.set_output(0, outs[0]);
      c.set_output(1, outs[1]);
      return;
    }
  }
  int64_t k = c.opset() >= 10 ? c.require_ints(1, "k").at(0) : c.attr_int("k", -1);
  auto outs = c.emit_multi(Op::TopK, {x}, {{"k", k}, {"axis", int64_t(axis)}, {"largest", c.attr_int("largest", 1)},
                                           {"sorted", c.attr_int("sorted", 1)}});
  c.set_output(0, outs[0]);
  c.set_output(1, outs[1]);
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  r["ReduceSum"] = [](NodeCtx& c) { reduce(c, ReduceKind::Sum); };
  r["ReduceMean"] = [](NodeCtx& c) { reduce(c, ReduceKind::Mean); };
  r["ReduceMax"] = [](NodeCtx& c) { reduce(c, ReduceKind::Max); };
  r["ReduceMin"] = [](NodeCtx& c) { reduce(c, ReduceKind::Min); };
  r["ReduceProd"] = [](NodeCtx& c) { reduce(c, ReduceKind::Prod); };
  r["ReduceL1"] = [](NodeCtx& c) { reduce(c, ReduceKind::L1); };
  r["ReduceL2"] = [](NodeCtx& c) { reduce(c, ReduceKind::L2); };
  r["ReduceLogSum"] = [](NodeCtx& c) { reduce(c, ReduceKind::LogSum); };
  r["ReduceLogSumExp"] = [](NodeCtx& c) { reduce(c, ReduceKind::LogSumExp); };
  r["ReduceSumSquare"] = [](NodeCtx& c) { reduce(c, ReduceKind::SumSquare); };
  r["ArgMax"] = [](NodeCtx& c) { arg_reduce(c, Op::ArgMax); };
  r["ArgMin"] = [](NodeCtx& c) { arg_reduce(c, Op::ArgMin); };
  r["Softmax"] = [](NodeCtx& c) { softmax_like(c, Op::Softmax); };
  r["LogSoftmax"] = [](NodeCtx& c) { softmax_like(c, Op::LogSoftmax); };
  r["Hardmax"] = hardmax;
  r["CumSum"] = cumsum;
  r["TopK"] = topk;
}

}  // namespace kiln::onnx_import
