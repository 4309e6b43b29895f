// The named API functions: each builds the op's attributes and goes through kiln::apply, so eager
// and traced modes share one code path and one set of error messages (the op's shape rule).
#include <utility>

#include "frontend/trace/trace_context.h"
#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln {

namespace {
using Ints = std::vector<int64_t>;

// A rank-0 constant of t's dtype: how a double operand mixes with a tensor.
Tensor scalar_like(const Tensor& t, double value) { return scalar(value, t.dtype()); }

// Sources run eagerly outside a trace, where every dim must be a number.
void require_static_outside_trace(const char* fn, const Shape& shape) {
  if (active_trace() != nullptr) return;
  for (const SymInt& d : shape)
    KILN_CHECK(d.is_constant(), fn, ": shape ", shape_to_string(shape),
               " has symbolic dims, which only make sense inside kiln::trace");
}

// 2 values [h, w] mean symmetric padding; 4 values are [top, left, bottom, right].
Ints four_pads(const char* fn, const Ints& padding) {
  if (padding.size() == 2) return {padding[0], padding[1], padding[0], padding[1]};
  KILN_CHECK(padding.size() == 4, fn, ": padding needs 2 values [h, w] or 4 [top, left, bottom, "
             "right], got ", padding.size());
  return padding;
}
}  // namespace

// ---- factories ----

Tensor scalar(double value, DType dtype) {
  return Tensor::from_host(HostTensor::scalar(dtype, value));
}

namespace {
Tensor filled(const char* fn, const Shape& shape, double value, DType dtype) {
  require_static_outside_trace(fn, shape);
  return apply(Op::Full, {}, {{"shape", shape}, {"value", value}, {"dtype", dtype}});
}
}  // namespace

Tensor full(const Shape& shape, double value, DType dtype) {
  return filled("full", shape, value, dtype);
}
Tensor zeros(const Shape& shape, DType dtype) { return filled("zeros", shape, 0.0, dtype); }
Tensor ones(const Shape& shape, DType dtype) { return filled("ones", shape, 1.0, dtype); }

Tensor arange(const SymInt& size, double start, double step, DType dtype) {
  require_static_outside_trace("arange", {size});
  return apply(Op::Arange, {},
               {{"size", Shape{size}}, {"start", start}, {"step", step}, {"dtype", dtype}});
}

Tensor rand(const Shape& shape, uint64_t seed, double low, double high, DType dtype) {
  require_static_outside_trace("rand", shape);
  return apply(Op::RandomUniform, {},
               {{"shape", shape}, {"low", low}, {"high", high}, {"seed", int64_t(seed)},
                {"dtype", dtype}});
}

Tensor randn(const Shape& shape, uint64_t seed, double mean, double std, DType dtype) {
  require_static_outside_trace("randn", shape);
  return apply(Op::RandomNormal, {},
               {{"shape", shape}, {"mean", mean}, {"std", std}, {"seed", int64_t(seed)},
                {"dtype", dtype}});
}

Tensor constant(HostTensor value) { return apply(Op::Constant, {}, {{"value", std::move(value)}}); }

// ---- elementwise unary ----

#define KILN_UNARY(fn, OpName) \
  Tensor fn(const Tensor& x) { return apply(Op::OpName, {x}); }
KILN_UNARY(neg, Neg)
KILN_UNARY(abs, Abs)
KILN_UNARY(exp, Exp)
KILN_UNARY(log, Log)
KILN_UNARY(sqrt, Sqrt)
KILN_UNARY(rsqrt, Rsqrt)
KILN_UNARY(reciprocal, Reciprocal)
KILN_UNARY(tanh, Tanh)
KILN_UNARY(sigmoid, Sigmoid)
KILN_UNARY(erf, Erf)
KILN_UNARY(relu, Relu)
KILN_UNARY(silu, Silu)
KILN_UNARY(sin, Sin)
KILN_UNARY(cos, Cos)
KILN_UNARY(floor, Floor)
KILN_UNARY(ceil, Ceil)
KILN_UNARY(round, Round)
KILN_UNARY(sign, Sign)
KILN_UNARY(logical_not, Not)
KILN_UNARY(isnan, IsNan)
KILN_UNARY(global_avg_pool, GlobalAvgPool)
KILN_UNARY(shape_of, ShapeOf)
KILN_UNARY(asin, Asin)
KILN_UNARY(acos, Acos)
KILN_UNARY(atan, Atan)
KILN_UNARY(sinh, Sinh)
KILN_UNARY(cosh, Cosh)
KILN_UNARY(asinh, Asinh)
KILN_UNARY(acosh, Acosh)
KILN_UNARY(atanh, Atanh)
KILN_UNARY(bit_not, BitNot)
KILN_UNARY(det, Det)
#undef KILN_UNARY

