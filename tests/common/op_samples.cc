// The sample table behind op_samples(): one or more instances of every op at odd sizes.
#include "common/op_samples.h"

#include <cmath>

#include "kiln/error.h"

namespace kiln::testing {

namespace {
using Ints = std::vector<int64_t>;
TensorType T(DType d, Shape s) { return TensorType{d, std::move(s), Device::CPU}; }
std::string dn(DType d) { return std::string(dtype_name(d)); }

const std::vector<DType> kFloats = {DType::F32, DType::F64, DType::F16, DType::BF16};
const std::vector<DType> kNumeric = {DType::F32, DType::F64, DType::F16, DType::BF16,
                                     DType::I8,  DType::I16, DType::I32, DType::I64, DType::U8};

void add(std::vector<OpSample>& v, std::string label, Op op, std::vector<TensorType> in, Attrs attrs = {},
         std::vector<InputRange> ranges = {}, bool nan = false) {
  v.push_back(OpSample{std::move(label), op, std::move(in), std::move(attrs), std::move(ranges), nan});
}

std::vector<OpSample> build() {
  std::vector<OpSample> v;
  // Unary float ops, with domains that keep results finite.
  struct U { Op op; InputRange r; Attrs attrs; std::string tag; };
  std::vector<U> unary_float = {
      {Op::Exp, {-3, 3}, {}, ""},          {Op::Log, {0.1, 5}, {}, ""},
      {Op::Sqrt, {0, 5}, {}, ""},          {Op::Rsqrt, {0.1, 5}, {}, ""},
      {Op::Reciprocal, {0.25, 4}, {}, ""}, {Op::Tanh, {-3, 3}, {}, ""},
      {Op::Sigmoid, {-6, 6}, {}, ""},      {Op::Erf, {-3, 3}, {}, ""},
      {Op::Gelu, {-4, 4}, {}, ""},         {Op::Gelu, {-4, 4}, {{"approximate", std::string("tanh")}}, "/tanh"},
      {Op::Silu, {-5, 5}, {}, ""},         {Op::Sin, {-4, 4}, {}, ""},
      {Op::Cos, {-4, 4}, {}, ""},          {Op::Floor, {-5, 5}, {}, ""},
      {Op::Ceil, {-5, 5}, {}, ""},         {Op::Round, {-5, 5}, {}, ""},
      {Op::Asin, {-0.95, 0.95}, {}, ""},   {Op::Acos, {-0.95, 0.95}, {}, ""},
      {Op::Atan, {-4, 4}, {}, ""},         {Op::Sinh, {-3, 3}, {}, ""},
      {Op::Cosh, {-3, 3}, {}, ""},         {Op::Asinh, {-4, 4}, {}, ""},
      {Op::Acosh, {1.05, 5}, {}, ""},      {Op::Atanh, {-0.9, 0.9}, {}, ""},
  };
  for (const auto& u : unary_float)
    for (DType d : kFloats)
      add(v, str(op_name(u.op), u.tag, "/", dn(d)), u.op, {T(d, {3, 7})}, u.attrs, {u.r});
  for (Op op : {Op::Neg, Op::Abs, Op::Relu, Op::Sign})
    for (DType d : kNumeric)
      if (!(d == DType::U8 && op == Op::Neg)) add(v, str(op_name(op), "/", dn(d)), op, {T(d, {5, 3})});
  for (DType d : {DType::F32, DType::F16, DType::I32})
    add(v, str("clamp/", dn(d)), Op::Clamp, {T(d, {13})}, {{"min", -1.0}, {"max", 1.5}}, {{-3, 3}});
  add(v, "clamp/min_only/f64", Op::Clamp, {T(DType::F64, {4, 3})}, {{"min", 0.25}});
  add(v, "not/bool", Op::Not, {T(DType::Bool, {9})});
  for (DType d : kFloats) add(v, str("isnan/", dn(d)), Op::IsNan, {T(d, {4, 5})}, {}, {}, true);
  struct C { DType from, to; };
  for (C c : std::vector<C>{{DType::F32, DType::I32}, {DType::F32, DType::F16}, {DType::BF16, DType::F32},
                            {DType::I64, DType::F32}, {DType::F32, DType::Bool}, {DType::Bool, DType::F32},
                            {DType::F64, DType::BF16}, {DType::I32, DType::I8}, {DType::F16, DType::I64}})
    add(v, str("cast/", dn(c.from), "_to_", dn(c.to)), Op::Cast, {T(c.from, {3, 5})}, {{"dtype", c.to}},
        {{-100, 100}});

  // Binary arithmetic with broadcasting.
  for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Maximum, Op::Minimum}) {
    for (DType d : kNumeric)
      add(v, str(op_name(op), "/bcast/", dn(d)), op, {T(d, {4, 1, 5}), T(d, {3, 1})}, {}, {{-9, 9}, {-9, 9}},
          op == Op::Maximum || op == Op::Minimum);
    add(v, str(op_name(op), "/scalar/f32"), op, {T(DType::F32, {7}), T(DType::F32, {})});
  }
  for (DType d : kNumeric)
    add(v, str("div/", dn(d)), Op::Div, {T(d, {3, 4}), T(d, {4})}, {}, {{-20, 20}, {1, 6, true}});
  add(v, "div/signed_divisor/i32", Op::Div, {T(DType::I32, {6, 5})}, {}, {{-20, 20}});
  v.back().input_types.push_back(T(DType::I32, {6, 5}));
  v.back().ranges.push_back({-7, 7, true});
  for (DType d : kFloats) add(v, str("pow/", dn(d)), Op::Pow, {T(d, {2, 5}), T(d, {5})}, {}, {{0.1, 3}, {-2, 2}});
  add(v, "pow/i32", Op::Pow, {T(DType::I32, {6}), T(DType::I32, {6})}, {}, {{-3, 3}, {0, 4}});
  for (int64_t fm : {0, 1})
    for (DType d : {DType::F32, DType::F64, DType::I32, DType::I64})
      add(v, str("mod/fmod", fm, "/", dn(d)), Op::Mod, {T(d, {4, 6}), T(d, {6})}, {{"fmod", fm}},
          {{-20, 20}, {-7, 7, true}});
  for (Op op : {Op::Eq, Op::Ne, Op::Lt, Op::Le, Op::Gt, Op::Ge})
    for (DType d : {DType::F32, DType::I64, DType::F16})
      add(v, str(op_name(op), "/", dn(d)), op, {T(d, {3, 1}), T(d, {1, 4})}, {}, {{-2, 2}, {-2, 2}});
  for (Op op : {Op::And, Op::Or, Op::Xor})
    add(v, str(op_name(op), "/bool"), op, {T(DType::Bool, {2, 5}), T(DType::Bool, {5})});
  for (DType d : {DType::I8, DType::I16, DType::I32, DType::I64, DType::U8}) {
    for (Op op : {Op::BitAnd, Op::BitOr, Op::BitXor})
      add(v, str(op_name(op), "/", dn(d)), op, {T(d, {3, 1}), T(d, {1, 5})}, {}, {{-100, 100}, {-100, 100}});
    add(v, str("bit_not/", dn(d)), Op::BitNot, {T(d, {7})}, {}, {{-100, 100}});
    for (int64_t left : {0, 1})
      add(v, str("bit_shift/left", left, "/", dn(d)), Op::BitShift, {T(d, {2, 5}), T(d, {5})}, {{"left", left}},
          {{-100, 100}, {0, 7}});
  }
  for (DType d : {DType::F32, DType::F64}) add(v, str("det/", dn(d)), Op::Det, {T(d, {2, 3, 3})}, {}, {{-2, 2}});
  add(v, "det/1x1/f32", Op::Det, {T(DType::F32, {5, 1, 1})});
  for (DType d : {DType::F32, DType::I32, DType::BF16})
    add(v, str("where/", dn(d)), Op::Where, {T(DType::Bool, {3, 1}), T(d, {1, 4}), T(d, {3, 4})});

