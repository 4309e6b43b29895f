// ONNX transformer and normalisation ops: Attention (opset 23/24), RotaryEmbedding,
// RMSNormalization, MeanVarianceNormalization, GroupNormalization and LRN. Why: the plain form of
// ONNX's Attention (no mask, padding lengths, softcap or qk output; a causal mask Kiln's alignment
// reproduces) becomes Kiln's attention op, so backends with a fused kernel run it; its other knobs
// (masks, softcap, upper-left causal alignment, four qk_matmul_output modes) are composed here from
// matmul, softmax, where and movement ops, step for step as the operator's function body. Both
// forms share the 3-D head split, the grouped-query head repeat and the KV cache concat.
#include <cmath>
#include <limits>

#include "frontend/onnx/importer.h"

namespace kiln::onnx_import {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Value* permute(NodeCtx& c, Value* x, std::vector<int64_t> perm) {
  return c.emit(Op::Permute, {x}, {{"perm", perm}});
}
Value* mul_s(NodeCtx& c, Value* x, double s) { return c.emit(Op::Mul, {x, c.scalar_like(x, s)}); }
int64_t static_dim(NodeCtx& c, const Value* v, int axis, const char* what) {
  auto d = v->type.shape[size_t(axis < 0 ? axis + v->type.rank() : axis)].maybe_constant();
  if (!d) c.unsupported(str(what, " must be static"));
  return *d;
}
Attrs reduce_attrs(std::vector<int64_t> axes) { return Attrs{{"axes", axes}, {"keepdim", int64_t(1)}}; }

// [B, S, H*D] -> [B, H, S, D]
Value* split_heads(NodeCtx& c, Value* x, int64_t heads, const char* what) {
  if (heads <= 0) c.fail(str("q_num_heads and kv_num_heads are required (> 0) for 3-D inputs"));
  int64_t hidden = static_dim(c, x, 2, what);
  if (hidden % heads != 0) c.fail(str(what, " hidden size ", hidden, " is not divisible by ", heads, " heads"));
  const Shape& s = x->type.shape;
  Value* r = c.reshape(x, {s[0], s[1], SymInt(heads), SymInt(hidden / heads)});
  return permute(c, r, {0, 2, 1, 3});
}

// Repeats each of the Hkv heads Hq/Hkv times, interleaved ([h0, h0, h1, h1, ...]).
Value* repeat_heads(NodeCtx& c, Value* x, int64_t reps) {
  if (reps == 1) return x;
  const Shape& s = x->type.shape;  // [B, Hkv, S, D]
  Value* u = c.reshape(x, {s[0], s[1], SymInt(1), s[2], s[3]});
  Value* e = c.emit(Op::Expand, {u}, {{"shape", Shape{s[0], s[1], SymInt(reps), s[2], s[3]}}});
  return c.reshape(e, {s[0], s[1] * SymInt(reps), s[2], s[3]});
}

// Kiln's fused attention kernels accumulate the softmax in f32 (the interpreter in double), so
// asking for f32 or for the input's own type changes nothing; other precisions stay composed.
bool softmax_precision_covered(const NodeCtx& c, DType dt) {
  if (!c.has_attr("softmax_precision")) return true;
  auto sp = dtype_from_onnx(int(c.attr_int("softmax_precision", 1)));
  return sp && (*sp == DType::F32 || *sp == dt);
}

// True when this ONNX Attention means exactly Kiln's attention op on q [B, H, Sq, D] and the
// cache-extended, head-repeated k and v: nothing that op lacks, and a causal mask that Kiln's
// bottom-right alignment reproduces.
bool plain_attention(const NodeCtx& c, const Value* q, const Value* k, const Value* v, int64_t past) {
  if (c.has_input(3) || c.has_input(6)) return false;  // attn_mask, nonpad_kv_seqlen
  if (c.attr_float("softcap", 0.0) != 0) return false;
  // The importer cannot tell whether a named output is consumed; only the composed form has the scores.
  if (c.wants_output(3)) return false;
  // ONNX multiplies Q and K by sqrt(scale) each (NaN when negative); Kiln reads scale 0 as 1/sqrt(D).
  if (c.has_attr("scale") && !(c.attr_float("scale", 0.0) > 0)) return false;
  if (!softmax_precision_covered(c, q->type.dtype)) return false;
  if (k->type.dtype != q->type.dtype || v->type.dtype != q->type.dtype) return false;
  const Shape &qs = q->type.shape, &ks = k->type.shape, &vs = v->type.shape;
  bool same_heads = qs[0] == ks[0] && qs[0] == vs[0] && qs[1] == ks[1] && qs[1] == vs[1];
  if (!same_heads || qs[3] != ks[3] || ks[2] != vs[2]) return false;
  // ONNX hides key j from query i when j > i + past; Kiln when j > i + (Skv - Sq).
  return c.attr_int("is_causal", 0) == 0 || SymInt(past) + qs[2] == ks[2];
}

// Kiln's op applies the scale once, in f32 or wider, where ONNX takes sqrt(scale) into Q and K.
Value* fused_attention(NodeCtx& c, Value* q, Value* k, Value* v) {
  double scale = c.has_attr("scale") ? c.attr_float("scale", 0.0) : 0.0;  // 0: 1/sqrt(head size)
  int64_t causal = c.attr_int("is_causal", 0) != 0 ? 1 : 0;
  return c.emit(Op::Attention, {q, k, v}, {{"causal", causal}, {"scale", scale}});
}

// The additive bias [.., Sq, Skv]: the mask (bool: false -> -inf; padded with -inf up to Skv),
// plus the causal mask (key j hidden from query i when j > i + past), plus nonpad_kv_seqlen.
// nullptr when there is none.
Value* attention_bias(NodeCtx& c, DType dt, int64_t sq, int64_t skv, int64_t past) {
  Value* bias = nullptr;
  if (c.has_input(3)) {
    Value* m = c.input(3);
    if (m->type.dtype == DType::Bool) {
      m = c.emit(Op::Where, {m, c.constant(HostTensor::scalar(dt, 0)), c.constant(HostTensor::scalar(dt, -kInf))});
    } else {
      m = c.cast(m, dt);
    }
    int64_t mlen = static_dim(c, m, -1, "the mask's last dim");
    if (mlen > skv) c.fail(str("attn_mask has ", mlen, " keys, more than the ", skv, " keys"));
    if (mlen < skv) {
      std::vector<int64_t> pads(size_t(2 * m->type.rank()), 0);
      pads.back() = skv - mlen;
      m = c.emit(Op::Pad, {m}, {{"pads", pads}, {"value", -kInf}});
    }
    bias = m;
  }
  if (c.attr_int("is_causal", 0) != 0) {
    HostTensor tri = HostTensor::zeros(dt, {sq, skv});
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < skv; ++j)
        if (j > i + past) tri.set_f64(i * skv + j, -kInf);
    Value* t = c.constant(tri);
    bias = bias ? c.emit(Op::Add, {bias, t}) : t;
  }
  if (c.has_input(6)) {  // nonpad_kv_seqlen [B]: keys at j >= len[b] are padding
    Value* len = c.input(6);
    int64_t b = static_dim(c, len, 0, "nonpad_kv_seqlen's length");
    HostTensor cols = HostTensor::zeros(len->type.dtype, {1, skv});
    for (int64_t j = 0; j < skv; ++j) cols.set_i64(j, j);
    Value* keep = c.emit(Op::Lt, {c.constant(cols), c.reshape(len, {SymInt(b), SymInt(1)})});
    Value* pad = c.emit(Op::Where, {keep, c.constant(HostTensor::scalar(dt, 0)), c.constant(HostTensor::scalar(dt, -kInf))});
    pad = c.reshape(pad, {SymInt(b), SymInt(1), SymInt(1), SymInt(skv)});
    bias = bias ? c.emit(Op::Add, {bias, pad}) : pad;
  }
  return bias;
}