Tensor gelu(const Tensor& x, const std::string& approximate) {
  return apply(Op::Gelu, {x}, {{"approximate", approximate}});
}
Tensor cast(const Tensor& x, DType dtype) { return apply(Op::Cast, {x}, {{"dtype", dtype}}); }
Tensor clamp(const Tensor& x, double min, double max) {
  return apply(Op::Clamp, {x}, {{"min", min}, {"max", max}});
}
Tensor bit_shift(const Tensor& a, const Tensor& b, bool left) {
  return apply(Op::BitShift, {a, b}, {{"left", int64_t(left ? 1 : 0)}});
}

// ---- elementwise binary ----

#define KILN_BINARY(fn, OpName) \
  Tensor fn(const Tensor& a, const Tensor& b) { return apply(Op::OpName, {a, b}); }
KILN_BINARY(add, Add)
KILN_BINARY(sub, Sub)
KILN_BINARY(mul, Mul)
KILN_BINARY(div, Div)
KILN_BINARY(pow, Pow)
KILN_BINARY(maximum, Maximum)
KILN_BINARY(minimum, Minimum)
KILN_BINARY(eq, Eq)
KILN_BINARY(ne, Ne)
KILN_BINARY(lt, Lt)
KILN_BINARY(le, Le)
KILN_BINARY(gt, Gt)
KILN_BINARY(ge, Ge)
KILN_BINARY(logical_and, And)
KILN_BINARY(logical_or, Or)
KILN_BINARY(logical_xor, Xor)
KILN_BINARY(matmul, MatMul)
KILN_BINARY(bit_and, BitAnd)
KILN_BINARY(bit_or, BitOr)
KILN_BINARY(bit_xor, BitXor)
#undef KILN_BINARY

Tensor pow(const Tensor& a, double exponent) { return pow(a, scalar_like(a, exponent)); }
Tensor maximum(const Tensor& a, double b) { return maximum(a, scalar_like(a, b)); }
Tensor minimum(const Tensor& a, double b) { return minimum(a, scalar_like(a, b)); }
Tensor eq(const Tensor& a, double b) { return eq(a, scalar_like(a, b)); }
Tensor ne(const Tensor& a, double b) { return ne(a, scalar_like(a, b)); }
Tensor mod(const Tensor& a, const Tensor& b, bool c_fmod) {
  return apply(Op::Mod, {a, b}, {{"fmod", int64_t(c_fmod)}});
}
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return apply(Op::Where, {cond, a, b});
}
Tensor where(const Tensor& cond, const Tensor& a, double b) {
  return where(cond, a, scalar_like(a, b));
}
Tensor where(const Tensor& cond, double a, const Tensor& b) {
  return where(cond, scalar_like(b, a), b);
}

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator!(const Tensor& x) { return logical_not(x); }
Tensor operator&&(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
Tensor operator||(const Tensor& a, const Tensor& b) { return logical_or(a, b); }

#define KILN_OPERATOR(sym, fn)                                                                \
  Tensor operator sym(const Tensor& a, const Tensor& b) { return fn(a, b); }                  \
  Tensor operator sym(const Tensor& a, double b) { return fn(a, scalar_like(a, b)); }
KILN_OPERATOR(+, add)
KILN_OPERATOR(-, sub)
KILN_OPERATOR(*, mul)
KILN_OPERATOR(/, div)
KILN_OPERATOR(<, lt)
KILN_OPERATOR(<=, le)
KILN_OPERATOR(>, gt)
KILN_OPERATOR(>=, ge)
#undef KILN_OPERATOR
Tensor operator+(double a, const Tensor& b) { return add(scalar_like(b, a), b); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar_like(b, a), b); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar_like(b, a), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_like(b, a), b); }

// ---- reductions ----

#define KILN_REDUCE(fn, OpName)                                           \
  Tensor fn(const Tensor& x, Ints axes, bool keepdim) {                   \
    return apply(Op::OpName, {x}, {{"axes", std::move(axes)}, {"keepdim", int64_t(keepdim)}}); \
  }
KILN_REDUCE(sum, ReduceSum)
KILN_REDUCE(mean, ReduceMean)
KILN_REDUCE(max, ReduceMax)
KILN_REDUCE(min, ReduceMin)
KILN_REDUCE(prod, ReduceProd)
#undef KILN_REDUCE

Tensor argmax(const Tensor& x, int64_t axis, bool keepdim) {
  return apply(Op::ArgMax, {x}, {{"axis", axis}, {"keepdim", int64_t(keepdim)}});
}
Tensor argmin(const Tensor& x, int64_t axis, bool keepdim) {
  return apply(Op::ArgMin, {x}, {{"axis", axis}, {"keepdim", int64_t(keepdim)}});
}

