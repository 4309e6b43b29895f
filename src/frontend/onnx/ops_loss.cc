// ONNX losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (= NLL of log_softmax).
// Why: both are a gather of the target class along axis 1, a per-class weight, an ignore_index
// mask and a reduction, which compose from gather_elements, gather, where and reduce_sum.
#include "frontend/onnx/importer.h"

namespace kiln::onnx_import {

namespace {

// loss[n, d...] = -input[n, target[n, d...], d...] * weight[target], 0 where target ==
// ignore_index; reduction "none", "sum" or "mean" (sum / sum of the weights that were applied).
Value* nll(NodeCtx& c, Value* input, Value* target, Value* weight) {
  int rank = input->type.rank();
  if (rank < 2) c.fail("input must be [N, C, d...]");
  if (target->type.rank() != rank - 1) c.fail(str("target must be [N, d...] (rank ", rank - 1, ")"));
  if (!is_integer(target->type.dtype)) c.fail("target must be an integer tensor");
  std::string reduction = c.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    c.fail("reduction must be none, sum or mean, got '" + reduction + "'");
  DType dt = input->type.dtype;
  target = c.cast(target, DType::I64);
  Value* keep = nullptr;  // bool [N, d...]: false where target == ignore_index
  if (c.has_attr("ignore_index")) {
    Value* ii = c.constant(HostTensor::scalar(DType::I64, double(c.attr_int("ignore_index", 0))));
    keep = c.emit(Op::Ne, {target, ii});
    // Ignored targets may be out of range: gather class 0 for them and zero the result.
    target = c.emit(Op::Where, {keep, target, c.constant(HostTensor::scalar(DType::I64, 0))});
  }
  Shape idx_shape = target->type.shape;
  idx_shape.insert(idx_shape.begin() + 1, SymInt(1));
  Value* picked = c.emit(Op::GatherElements, {input, c.reshape(target, idx_shape)}, {{"axis", int64_t(1)}});
  Value* loss = c.emit(Op::Neg, {c.reshape(picked, target->type.shape)});
  Value* w = nullptr;  // per-element weight, when not all ones
  if (weight) w = c.emit(Op::Gather, {c.cast(weight, dt), target}, {{"axis", int64_t(0)}});
  Value* zero = c.scalar_like(loss, 0);
  if (keep) w = c.emit(Op::Where, {keep, w ? w : c.scalar_like(loss, 1), zero});
  if (w) loss = c.emit(Op::Mul, {loss, w});
  if (reduction == "none") return loss;
  Attrs all{{"axes", std::vector<int64_t>{}}, {"keepdim", int64_t(0)}};
  Value* total = c.emit(Op::ReduceSum, {loss}, all);
  if (reduction == "sum") return total;
  if (!w) return c.emit(Op::ReduceMean, {loss}, all);
  // w may be a broadcast scalar-shaped where: expand it to the loss's shape before summing.
  if (w->type.shape != loss->type.shape) w = c.emit(Op::Expand, {w}, {{"shape", loss->type.shape}});
  return c.emit(Op::Div, {total, c.emit(Op::ReduceSum, {w}, all)});
}

}  // namespace

void register_loss_ops(OpRegistry& r) {
  r["NegativeLogLikelihoodLoss"] = [](NodeCtx& c) {
    c.set_output(0, nll(c, c.input(0), c.input(1), c.has_input(2) ? c.input(2) : nullptr));
  };
  r["SoftmaxCrossEntropyLoss"] = [](NodeCtx& c) {
    Value* scores = c.input(0);
    if (scores->type.rank() < 2) c.fail("scores must be [N, C, d...]");
    Value* log_prob = c.emit(Op::LogSoftmax, {scores}, {{"axis", int64_t(1)}});
    c.set_output(0, nll(c, log_prob, c.input(1), c.has_input(2) ? c.input(2) : nullptr));
    c.set_output(1, log_prob);
  };
}

}  // namespace kiln::onnx_import