  // Reductions.
  for (Op op : {Op::ReduceSum, Op::ReduceMean, Op::ReduceMax, Op::ReduceMin, Op::ReduceProd}) {
    std::vector<DType> dts = {DType::F32, DType::F64, DType::F16, DType::BF16};
    if (op != Op::ReduceMean) dts.push_back(DType::I32);
    for (DType d : dts)
      add(v, str(op_name(op), "/axis1/", dn(d)), op, {T(d, {3, 5, 7})}, {{"axes", Ints{1}}},
          {{op == Op::ReduceProd ? 0.5 : -3.0, op == Op::ReduceProd ? 1.5 : 3.0}});
    add(v, str(op_name(op), "/all_keepdim/f32"), op, {T(DType::F32, {3, 5, 7})}, {{"keepdim", int64_t(1)}},
        {{0.8, 1.2}});
    add(v, str(op_name(op), "/axes02/f32"), op, {T(DType::F32, {3, 5, 7})}, {{"axes", Ints{0, -1}}});
  }
  for (Op op : {Op::ArgMax, Op::ArgMin}) {
    add(v, str(op_name(op), "/axis1/f32"), op, {T(DType::F32, {4, 6})}, {{"axis", int64_t(1)}});
    add(v, str(op_name(op), "/axis0_keep/i32"), op, {T(DType::I32, {4, 6})}, {{"keepdim", int64_t(1)}},
        {{-3, 3}});
  }