Tensor cumsum(const Tensor& x, int64_t axis, bool exclusive, bool reverse) {
  return apply(Op::CumSum, {x},
               {{"axis", axis}, {"exclusive", int64_t(exclusive)}, {"reverse", int64_t(reverse)}});
}
std::vector<Tensor> topk(const Tensor& x, int64_t k, int64_t axis, bool largest, bool sorted) {
  return apply_multi(Op::TopK, {x},
                     {{"k", k}, {"axis", axis}, {"largest", int64_t(largest)},
                      {"sorted", int64_t(sorted)}});
}
std::vector<Tensor> sort(const Tensor& x, int64_t axis, bool descending) {
  return apply_multi(Op::Sort, {x}, {{"axis", axis}, {"descending", int64_t(descending)}});
}
Tensor argsort(const Tensor& x, int64_t axis, bool descending) {
  return apply(Op::ArgSort, {x}, {{"axis", axis}, {"descending", int64_t(descending)}});
}
Tensor sample(const Tensor& logits, const Tensor& seeds, const Tensor& steps, const SampleOptions& o,
              const std::vector<Tensor>& per_row) {
  std::vector<Tensor> operands{logits, seeds, steps};
  operands.insert(operands.end(), per_row.begin(), per_row.end());
  return apply(Op::Sample, operands,
               {{"temperature", o.temperature}, {"top_k", o.top_k}, {"top_p", o.top_p}, {"min_p", o.min_p},
                {"repetition_penalty", o.repetition_penalty}, {"frequency_penalty", o.frequency_penalty},
                {"presence_penalty", o.presence_penalty}});
}

// ---- movement ----

Tensor reshape(const Tensor& x, const Shape& shape) {
  return apply(Op::Reshape, {x}, {{"shape", shape}});
}
Tensor permute(const Tensor& x, Ints perm) {
  return apply(Op::Permute, {x}, {{"perm", std::move(perm)}});
}
Tensor transpose(const Tensor& x, int64_t dim_a, int64_t dim_b) {
  int r = x.rank();
  KILN_CHECK(dim_a >= -r && dim_a < r && dim_b >= -r && dim_b < r, "transpose: dims ", dim_a,
             " and ", dim_b, " must be in [-", r, ", ", r, ") for ", x.type().to_string());
  Ints perm(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) perm[size_t(i)] = i;
  std::swap(perm[size_t((dim_a + r) % r)], perm[size_t((dim_b + r) % r)]);
  return permute(x, std::move(perm));
}
Tensor expand(const Tensor& x, const Shape& shape) {
  return apply(Op::Expand, {x}, {{"shape", shape}});
}
Tensor slice(const Tensor& x, Ints starts, Ints ends, Ints axes, Ints steps) {
  return apply(Op::Slice, {x},
               {{"starts", std::move(starts)}, {"ends", std::move(ends)}, {"axes", std::move(axes)},
                {"steps", std::move(steps)}});
}
Tensor slice_axis(const Tensor& x, int64_t axis, int64_t start, int64_t end, int64_t step) {
  return slice(x, {start}, {end}, {axis}, {step});
}
Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
  KILN_CHECK(!xs.empty(), "concat needs at least one tensor");
  return apply(Op::Concat, xs, {{"axis", axis}});
}
Tensor pad(const Tensor& x, Ints pads, const std::string& mode, double value) {
  return apply(Op::Pad, {x}, {{"pads", std::move(pads)}, {"mode", mode}, {"value", value}});
}
Tensor squeeze(const Tensor& x, Ints axes) {
  return apply(Op::Squeeze, {x}, {{"axes", std::move(axes)}});
}
Tensor unsqueeze(const Tensor& x, Ints axes) {
  return apply(Op::Unsqueeze, {x}, {{"axes", std::move(axes)}});
}
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  return apply(Op::Flatten, {x}, {{"start_dim", start_dim}, {"end_dim", end_dim}});
}
std::vector<Tensor> split(const Tensor& x, int64_t axis, Ints sizes) {
  return apply_multi(Op::Split, {x}, {{"axis", axis}, {"sizes", std::move(sizes)}});
}
Tensor gather(const Tensor& x, const Tensor& indices, int64_t axis) {
  return apply(Op::Gather, {x, indices}, {{"axis", axis}});
}
Tensor gather_elements(const Tensor& x, const Tensor& indices, int64_t axis) {
  return apply(Op::GatherElements, {x, indices}, {{"axis", axis}});
}
Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index) {
  return apply(Op::IndexSelect, {x, index}, {{"axis", axis}});
}
Tensor resize(const Tensor& x, const Shape& sizes, const std::string& mode,
              const std::string& coord_mode, const std::string& nearest_mode) {
  Shape in = x.shape();
  KILN_CHECK(sizes.size() == in.size(), "resize: sizes ", shape_to_string(sizes), " need one entry per dim of ",
             x.type().to_string());
  std::vector<double> scales;
  for (size_t i = 0; i < in.size(); ++i) {
    if (sizes[i] == in[i]) {
      scales.push_back(1.0);
      continue;
    }
    KILN_CHECK(sizes[i].is_constant() && in[i].is_constant() && in[i].constant() > 0, "resize: dim ",
               i, " goes from ", in[i].to_string(), " to ", sizes[i].to_string(),
               "; a resized dim must be static and non-empty");
    scales.push_back(double(sizes[i].constant()) / double(in[i].constant()));
  }
  return apply(Op::Resize, {x},
               {{"sizes", sizes}, {"scales", scales}, {"mode", mode}, {"coord_mode", coord_mode},
                {"nearest_mode", nearest_mode}});
}
Tensor tril(const Tensor& x, int64_t k) { return apply(Op::Tril, {x}, {{"k", k}}); }
Tensor triu(const Tensor& x, int64_t k) { return apply(Op::Triu, {x}, {{"k", k}}); }

