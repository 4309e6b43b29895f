// Small graph-building helpers shared by the decomposing op handlers (signal, index, vision, rnn).
// Why: those handlers build many slices, constants and index grids; one spelling keeps them short.
#pragma once

#include <vector>

#include "frontend/onnx/importer.h"

namespace kiln::onnx_import {

// A constant tensor of `dt` with the given shape and values (converted from double).
inline Value* const_of(NodeCtx& c, DType dt, std::vector<int64_t> shape, const std::vector<double>& vals) {
  return c.constant(HostTensor::from_doubles(dt, std::move(shape), vals));
}
inline Value* scalar_of(NodeCtx& c, DType dt, double v) { return c.constant(HostTensor::scalar(dt, v)); }

// x[start:end] along one axis (step 1).
inline Value* slice_axis(NodeCtx& c, Value* x, int axis, int64_t start, int64_t end) {
  return c.emit(Op::Slice, {x}, {{"starts", std::vector<int64_t>{start}}, {"ends", std::vector<int64_t>{end}},
                                 {"axes", std::vector<int64_t>{axis}}});
}

// The constant size of dim `i` of x, or an unsupported error naming `what`.
inline int64_t static_dim(NodeCtx& c, const Value* x, int i, const char* what) {
  auto d = x->type.shape.at(size_t(i)).maybe_constant();
  if (!d) c.unsupported(str(what, ": dim ", i, " is symbolic; this decomposition needs static sizes"));
  return *d;
}

// The constant shape of x, or an unsupported error naming `what`.
inline std::vector<int64_t> static_shape_of(NodeCtx& c, const Value* x, const char* what) {
  std::vector<int64_t> s;
  for (int i = 0; i < x->type.rank(); ++i) s.push_back(static_dim(c, x, i, what));
  return s;
}

inline Shape dims(const std::vector<int64_t>& s) { return Shape(s.begin(), s.end()); }

inline int64_t numel_of_dims(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Pad mode "wrap" (ops_index.cc): pads = [begin_0.., end_0..], negative entries crop.
Value* pad_wrap(NodeCtx& c, Value* x, const std::vector<int64_t>& pads);

// BatchNormalization with training_mode=1 (ops_vision.cc): batch statistics and running updates.
void batch_norm_training(NodeCtx& c);

// 3-D MaxPool / AveragePool (ops_vision.cc) as a 2-D pool over (H, W) then one over D.
void pool3d(NodeCtx& c, bool is_max);

// AveragePool with dilations (ops_vision.cc): one constant averaging matrix per spatial axis.
void avg_pool_dilated(NodeCtx& c);

// MaxPool's Indices output (ops_vision.cc): gathered window taps, ArgMax, a constant index table.
Value* max_pool_indices(NodeCtx& c);

// A constant [out, in] (row-major) matrix applied along `axis` of x (ops_vision.cc).
Value* apply_axis_matrix(NodeCtx& c, Value* x, int axis, int64_t out, const std::vector<double>& m);

// A conv/pool node's kernel, strides, dilations and pads ([begin..., end...]) for any spatial rank,
// with auto_pad resolved to explicit pads (ops_nn.cc). Why: Conv, the pools and their
// decompositions (pool_axes in ops_vision.cc) share one reading of these attributes.
struct WindowAttrs {
  std::vector<int64_t> kernel, strides, dilations, pads;
};
WindowAttrs window_attrs(NodeCtx& c, const Value* x, std::vector<int64_t> kernel);

// The same window for Kiln's 2-D conv and pool ops (ops_nn.cc): 1-D and 2-D only; a 1-D window is
// lifted to 2-D with H = 1.
struct Window {
  std::vector<int64_t> kernel, strides, pads, dilations;  // pads: [top, left, bottom, right]
  bool lifted = false;                                     // a 1-D op run as 2-D with H = 1
};
Window window_params(NodeCtx& c, Value* x, std::vector<int64_t> kernel);
// Adds / removes the H = 1 axis of a lifted 1-D window.
Value* lift(NodeCtx& c, Value* x, bool lifted);
Value* unlift(NodeCtx& c, Value* y, bool lifted);

}  // namespace kiln::onnx_import