  // Movement and indexing.
  for (DType d : {DType::F32, DType::I64, DType::BF16})
    add(v, str("reshape/", dn(d)), Op::Reshape, {T(d, {2, 3, 4})}, {{"shape", Shape{4, -1}}});
  add(v, "permute/f32", Op::Permute, {T(DType::F32, {2, 3, 5})}, {{"perm", Ints{2, 0, 1}}});
  add(v, "permute/f16", Op::Permute, {T(DType::F16, {3, 7})}, {{"perm", Ints{1, 0}}});
  add(v, "expand/f32", Op::Expand, {T(DType::F32, {3, 1})}, {{"shape", Shape{2, 3, 5}}});
  add(v, "slice/steps/f32", Op::Slice, {T(DType::F32, {5, 7})},
      {{"starts", Ints{1, -1}}, {"ends", Ints{4, -8}}, {"steps", Ints{2, -2}}});
  add(v, "slice/axes/i32", Op::Slice, {T(DType::I32, {4, 9, 3})},
      {{"starts", Ints{2}}, {"ends", Ints{int64_t(1) << 62}}, {"axes", Ints{1}}});
  add(v, "concat/f32", Op::Concat, {T(DType::F32, {2, 3}), T(DType::F32, {2, 1}), T(DType::F32, {2, 4})},
      {{"axis", int64_t(1)}});
  add(v, "concat/i64", Op::Concat, {T(DType::I64, {1, 3}), T(DType::I64, {2, 3})}, {{"axis", int64_t(0)}});
  for (const char* mode : {"constant", "reflect", "edge"})
    add(v, str("pad/", mode, "/f32"), Op::Pad, {T(DType::F32, {3, 5})},
        {{"pads", Ints{1, 2, 2, 0}}, {"mode", std::string(mode)}, {"value", 1.5}});
  add(v, "pad/crop/f32", Op::Pad, {T(DType::F32, {4, 6})}, {{"pads", Ints{-1, 1, 0, -2}}});
  add(v, "squeeze/f32", Op::Squeeze, {T(DType::F32, {1, 3, 1, 2})}, {{"axes", Ints{0, 2}}});
  add(v, "squeeze/all/f32", Op::Squeeze, {T(DType::F32, {1, 3, 1})});
  add(v, "unsqueeze/f32", Op::Unsqueeze, {T(DType::F32, {3, 2})}, {{"axes", Ints{0, 3}}});
  add(v, "flatten/f32", Op::Flatten, {T(DType::F32, {2, 3, 4, 5})},
      {{"start_dim", int64_t(1)}, {"end_dim", int64_t(2)}});
  add(v, "split/f32", Op::Split, {T(DType::F32, {7, 4})}, {{"axis", int64_t(0)}, {"sizes", Ints{2, 5}}});
  add(v, "split/axis1/i32", Op::Split, {T(DType::I32, {3, 6})}, {{"axis", int64_t(1)}, {"sizes", Ints{1, 2, 3}}});
  add(v, "gather/f32", Op::Gather, {T(DType::F32, {5, 4}), T(DType::I64, {2, 3})}, {{"axis", int64_t(0)}},
      {{}, {-5, 4}});
  add(v, "gather/axis1/i32idx", Op::Gather, {T(DType::F16, {3, 6, 2}), T(DType::I32, {4})},
      {{"axis", int64_t(1)}}, {{}, {0, 5}});
  add(v, "gather_elements/f32", Op::GatherElements, {T(DType::F32, {3, 4}), T(DType::I64, {3, 2})},
      {{"axis", int64_t(1)}}, {{}, {-4, 3}});
  add(v, "index_select/f32", Op::IndexSelect, {T(DType::F32, {5, 3}), T(DType::I64, {4})},
      {{"axis", int64_t(0)}}, {{}, {0, 4}});
  for (int64_t k : {-1, 0, 2}) {
    add(v, str("tril/k", k, "/f32"), Op::Tril, {T(DType::F32, {2, 4, 5})}, {{"k", k}});
    add(v, str("triu/k", k, "/i32"), Op::Triu, {T(DType::I32, {4, 5})}, {{"k", k}});
  }

