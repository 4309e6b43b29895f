// ONNX math ops added for conformance (issue #3): inverse and hyperbolic trig, the bitwise
// integer ops, Det, EyeLike and Swish. Why: each maps to one Kiln op (or, for EyeLike, to an
// import-time constant), so this file is only the ONNX spelling of their attributes.
#include "frontend/onnx/importer.h"

namespace kiln::onnx_import {

namespace {

void unary(OpRegistry& r, const char* onnx_name, Op op) {
  r[onnx_name] = [op](NodeCtx& c) { c.set_output(0, c.emit(op, {c.input(0)})); };
}
void binary(OpRegistry& r, const char* onnx_name, Op op) {
  r[onnx_name] = [op](NodeCtx& c) { c.set_output(0, c.emit(op, {c.input(0), c.input(1)})); };
}

void eye_like(NodeCtx& c) {
  Value* x = c.input(0);
  if (x->type.rank() != 2) c.fail("input must be 2-D");
  DType dt = x->type.dtype;
  if (c.has_attr("dtype")) {
    auto d = dtype_from_onnx(int(c.attr_int("dtype", 0)));
    if (!d) c.unsupported(str("dtype ", onnx_type_name(int(c.attr_int("dtype", 0))), " is not supported"));
    dt = *d;
  }
  auto rows = x->type.shape[0].maybe_constant(), cols = x->type.shape[1].maybe_constant();
  if (!rows || !cols) c.unsupported("EyeLike of a symbolic shape");
  int64_t k = c.attr_int("k", 0);
  HostTensor eye = HostTensor::zeros(dt, {*rows, *cols});
  for (int64_t i = 0; i < *rows; ++i)
    if (i + k >= 0 && i + k < *cols) eye.set_i64(i * *cols + i + k, 1);
  c.set_output(0, c.constant(eye));
}

}  // namespace

void register_math_ops(OpRegistry& r) {
  unary(r, "Asin", Op::Asin);
  unary(r, "Acos", Op::Acos);
  unary(r, "Atan", Op::Atan);
  unary(r, "Sinh", Op::Sinh);
  unary(r, "Cosh", Op::Cosh);
  unary(r, "Asinh", Op::Asinh);
  unary(r, "Acosh", Op::Acosh);
  unary(r, "Atanh", Op::Atanh);
  unary(r, "BitwiseNot", Op::BitNot);
  binary(r, "BitwiseAnd", Op::BitAnd);
  binary(r, "BitwiseOr", Op::BitOr);
  binary(r, "BitwiseXor", Op::BitXor);
  unary(r, "Det", Op::Det);
  r["BitShift"] = [](NodeCtx& c) {
    std::string dir = c.attr_string("direction", "");
    if (dir != "LEFT" && dir != "RIGHT") c.fail("direction must be LEFT or RIGHT, got '" + dir + "'");
    c.set_output(0, c.emit(Op::BitShift, {c.input(0), c.input(1)}, {{"left", int64_t(dir == "LEFT")}}));
  };
  r["EyeLike"] = eye_like;
  r["Swish"] = [](NodeCtx& c) {  // x * sigmoid(alpha * x)
    Value* x = c.input(0);
    double alpha = c.attr_float("alpha", 1.0);
    Value* ax = alpha == 1.0 ? x : c.emit(Op::Mul, {x, c.scalar_like(x, alpha)});
    c.set_output(0, c.emit(Op::Mul, {x, c.emit(Op::Sigmoid, {ax})}));
  };
}

}  // namespace kiln::onnx_import