// The operator's function body on q [B, Hq, Sq, D] and the head-repeated kk, vv: scores, bias,
// softcap, softmax (in softmax_precision), times V; also sets the qk_matmul_output (output 3).
Value* composed_attention(NodeCtx& c, Value* q, Value* kk, Value* vv, int64_t past) {
  DType dt = q->type.dtype;
  int64_t head_size = static_dim(c, q, 3, "the head size");
  double scale = c.has_attr("scale") ? c.attr_float("scale", 1.0) : 1.0 / std::sqrt(double(head_size));
  double root = std::sqrt(scale);  // applied to Q and K each, as the reference does
  Value* scores = c.emit(Op::MatMul, {mul_s(c, q, root), mul_s(c, permute(c, kk, {0, 1, 3, 2}), root)});

  int64_t sq = static_dim(c, q, 2, "the query length"), skv = static_dim(c, kk, 2, "the key length");
  Value* bias = attention_bias(c, dt, sq, skv, past);

  int64_t mode = c.attr_int("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) c.fail(str("qk_matmul_output_mode must be 0..3, got ", mode));
  Value* qk_out = scores;
  Value* biased = bias ? c.emit(Op::Add, {scores, bias}) : scores;
  if (mode == 1) qk_out = biased;
  double softcap = c.attr_float("softcap", 0.0);
  if (softcap > 0) biased = mul_s(c, c.emit(Op::Tanh, {mul_s(c, biased, 1.0 / softcap)}), softcap);
  if (mode == 2) qk_out = biased;
  Value* probs = biased;
  if (c.has_attr("softmax_precision")) {
    auto sp = dtype_from_onnx(int(c.attr_int("softmax_precision", 1)));
    if (!sp || !is_float(*sp)) c.unsupported("softmax_precision must be a floating-point type Kiln has");
    probs = c.cast(c.emit(Op::Softmax, {c.cast(probs, *sp)}, {{"axis", int64_t(-1)}}), dt);
  } else {
    probs = c.emit(Op::Softmax, {probs}, {{"axis", int64_t(-1)}});
  }
  if (mode == 3) qk_out = probs;
  c.set_output(3, qk_out);
  return c.emit(Op::MatMul, {probs, vv});
}

void attention(NodeCtx& c) {
  Value *q = c.input(0), *k = c.input(1), *v = c.input(2);
  int rank = q->type.rank();
  if (rank != 3 && rank != 4) c.fail("Q must be 3-D [B, S, hidden] or 4-D [B, H, S, D]");
  if (k->type.rank() != rank || v->type.rank() != rank) c.fail("Q, K and V must share a rank");
  if (!is_float(q->type.dtype)) c.fail("Q must be floating-point");
  if (rank == 3) {
    q = split_heads(c, q, c.attr_int("q_num_heads", 0), "Q");
    k = split_heads(c, k, c.attr_int("kv_num_heads", 0), "K");
    v = split_heads(c, v, c.attr_int("kv_num_heads", 0), "V");
  }
  // KV cache: present = concat(past, new) along the sequence axis.
  if (c.has_input(4) != c.has_input(5)) c.fail("past_key and past_value must be given together");
  int64_t past = 0;
  if (c.has_input(4)) {
    past = static_dim(c, c.input(4), 2, "past sequence length");
    k = c.emit(Op::Concat, {c.input(4), k}, {{"axis", int64_t(2)}});
    v = c.emit(Op::Concat, {c.input(5), v}, {{"axis", int64_t(2)}});
  }
  c.set_output(1, k);
  c.set_output(2, v);

  int64_t hq = static_dim(c, q, 1, "the number of query heads");
  int64_t hkv = static_dim(c, k, 1, "the number of key/value heads");
  if (hq % hkv != 0) c.fail(str(hq, " query heads are not a multiple of ", hkv, " key/value heads"));
  Value* kk = repeat_heads(c, k, hq / hkv);
  Value* vv = repeat_heads(c, v, hq / hkv);
  Value* y = plain_attention(c, q, kk, vv, past) ? fused_attention(c, q, kk, vv)
                                                 : composed_attention(c, q, kk, vv, past);  // [B, Hq, Sq, Dv]
  if (rank == 3) {
    const Shape& s = y->type.shape;
    y = c.reshape(permute(c, y, {0, 2, 1, 3}), {s[0], s[2], s[1] * s[3]});
  }
  c.set_output(0, y);
}

void rotary_embedding(NodeCtx& c) {
  Value* x = c.input(0);
  Value *cos = c.input(1), *sin = c.input(2);
  int rank = x->type.rank();
  if (rank != 3 && rank != 4) c.fail("input must be [B, S, hidden] or [B, H, S, D]");
  const Shape in_shape = x->type.shape;
  // Work in [B, S, H, D].
  if (rank == 4) {
    x = permute(c, x, {0, 2, 1, 3});
  } else {
    int64_t heads = c.attr_int("num_heads", 0);
    if (heads <= 0) c.fail("num_heads is required for 3-D input");
    int64_t hidden = static_dim(c, x, 2, "the hidden size");
    if (hidden % heads != 0) c.fail(str("hidden size ", hidden, " is not divisible by ", heads, " heads"));
    x = c.reshape(x, {in_shape[0], in_shape[1], SymInt(heads), SymInt(hidden / heads)});
  }
  const Shape s = x->type.shape;
  int64_t head = static_dim(c, x, 3, "the head size");
  int64_t rot = c.attr_int("rotary_embedding_dim", 0);
  if (rot == 0) rot = head;
  if (rot > head || rot % 2 != 0) c.fail(str("rotary_embedding_dim ", rot, " must be even and <= the head size ", head));
  int64_t half = rot / 2;
  if (c.has_input(3)) {  // caches are [max_pos, half]; pick rows by position -> [B, S, half]
    cos = c.emit(Op::Gather, {cos, c.input(3)}, {{"axis", int64_t(0)}});
    sin = c.emit(Op::Gather, {sin, c.input(3)}, {{"axis", int64_t(0)}});
  }
  if (cos->type.rank() != 3 || static_dim(c, cos, 2, "the cache width") != half)
    c.fail(str("cos/sin caches must be [B, S, ", half, "] after position lookup, got ", cos->type.to_string()));
  cos = c.reshape(cos, {s[0], s[1], SymInt(1), SymInt(half)});
  sin = c.reshape(sin, {s[0], s[1], SymInt(1), SymInt(half)});
  auto slice_last = [&](Value* v, int64_t start, int64_t end, int64_t step) {
    return c.emit(Op::Slice, {v}, {{"starts", std::vector<int64_t>{start}}, {"ends", std::vector<int64_t>{end}},
                                   {"axes", std::vector<int64_t>{3}}, {"steps", std::vector<int64_t>{step}}});
  };
  bool interleaved = c.attr_int("interleaved", 0) != 0;
  Value* x1 = interleaved ? slice_last(x, 0, rot, 2) : slice_last(x, 0, half, 1);
  Value* x2 = interleaved ? slice_last(x, 1, rot, 2) : slice_last(x, half, rot, 1);
  Value* real = c.emit(Op::Sub, {c.emit(Op::Mul, {cos, x1}), c.emit(Op::Mul, {sin, x2})});
  Value* imag = c.emit(Op::Add, {c.emit(Op::Mul, {sin, x1}), c.emit(Op::Mul, {cos, x2})});
  Value* rotated;
  if (interleaved) {  // [.., half, 2] -> [.., rot]: real and imag alternate
    Shape col = {s[0], s[1], s[2], SymInt(half), SymInt(1)};
    Value* pair = c.emit(Op::Concat, {c.reshape(real, col), c.reshape(imag, col)}, {{"axis", int64_t(4)}});
    rotated = c.reshape(pair, {s[0], s[1], s[2], SymInt(rot)});
  } else {
    rotated = c.emit(Op::Concat, {real, imag}, {{"axis", int64_t(3)}});
  }
  Value* out = rot == head ? rotated
                           : c.emit(Op::Concat, {rotated, slice_last(x, rot, head, 1)}, {{"axis", int64_t(3)}});
  c.set_output(0, rank == 4 ? permute(c, out, {0, 2, 1, 3}) : c.reshape(out, in_shape));
}

void rms_normalization(NodeCtx& c) {
  Value* x = c.input(0);
  Value* w = c.input(1);
  int axis = normalize_axis(c, c.attr_int("axis", -1), x->type.rank());
  if (c.attr_int("stash_type", 1) != 1) c.unsupported("stash_type other than float");
  Attrs a{{"axis", int64_t(axis)}, {"eps", c.attr_float("epsilon", 1e-5)}};
  w = c.cast(w, x->type.dtype);
  if (w->type.rank() <= x->type.rank() - axis) {
    c.set_output(0, c.emit(Op::RmsNorm, {x, w}, a));
  } else {  // a scale with more dims than the normalised ones still broadcasts against Y
    c.set_output(0, c.emit(Op::Mul, {c.emit(Op::RmsNorm, {x}, a), w}));
  }
}

// (x - mean) / (sqrt(mean(x^2) - mean(x)^2) + 1e-9) over `axes`, as the ONNX function body.
void mean_variance_normalization(NodeCtx& c) {
  Value* x = c.input(0);
  std::vector<int64_t> axes = c.attr_ints("axes", {0, 2, 3});
  for (auto& ax : axes) ax = normalize_axis(c, ax, x->type.rank());
  Value* mean = c.emit(Op::ReduceMean, {x}, reduce_attrs(axes));
  Value* mean_sq = c.emit(Op::ReduceMean, {c.emit(Op::Mul, {x, x})}, reduce_attrs(axes));
  Value* var = c.emit(Op::Sub, {mean_sq, c.emit(Op::Mul, {mean, mean})});
  Value* std_eps = c.emit(Op::Add, {c.emit(Op::Sqrt, {var}), c.scalar_like(x, 1e-9)});
  c.set_output(0, c.emit(Op::Div, {c.emit(Op::Sub, {x, mean}), std_eps}));
}

// Normalise each of num_groups channel groups over (channels in group, spatial), then apply the
// per-channel scale and bias (opset 21; opset 18's per-group scale is refused).
void group_normalization(NodeCtx& c) {
  Value* x = c.input(0);
  int rank = x->type.rank();
  if (rank < 3) c.fail("input must be [N, C, spatial...]");
  if (c.opset() < 21) c.unsupported("GroupNormalization before opset 21 (per-group scale and bias)");
  if (c.attr_int("stash_type", 1) != 1) c.unsupported("stash_type other than float");
  int64_t groups = c.attr_int("num_groups", 0);
  int64_t ch = static_dim(c, x, 1, "the channel count");
  if (groups <= 0 || ch % groups != 0) c.fail(str("num_groups ", groups, " must divide the ", ch, " channels"));
  const Shape s = x->type.shape;
  SymInt rest(1);
  for (int i = 2; i < rank; ++i) rest = rest * s[size_t(i)];
  Value* g = c.reshape(x, {s[0], SymInt(groups), SymInt(ch / groups) * rest});
  Value* norm = c.emit(Op::LayerNorm, {g}, {{"axis", int64_t(2)}, {"eps", c.attr_float("epsilon", 1e-5)}});
  Value* y = c.reshape(norm, s);
  Shape per_channel(size_t(rank - 1), SymInt(1));
  per_channel[0] = SymInt(ch);
  y = c.emit(Op::Mul, {y, c.reshape(c.cast(c.input(1), x->type.dtype), per_channel)});
  c.set_output(0, c.emit(Op::Add, {y, c.reshape(c.cast(c.input(2), x->type.dtype), per_channel)}));
}

// y = x / (bias + alpha/size * sum of x^2 over the channel window)^beta, the window for channel
// c being [c - floor((size-1)/2), c + ceil((size-1)/2)] clipped to the channels.
void lrn(NodeCtx& c) {
  Value* x = c.input(0);
  int rank = x->type.rank();
  if (rank < 3) c.fail("input must be [N, C, spatial...]");
  int64_t size = c.attr_int("size", 0);
  if (size <= 0) c.fail("size must be positive");
  double alpha = c.attr_float("alpha", 1e-4), beta = c.attr_float("beta", 0.75), bias = c.attr_float("bias", 1.0);
  int64_t ch = static_dim(c, x, 1, "the channel count");
  int64_t before = (size - 1) / 2, after = size - 1 - before;
  Value* sq = c.emit(Op::Mul, {x, x});
  std::vector<int64_t> pads(size_t(2 * rank), 0);
  pads[1] = before;
  pads[size_t(rank + 1)] = after;
  Value* padded = c.emit(Op::Pad, {sq}, {{"pads", pads}});
  Value* sum = nullptr;
  for (int64_t o = 0; o < size; ++o) {
    Value* part = c.emit(Op::Slice, {padded}, {{"starts", std::vector<int64_t>{o}}, {"ends", std::vector<int64_t>{o + ch}},
                                               {"axes", std::vector<int64_t>{1}}});
    sum = sum ? c.emit(Op::Add, {sum, part}) : part;
  }
  Value* denom = c.emit(Op::Add, {mul_s(c, sum, alpha / double(size)), c.scalar_like(x, bias)});
  c.set_output(0, c.emit(Op::Div, {x, c.emit(Op::Pow, {denom, c.scalar_like(x, beta)})}));
}

}  // namespace

void register_transformer_ops(OpRegistry& r) {
  r["Attention"] = attention;
  r["RotaryEmbedding"] = rotary_embedding;
  r["RMSNormalization"] = rms_normalization;
  r["MeanVarianceNormalization"] = mean_variance_normalization;
  r["GroupNormalization"] = group_normalization;
  r["LRN"] = lrn;
}

}  // namespace kiln::onnx_import