  // Contractions and neural-network ops.
  for (DType d : kFloats) add(v, str("matmul/batch/", dn(d)), Op::MatMul, {T(d, {2, 3, 5}), T(d, {5, 4})});
  add(v, "matmul/vec_mat/f32", Op::MatMul, {T(DType::F32, {5}), T(DType::F32, {5, 3})});
  add(v, "matmul/mat_vec/f32", Op::MatMul, {T(DType::F32, {4, 5}), T(DType::F32, {5})});
  add(v, "matmul/bcast/f32", Op::MatMul, {T(DType::F32, {3, 1, 4, 6}), T(DType::F32, {2, 6, 5})});
  add(v, "matmul/i32", Op::MatMul, {T(DType::I32, {3, 4}), T(DType::I32, {4, 2})}, {}, {{-5, 5}, {-5, 5}});
  for (DType d : {DType::F32, DType::F64, DType::BF16})
    add(v, str("conv2d/groups/", dn(d)), Op::Conv2d, {T(d, {2, 4, 9, 11}), T(d, {6, 2, 3, 3}), T(d, {6})},
        {{"groups", int64_t(2)}, {"strides", Ints{2, 1}}, {"pads", Ints{1, 0, 1, 2}}, {"dilations", Ints{1, 2}}});
  add(v, "conv2d/plain/f32", Op::Conv2d, {T(DType::F32, {1, 3, 7, 7}), T(DType::F32, {5, 3, 1, 1})});
  // Channels-last depthwise (the CUDA target's channels-last pass writes these): x [N, H, W, C].
  for (DType d : {DType::F32, DType::BF16})
    add(v, str("conv2d/depthwise_nhwc/", dn(d)), Op::Conv2d, {T(d, {2, 9, 11, 6}), T(d, {6, 1, 3, 3}), T(d, {6})},
        {{"groups", int64_t(6)}, {"pads", Ints{1, 0, 2, 1}}, {"layout", std::string("NHWC")}});
  for (DType d : kFloats)
    add(v, str("im2col/strided_padded/", dn(d)), Op::Im2Col, {T(d, {2, 3, 9, 8})},
        {{"kernel", Ints{3, 2}}, {"strides", Ints{2, 1}}, {"pads", Ints{1, 0, 2, 1}}, {"dilations", Ints{1, 2}}});
  add(v, "max_pool2d/ceil/f32", Op::MaxPool2d, {T(DType::F32, {2, 3, 9, 10})},
      {{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"ceil_mode", int64_t(1)}});
  add(v, "max_pool2d/dilated/f16", Op::MaxPool2d, {T(DType::F16, {1, 2, 8, 7})},
      {{"kernel", Ints{2, 3}}, {"dilations", Ints{2, 1}}});
  for (int64_t cip : {0, 1})
    add(v, str("avg_pool2d/cip", cip, "/f32"), Op::AvgPool2d, {T(DType::F32, {2, 3, 9, 10})},
        {{"kernel", Ints{3, 2}}, {"strides", Ints{2, 3}}, {"pads", Ints{1, 1, 1, 1}},
         {"count_include_pad", cip}});
  for (DType d : kFloats) add(v, str("global_avg_pool/", dn(d)), Op::GlobalAvgPool, {T(d, {2, 3, 5, 7})});
  for (Op op : {Op::Softmax, Op::LogSoftmax})
    for (DType d : kFloats) {
      add(v, str(op_name(op), "/last/", dn(d)), op, {T(d, {3, 13})}, {}, {{-5, 5}});
      add(v, str(op_name(op), "/axis0/", dn(d)), op, {T(d, {5, 3})}, {{"axis", int64_t(0)}});
    }
  for (DType d : kFloats) {
    add(v, str("layer_norm/affine/", dn(d)), Op::LayerNorm, {T(d, {3, 5, 7}), T(d, {7}), T(d, {7})});
    add(v, str("layer_norm/axis1/", dn(d)), Op::LayerNorm, {T(d, {3, 5, 7})}, {{"axis", int64_t(1)}});
    add(v, str("rms_norm/", dn(d)), Op::RmsNorm, {T(d, {4, 9}), T(d, {9})});
    add(v, str("batch_norm/", dn(d)), Op::BatchNorm,
        {T(d, {2, 3, 4, 5}), T(d, {3}), T(d, {3}), T(d, {3}), T(d, {3})}, {},
        {{}, {}, {}, {}, {0.5, 2}});
    add(v, str("attention/causal/", dn(d)), Op::Attention,
        {T(d, {2, 3, 5, 8}), T(d, {2, 3, 7, 8}), T(d, {2, 3, 7, 6})}, {{"causal", int64_t(1)}});
  }
  add(v, "attention/boolmask/f32", Op::Attention,
      {T(DType::F32, {2, 5, 4}), T(DType::F32, {2, 6, 4}), T(DType::F32, {2, 6, 3}), T(DType::Bool, {5, 6})},
      {{"scale", 0.3}});
  add(v, "attention/floatmask/f32", Op::Attention,
      {T(DType::F32, {1, 3, 4}), T(DType::F32, {1, 3, 4}), T(DType::F32, {1, 3, 4}), T(DType::F32, {1, 3, 3})});

