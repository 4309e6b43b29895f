// ONNX elementwise ops: arithmetic, comparisons, logic, activations, Cast, Clip, Where and the
// variadic Max/Min/Sum/Mean. Why: most are one Kiln op; activations without a Kiln row are
// composed from primitives (LeakyRelu = where(x > 0, x, alpha * x)), which fusion later merges.
#include <cmath>
#include <limits>

#include "frontend/onnx/importer.h"

namespace kiln::onnx_import {

namespace {

void unary(OpRegistry& r, const char* onnx_name, Op op) {
  r[onnx_name] = [op](NodeCtx& c) { c.set_output(0, c.emit(op, {c.input(0)})); };
}
// Before opset 7, binary ops broadcast only with broadcast=1, and `axis` says where B's dims
// line up inside A's; trailing size-1 dims turn that into numpy broadcasting.
Value* legacy_rhs(NodeCtx& c, Value* a, Value* b) {
  if (c.opset() >= 7 || c.attr_int("broadcast", 0) == 0 || !c.has_attr("axis")) return b;
  int ra = a->type.rank(), rb = b->type.rank();
  int64_t axis = c.attr_int("axis", 0);
  if (axis < 0) axis += ra;
  if (axis < 0 || axis + rb > ra) c.fail(str("legacy broadcast axis ", c.attr_int("axis", 0), " does not fit B in A"));
  Shape s = b->type.shape;
  for (int64_t i = axis + rb; i < ra; ++i) s.push_back(SymInt(1));
  return c.reshape(b, s);
}

void binary(OpRegistry& r, const char* onnx_name, Op op) {
  r[onnx_name] = [op](NodeCtx& c) {
    Value* a = c.input(0);
    c.set_output(0, c.emit(op, {a, legacy_rhs(c, a, c.input(1))}));
  };
}

Value* scalar(NodeCtx& c, const Value* like, double v) { return c.scalar_like(like, v); }
Value* mul_s(NodeCtx& c, Value* x, double s) { return c.emit(Op::Mul, {x, scalar(c, x, s)}); }
Value* add_s(NodeCtx& c, Value* x, double s) { return c.emit(Op::Add, {x, scalar(c, x, s)}); }
Value* gt_zero(NodeCtx& c, Value* x) { return c.emit(Op::Gt, {x, scalar(c, x, 0)}); }

// Cast's `to` for an ONNX element type Kiln cannot hold is "unsupported", not "malformed".
DType cast_target(const NodeCtx& c, int onnx_type) {
  auto dt = dtype_from_onnx(onnx_type);
  if (!dt || *dt == DType::Str)
    c.unsupported(str("cast to element type ", onnx_type_name(onnx_type), " is not supported"));
  return *dt;
}

// Folds a variadic op pairwise: Max(a, b, c) = max(max(a, b), c).
void variadic(OpRegistry& r, const char* onnx_name, Op op, bool mean) {
  r[onnx_name] = [op, mean](NodeCtx& c) {
    std::vector<Value*> xs = c.inputs();
    if (xs.empty()) c.fail("needs at least one input");
    Value* acc = xs[0];
    for (size_t i = 1; i < xs.size(); ++i) acc = c.emit(op, {acc, xs[i]});
    if (mean && xs.size() > 1) acc = c.emit(Op::Div, {acc, scalar(c, acc, double(xs.size()))});
    if (xs.size() == 1) {  // a sum of one still broadcasts nothing: identity
      c.set_output(0, acc);
      return;
    }
    c.set_output(0, acc);
  };
}

void clip(NodeCtx& c) {
  Value* x = c.input(0);
  double inf = std::numeric_limits<double>::infinity();
  if (c.opset() < 11) {
    c.set_output(0, c.emit(Op::Clamp, {x}, {{"min", c.attr_float("min", -inf)}, {"max", c.attr_float("max", inf)}}));
    return;
  }
  // Known scalar bounds become attributes; tensor bounds become max/min ops.
  Value* out = x;
  for (int i : {1, 2}) {
    if (!c.has_input(i)) continue;
    auto k = c.known(i);
    if (k && k->numel() == 1 && is_float(x->type.dtype)) {
      double b = k->get_f64(0);
      Attrs a{{"min", i == 1 ? b : -inf}, {"max", i == 2 ? b : inf}};
      out = c.emit(Op::Clamp, {out}, a);
    } else {
      out = c.emit(i == 1 ? Op::Maximum : Op::Minimum, {out, c.input(i)});
    }
  }
  c.set_output(0, out);
}

void hard_sigmoid_into(NodeCtx& c, Value* x, double alpha, double beta, Value** out) {
  Value* lin = add_s(c, mul_s(c, x, alpha), beta);
  *out = c.emit(Op::Clamp, {lin}, {{"min", 0.0}, {"max", 1.0}});
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  unary(r, "Neg", Op::Neg);
  unary(r, "Abs", Op::Abs);
  unary(r, "Exp", Op::Exp);
  unary(r, "Log", Op::Log);
  unary(r, "Sqrt", Op::Sqrt);
  unary(r, "Reciprocal", Op::Reciprocal);
  unary(r, "Tanh", Op::Tanh);
  unary(r, "Sigmoid", Op::Sigmoid);
  unary(r, "Erf", Op::Erf);
  unary(r, "Relu", Op::Relu);
  unary(r, "Sin", Op::Sin);
  unary(r, "Cos", Op::Cos);
  unary(r, "Floor", Op::Floor);
  unary(r, "Ceil", Op::Ceil);
  unary(r, "Round", Op::Round);
  unary(r, "Sign", Op::Sign);
  unary(r, "Not", Op::Not);
  unary(r, "IsNaN", Op::IsNan);
  binary(r, "Add", Op::Add);
  binary(r, "Sub", Op::Sub);
  binary(r, "Mul", Op::Mul);
  binary(r, "Div", Op::Div);
  binary(r, "Equal", Op::Eq);
  binary(r, "Less", Op::Lt);
  binary(r, "LessOrEqual", Op::Le);
  binary(r, "Greater", Op::Gt);
  binary(r, "GreaterOrEqual", Op::Ge);
  binary(r, "And", Op::And);
  binary(r, "Or", Op::Or);
  binary(r, "Xor", Op::Xor);
  variadic(r, "Max", Op::Maximum, false);
  variadic(r, "Min", Op::Minimum, false);
  variadic(r, "Sum", Op::Add, false);
  variadic(r, "Mean", Op::Add, true);

  r["Tan"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    c.set_output(0, c.emit(Op::Div, {c.emit(Op::Sin, {x}), c.emit(Op::Cos, {x})}));
  };
  r["Pow"] = [](NodeCtx& c) {  // the exponent may have another type: compute in the base's type
    Value* x = c.input(0);
    c.set_output(0, c.emit(Op::Pow, {x, c.cast(legacy_rhs(c, x, c.input(1)), x->type.dtype)}));
  };
  r["Mod"] = [](NodeCtx& c) {
    c.set_output(0, c.emit(Op::Mod, {c.input(0), c.input(1)}, {{"fmod", c.attr_int("fmod", 0)}}));
  };
  r["Identity"] = [](NodeCtx& c) { c.set_output(0, c.input(0)); };
  r["Where"] = [](NodeCtx& c) { c.set_output(0, c.emit(Op::Where, {c.input(0), c.input(1), c.input(2)})); };
  r["Cast"] = [](NodeCtx& c) {
    if (!c.has_attr("to")) c.fail("attribute 'to' is required");
    c.set_output(0, onnx_cast(c, c.input(0), cast_target(c, int(c.attr_int("to", 0))), c.attr_int("saturate", 1) != 0,
                              c.attr_string("round_mode", "up")));
  };
  r["CastLike"] = [](NodeCtx& c) {
    c.set_output(0, onnx_cast(c, c.input(0), c.input(1)->type.dtype, c.attr_int("saturate", 1) != 0,
                              c.attr_string("round_mode", "up")));
  };
  r["Clip"] = clip;
  r["IsInf"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    double inf = std::numeric_limits<double>::infinity();
    bool pos = c.attr_int("detect_positive", 1) != 0, neg = c.attr_int("detect_negative", 1) != 0;
    Value* p = c.emit(Op::Eq, {x, scalar(c, x, inf)});
    Value* n = c.emit(Op::Eq, {x, scalar(c, x, -inf)});
    Value* out = pos && neg ? c.emit(Op::Or, {p, n}) : pos ? p : neg ? n : c.emit(Op::And, {p, n});
    c.set_output(0, out);
  };

  // ---- activations composed from primitives ----
  r["LeakyRelu"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    c.set_output(0, c.emit(Op::Where, {gt_zero(c, x), x, mul_s(c, x, c.attr_float("alpha", 0.01))}));
  };
  r["PRelu"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    Value* slope = c.input(1);
    // Before opset 7 a [C] slope is per channel (dim 1), not numpy-aligned to the last dim.
    if (c.opset() < 7 && slope->type.rank() == 1 && x->type.rank() > 2 && !(slope->type.shape[0] == SymInt(1))) {
      Shape per_channel(size_t(x->type.rank() - 1), SymInt(1));
      per_channel[0] = slope->type.shape[0];
      slope = c.reshape(slope, per_channel);
    }
    c.set_output(0, c.emit(Op::Where, {gt_zero(c, x), x, c.emit(Op::Mul, {x, slope})}));
  };
  r["ThresholdedRelu"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    Value* keep = c.emit(Op::Gt, {x, scalar(c, x, c.attr_float("alpha", 1.0))});
    c.set_output(0, c.emit(Op::Where, {keep, x, scalar(c, x, 0)}));
  };
  r["Elu"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    Value* neg = mul_s(c, add_s(c, c.emit(Op::Exp, {x}), -1.0), c.attr_float("alpha", 1.0));
    c.set_output(0, c.emit(Op::Where, {gt_zero(c, x), x, neg}));
  };
  r["Celu"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    double alpha = c.attr_float("alpha", 1.0);
    Value* neg = mul_s(c, add_s(c, c.emit(Op::Exp, {mul_s(c, x, 1.0 / alpha)}), -1.0), alpha);
    c.set_output(0, c.emit(Op::Where, {gt_zero(c, x), x, neg}));
  };
  r["Selu"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    double alpha = c.attr_float("alpha", 1.67326319217681884765625);
    double gamma = c.attr_float("gamma", 1.05070102214813232421875);
    Value* neg = mul_s(c, add_s(c, c.emit(Op::Exp, {x}), -1.0), alpha);
    c.set_output(0, mul_s(c, c.emit(Op::Where, {gt_zero(c, x), x, neg}), gamma));
  };
  r["HardSigmoid"] = [](NodeCtx& c) {
    Value* out;
    hard_sigmoid_into(c, c.input(0), c.attr_float("alpha", 0.2), c.attr_float("beta", 0.5), &out);
    c.set_output(0, out);
  };
  r["HardSwish"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    Value* hs;
    hard_sigmoid_into(c, x, 1.0 / 6.0, 0.5, &hs);
    c.set_output(0, c.emit(Op::Mul, {x, hs}));
  };
  r["Gelu"] = [](NodeCtx& c) {
    std::string approx = c.attr_string("approximate", "none");
    if (approx != "none" && approx != "tanh") c.fail("approximate must be 'none' or 'tanh', got '" + approx + "'");
    c.set_output(0, c.emit(Op::Gelu, {c.input(0)}, {{"approximate", approx}}));
  };
  r["Softplus"] = [](NodeCtx& c) {  // log(1 + e^x), written to stay finite for large x
    Value* x = c.input(0);
    Value* relu = c.emit(Op::Relu, {x});
    Value* e = c.emit(Op::Exp, {c.emit(Op::Neg, {c.emit(Op::Abs, {x})})});
    c.set_output(0, c.emit(Op::Add, {relu, c.emit(Op::Log, {add_s(c, e, 1.0)})}));
  };
  r["Softsign"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    c.set_output(0, c.emit(Op::Div, {x, add_s(c, c.emit(Op::Abs, {x}), 1.0)}));
  };
  r["Mish"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    Value* relu = c.emit(Op::Relu, {x});
    Value* e = c.emit(Op::Exp, {c.emit(Op::Neg, {c.emit(Op::Abs, {x})})});
    Value* sp = c.emit(Op::Add, {relu, c.emit(Op::Log, {add_s(c, e, 1.0)})});
    c.set_output(0, c.emit(Op::Mul, {x, c.emit(Op::Tanh, {sp})}));
  };
  r["Shrink"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    double bias = c.attr_float("bias", 0.0), lambd = c.attr_float("lambd", 0.5);
    Value* lo = c.emit(Op::Lt, {x, scalar(c, x, -lambd)});
    Value* hi = c.emit(Op::Gt, {x, scalar(c, x, lambd)});
    Value* zero = scalar(c, x, 0);
    Value* out = c.emit(Op::Where, {hi, add_s(c, x, -bias), zero});
    c.set_output(0, c.emit(Op::Where, {lo, add_s(c, x, bias), out}));
  };
}

}  // namespace kiln::onnx_import