// ---- contractions and neural-network ops ----

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Ints stride, Ints padding,
              Ints dilation, int64_t groups) {
  return apply(Op::Conv2d, {x, weight, bias},
               {{"strides", std::move(stride)}, {"pads", four_pads("conv2d", padding)},
                {"dilations", std::move(dilation)}, {"groups", groups}});
}
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Ints stride,
                        Ints padding, Ints output_padding, Ints dilation, int64_t groups) {
  return apply(Op::ConvTranspose2d, {x, weight, bias},
               {{"strides", std::move(stride)}, {"pads", four_pads("conv_transpose2d", padding)},
                {"output_padding", std::move(output_padding)}, {"dilations", std::move(dilation)},
                {"groups", groups}});
}
Tensor im2col(const Tensor& x, Ints kernel, Ints stride, Ints padding, Ints dilation) {
  return apply(Op::Im2Col, {x},
               {{"kernel", std::move(kernel)}, {"strides", std::move(stride)}, {"pads", four_pads("im2col", padding)},
                {"dilations", std::move(dilation)}});
}
Tensor max_pool2d(const Tensor& x, Ints kernel, Ints stride, Ints padding, Ints dilation,
                  bool ceil_mode) {
  if (stride.empty()) stride = kernel;
  return apply(Op::MaxPool2d, {x},
               {{"kernel", std::move(kernel)}, {"strides", std::move(stride)},
                {"pads", four_pads("max_pool2d", padding)}, {"dilations", std::move(dilation)},
                {"ceil_mode", int64_t(ceil_mode)}});
}
Tensor avg_pool2d(const Tensor& x, Ints kernel, Ints stride, Ints padding, bool ceil_mode,
                  bool count_include_pad) {
  if (stride.empty()) stride = kernel;
  return apply(Op::AvgPool2d, {x},
               {{"kernel", std::move(kernel)}, {"strides", std::move(stride)},
                {"pads", four_pads("avg_pool2d", padding)}, {"ceil_mode", int64_t(ceil_mode)},
                {"count_include_pad", int64_t(count_include_pad)}});
}
Tensor softmax(const Tensor& x, int64_t axis) { return apply(Op::Softmax, {x}, {{"axis", axis}}); }
Tensor log_softmax(const Tensor& x, int64_t axis) {
  return apply(Op::LogSoftmax, {x}, {{"axis", axis}});
}
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t axis,
                  double eps) {
  // Operands are positional: a bias without a weight needs a unit weight in front of it.
  Tensor w = weight;
  if (!w.defined() && bias.defined()) w = scalar_like(x, 1.0);
  return apply(Op::LayerNorm, {x, w, bias}, {{"axis", axis}, {"eps", eps}});
}
Tensor rms_norm(const Tensor& x, const Tensor& weight, int64_t axis, double eps) {
  return apply(Op::RmsNorm, {x, weight}, {{"axis", axis}, {"eps", eps}});
}
Tensor batch_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, const Tensor& mean,
                  const Tensor& var, double eps) {
  return apply(Op::BatchNorm, {x, scale, bias, mean, var}, {{"eps", eps}});
}
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                 bool causal, double scale) {
  return apply(Op::Attention, {q, k, v, mask}, {{"causal", int64_t(causal)}, {"scale", scale}});
}

}  // namespace kiln