  // Sources.
  add(v, "constant/f32", Op::Constant, {},
      {{"value", HostTensor::from_doubles(DType::F32, {2, 3}, {1.5, -2, 0.25, 3, 7, -0.125})}});
  add(v, "constant/large/i32", Op::Constant, {}, {{"value", HostTensor::random(DType::I32, {5, 7}, 3, -50, 50)}});
  add(v, "arange/f32", Op::Arange, {}, {{"size", Shape{7}}, {"start", 2.0}, {"step", 0.5}, {"dtype", DType::F32}});
  add(v, "arange/i64", Op::Arange, {}, {{"size", Shape{11}}});
  add(v, "full/bf16", Op::Full, {}, {{"shape", Shape{3, 4}}, {"value", 2.75}, {"dtype", DType::BF16}});
  add(v, "random_uniform/f32", Op::RandomUniform, {},
      {{"shape", Shape{5, 7}}, {"low", -1.0}, {"high", 3.0}, {"seed", int64_t(42)}});
  add(v, "random_normal/f64", Op::RandomNormal, {},
      {{"shape", Shape{13}}, {"mean", 1.0}, {"std", 0.5}, {"seed", int64_t(7)}, {"dtype", DType::F64}});
  add(v, "shape_of/f32", Op::ShapeOf, {T(DType::F32, {2, 3, 5})});

  // Ops added for the ONNX frontend.
  for (DType d : {DType::F32, DType::F64, DType::I32})
    add(v, str("cumsum/", dn(d)), Op::CumSum, {T(d, {3, 7})}, {{"axis", int64_t(1)}});
  add(v, "cumsum/exclusive_reverse/f32", Op::CumSum, {T(DType::F32, {5, 4})},
      {{"axis", int64_t(0)}, {"exclusive", int64_t(1)}, {"reverse", int64_t(1)}});
  add(v, "topk/f32", Op::TopK, {T(DType::F32, {3, 11})}, {{"k", int64_t(4)}});
  add(v, "topk/smallest_axis0/i32", Op::TopK, {T(DType::I32, {7, 3})},
      {{"k", int64_t(2)}, {"axis", int64_t(0)}, {"largest", int64_t(0)}}, {{-50, 50}});
  // Selection and sampling (docs/sampling.md).
  add(v, "sort/f32", Op::Sort, {T(DType::F32, {3, 11})}, {}, {}, true);
  add(v, "sort/descending_axis0/i32", Op::Sort, {T(DType::I32, {7, 3})}, {{"axis", int64_t(0)}, {"descending", int64_t(1)}},
      {{-5, 5}});
  add(v, "sort/descending/f16", Op::Sort, {T(DType::F16, {2, 67})}, {{"descending", int64_t(1)}}, {{-4, 4}});
  add(v, "argsort/f64", Op::ArgSort, {T(DType::F64, {4, 53})}, {{"descending", int64_t(1)}});
  add(v, "argsort/axis0/i64", Op::ArgSort, {T(DType::I64, {9, 2})}, {{"axis", int64_t(0)}}, {{-3, 3}});
  const InputRange seeds{0, 1e9}, steps{0, 1000};
  add(v, "sample/top_k_top_p/f32", Op::Sample, {T(DType::F32, {5, 37}), T(DType::I64, {5}), T(DType::I64, {5})},
      {{"temperature", 0.8}, {"top_k", int64_t(6)}, {"top_p", 0.9}}, {{-3, 3}, seeds, steps});
  add(v, "sample/unfiltered/bf16", Op::Sample, {T(DType::BF16, {3, 50}), T(DType::I64, {3}), T(DType::I64, {3})}, {},
      {{-2, 2}, seeds, steps});
  add(v, "sample/greedy/f64", Op::Sample, {T(DType::F64, {4, 19}), T(DType::I64, {4}), T(DType::I64, {4})},
      {{"temperature", 0.0}}, {{-3, 3}, seeds, steps});
  add(v, "sample/per_row_penalties/f16", Op::Sample,
      {T(DType::F16, {4, 29}), T(DType::I64, {4}), T(DType::I64, {4}), T(DType::F32, {4}), T(DType::I64, {4}),
       T(DType::F32, {4}), T(DType::F32, {4}), T(DType::I64, {4, 6})},
      {{"repetition_penalty", 1.3}, {"frequency_penalty", 0.2}, {"presence_penalty", 0.1}},
      {{-3, 3}, seeds, steps, {0.5, 1.5}, {0, 8}, {0.5, 1}, {0, 0.3}, {-1, 28}});
  add(v, "conv_transpose2d/f32", Op::ConvTranspose2d,
      {T(DType::F32, {2, 4, 5, 6}), T(DType::F32, {4, 3, 3, 3}), T(DType::F32, {6})},
      {{"strides", Ints{2, 1}}, {"pads", Ints{1, 0, 1, 1}}, {"output_padding", Ints{1, 0}}, {"groups", int64_t(2)}});
  add(v, "resize/nearest/f32", Op::Resize, {T(DType::F32, {1, 2, 3, 5})},
      {{"sizes", Shape{1, 2, 7, 9}}, {"scales", std::vector<double>{1, 1, 7.0 / 3, 9.0 / 5}}});
  add(v, "resize/linear/f32", Op::Resize, {T(DType::F32, {1, 2, 4, 3})},
      {{"sizes", Shape{1, 2, 7, 8}}, {"scales", std::vector<double>{1, 1, 7.0 / 4, 8.0 / 3}}, {"mode", std::string("linear")}});
  return v;
}
}  // namespace

const std::vector<OpSample>& op_samples() {
  static const std::vector<OpSample> samples = build();
  return samples;
}

std::vector<OpSample> op_samples_for(Op op) {
  std::vector<OpSample> out;
  for (const auto& s : op_samples())
    if (s.op == op) out.push_back(s);
  return out;
}

std::unique_ptr<Graph> build_sample_graph(const OpSample& s) {
  auto g = std::make_unique<Graph>("sample");
  std::vector<Value*> ins;
  for (size_t i = 0; i < s.input_types.size(); ++i) ins.push_back(g->add_input(str("x", i), s.input_types[i]));
  g->set_outputs(g->add_node(s.op, ins, s.attrs));
  return g;
}

std::vector<HostTensor> sample_inputs(const OpSample& s, uint64_t seed) {
  std::vector<HostTensor> out;
  for (size_t i = 0; i < s.input_types.size(); ++i) {
    const TensorType& t = s.input_types[i];
    InputRange r = i < s.ranges.size() ? s.ranges[i] : InputRange{};
    if (!is_float(t.dtype) && r.lo == -2 && r.hi == 2) r = InputRange{-9, 9, r.avoid_zero};
    if (t.dtype == DType::U8) r.lo = std::max(r.lo, 0.0);
    HostTensor h = HostTensor::random(t.dtype, t.static_shape(), seed * 1000 + i, r.lo, r.hi);
    for (int64_t k = 0; k < h.numel(); ++k) {
      if (r.avoid_zero && h.get_f64(k) == 0) h.set_f64(k, r.hi > 1 ? 1 : r.hi);
      if (s.inject_nan && is_float(t.dtype) && k % 5 == 2) h.set_f64(k, NAN);
    }
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace kiln::testing
