// ONNX neural-network ops: MatMul, Gemm, Conv/ConvTranspose, pooling, normalisations, Einsum and
// Resize. Why: Kiln's conv and pooling are 2-D NCHW, so 1-D variants are lifted to 2-D here, and
// ONNX's auto_pad / output_shape conventions are turned into explicit pads.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "frontend/onnx/build_helpers.h"

namespace kiln::onnx_import {

namespace {

Value* permute(NodeCtx& c, Value* x, std::vector<int64_t> perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == int64_t(i);
  return identity ? x : c.emit(Op::Permute, {x}, {{"perm", perm}});
}

void gemm(NodeCtx& c) {
  Value* a = c.input(0);
  Value* b = c.input(1);
  if (a->type.rank() != 2 || b->type.rank() != 2) c.fail("A and B must be 2-D");
  if (c.attr_int("transA", 0)) a = permute(c, a, {1, 0});
  if (c.attr_int("transB", 0)) b = permute(c, b, {1, 0});
  double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
  Value* y = c.emit(Op::MatMul, {a, b});
  if (alpha != 1.0) y = c.emit(Op::Mul, {y, c.scalar_like(y, alpha)});
  if (c.has_input(2)) {
    Value* cc = c.input(2);
    if (beta != 1.0) cc = c.emit(Op::Mul, {cc, c.scalar_like(cc, beta)});
    y = c.emit(Op::Add, {y, cc});
  }
  c.set_output(0, y);
}

// Spatial parameters of a conv/pool node, lifted to 2-D.
std::vector<int64_t> kernel_from_weight(NodeCtx& c, Value* w) {
  std::vector<int64_t> k;
  for (int i = 2; i < w->type.rank(); ++i) {
    auto d = w->type.shape[size_t(i)].maybe_constant();
    if (!d) c.unsupported("a symbolic kernel size");
    k.push_back(*d);
  }
  return c.attr_ints("kernel_shape", k);
}

void conv(NodeCtx& c) {
  Value* x = c.input(0);
  Value* w = c.input(1);
  Window win = window_params(c, x, kernel_from_weight(c, w));
  std::vector<Value*> ops{lift(c, x, win.lifted), lift(c, w, win.lifted)};
  if (c.has_input(2)) ops.push_back(c.input(2));
  Value* y = c.emit(Op::Conv2d, ops, {{"strides", win.strides}, {"pads", win.pads}, {"dilations", win.dilations},
                                      {"groups", c.attr_int("group", 1)}});
  c.set_output(0, unlift(c, y, win.lifted));
}

// Why: Kiln's transposed conv is 2-D. A 3-D one is a 2-D one over (H, W) of every input depth
// slice, with the kD depth taps folded into the output channels, and then a constant
// [OD, D * kD] 0/1 matrix that adds the (d, kd) result into output depth d * sD + kd * dD - padD.
Value* conv_transpose3d(NodeCtx& c, Value* x, Value* w, const std::vector<int64_t>& strides,
                        const std::vector<int64_t>& dil, const std::vector<int64_t>& out_pad,
                        const std::vector<int64_t>& pads) {
  auto xs = static_shape_of(c, x, "input");
  auto ws = static_shape_of(c, w, "weight");
  if (ws.size() != 5) c.fail("weight must be [C, O/group, kD, kH, kW]");
  int64_t N = xs[0], C = xs[1], D = xs[2], groups = c.attr_int("group", 1);
  int64_t Og = ws[1], kD = ws[2];
  if (groups < 1 || C % groups != 0) c.fail(str("group (", groups, ") must divide the input channels (", C, ")"));
  if (ws[0] != C) c.fail(str("weight dim 0 (", ws[0], ") must equal the input channels (", C, ")"));
  if (strides[0] < 1 || dil[0] < 1) c.fail("strides and dilations must be positive");
  int64_t OD = strides[0] * (D - 1) + out_pad[0] + (kD - 1) * dil[0] + 1 - pads[0] - pads[3];
  if (OD < 0) c.fail("the output depth is negative");
  Value* slices = c.reshape(permute(c, x, {0, 2, 1, 3, 4}), {N * D, C, xs[3], xs[4]});
  Value* w2 = c.reshape(w, {C, Og * kD, ws[3], ws[4]});  // channel o * kD + kd
  Value* y = c.emit(Op::ConvTranspose2d, {slices, w2},
                    {{"strides", std::vector<int64_t>{strides[1], strides[2]}},
                     {"pads", std::vector<int64_t>{pads[1], pads[2], pads[4], pads[5]}},
                     {"dilations", std::vector<int64_t>{dil[1], dil[2]}},
                     {"output_padding", std::vector<int64_t>{out_pad[1], out_pad[2]}}, {"groups", groups}});
  int64_t O = groups * Og, OH = static_dim(c, y, 2, "output"), OW = static_dim(c, y, 3, "output");
  y = permute(c, c.reshape(y, {N, D, O, kD, OH * OW}), {0, 2, 1, 3, 4});
  std::vector<double> m = c.table({OD, D, kD}, "depth placement");
  for (int64_t d = 0; d < D; ++d)
    for (int64_t k = 0; k < kD; ++k) {
      int64_t od = d * strides[0] + k * dil[0] - pads[0];
      if (od >= 0 && od < OD) m[size_t(od * D * kD + d * kD + k)] = 1.0;
    }
  y = apply_axis_matrix(c, c.reshape(y, {N, O, D * kD, OH * OW}), 2, OD, m);
  y = c.reshape(y, {N, O, OD, OH, OW});
  if (c.has_input(2)) y = c.emit(Op::Add, {y, c.reshape(c.input(2), {O, 1, 1, 1})});
  return y;
}

void conv_transpose(NodeCtx& c) {
  Value* x = c.input(0);
  Value* w = c.input(1);
  int spatial = x->type.rank() - 2;
  std::vector<int64_t> kernel = kernel_from_weight(c, w);
  auto strides = c.attr_ints("strides", std::vector<int64_t>(size_t(std::max(spatial, 0)), 1));
  auto dil = c.attr_ints("dilations", std::vector<int64_t>(size_t(std::max(spatial, 0)), 1));
  auto out_pad = c.attr_ints("output_padding", std::vector<int64_t>(size_t(std::max(spatial, 0)), 0));
  auto pads = c.attr_ints("pads", std::vector<int64_t>(size_t(2 * std::max(spatial, 0)), 0));
  if (spatial < 1) c.fail("input must be [N, C, spatial...]");
  if (spatial > 3) c.unsupported(str(spatial, "-D transposed convolution (1-D to 3-D are supported)"));
  if (int(kernel.size()) != spatial || int(strides.size()) != spatial || int(dil.size()) != spatial ||
      int(out_pad.size()) != spatial || int(pads.size()) != 2 * spatial)
    c.fail("kernel_shape, strides, dilations, output_padding and pads must match the spatial rank");
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  auto output_shape = c.attr_ints("output_shape");
  if (!output_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (int i = 0; i < spatial; ++i) {
      auto in = x->type.shape[size_t(2 + i)].maybe_constant();
      if (!in) c.unsupported("output_shape/auto_pad on a symbolic spatial dim");
      if (!output_shape.empty() && int(output_shape.size()) < spatial) c.fail("output_shape is too short");
      int64_t want = !output_shape.empty() ? output_shape[output_shape.size() - size_t(spatial) + size_t(i)]
                                           : *in * strides[size_t(i)];
      int64_t total = strides[size_t(i)] * (*in - 1) + out_pad[size_t(i)] + (kernel[size_t(i)] - 1) * dil[size_t(i)] + 1 - want;
      if (total < 0) {  // the requested output is larger: the extra rows are output padding
        out_pad[size_t(i)] += -total;
        total = 0;
      }
      bool upper = auto_pad != "SAME_LOWER";
      pads[size_t(i)] = upper ? total / 2 : total - total / 2;
      pads[size_t(i + spatial)] = total - pads[size_t(i)];
    }
  } else if (auto_pad == "VALID") {
    std::fill(pads.begin(), pads.end(), 0);
  }
  if (spatial == 3) {
    c.set_output(0, conv_transpose3d(c, x, w, strides, dil, out_pad, pads));
    return;
  }
  bool lifted = spatial == 1;
  if (lifted) {
    strides = {1, strides[0]};
    dil = {1, dil[0]};
    out_pad = {0, out_pad[0]};
    pads = {0, pads[0], 0, pads[1]};
  }
  std::vector<Value*> ops{lift(c, x, lifted), lift(c, w, lifted)};
  if (c.has_input(2)) ops.push_back(c.input(2));
  Value* y = c.emit(Op::ConvTranspose2d, ops, {{"strides", strides}, {"pads", pads}, {"dilations", dil},
                                               {"output_padding", out_pad}, {"groups", c.attr_int("group", 1)}});
  c.set_output(0, unlift(c, y, lifted));
}

void pool(NodeCtx& c, bool is_max) {
  Value* x = c.input(0);
  auto dil = c.attr_ints("dilations");
  if (!is_max && std::any_of(dil.begin(), dil.end(), [](int64_t d) { return d != 1; })) {
    avg_pool_dilated(c);  // ops_vision.cc: per-axis averaging matrices
    return;
  }
  if (is_max && c.wants_output(1)) c.set_output(1, max_pool_indices(c));  // ops_vision.cc
  if (x->type.rank() == 5) {
    pool3d(c, is_max);  // ops_vision.cc: two 2-D pools
    return;
  }
  Window win = window_params(c, x, c.attr_ints("kernel_shape"));
  Attrs attrs{{"kernel", win.kernel}, {"strides", win.strides}, {"pads", win.pads}, {"ceil_mode", c.attr_int("ceil_mode", 0)}};
  if (is_max) {
    attrs.set("dilations", win.dilations);
  } else {
    for (int64_t d : win.dilations)
      if (d != 1) c.unsupported("AveragePool with dilations");
    attrs.set("count_include_pad", c.attr_int("count_include_pad", 0));
  }
  Value* y = c.emit(is_max ? Op::MaxPool2d : Op::AvgPool2d, {lift(c, x, win.lifted)}, attrs);
  c.set_output(0, unlift(c, y, win.lifted));
}

std::vector<int64_t> spatial_axes(const Value* x) {
  std::vector<int64_t> axes;
  for (int i = 2; i < x->type.rank(); ++i) axes.push_back(i);
  return axes;
}

void batch_norm(NodeCtx& c) {
  if (c.attr_int("training_mode", 0) != 0 || c.wants_output(1) || c.wants_output(2)) {
    batch_norm_training(c);  // ops_vision.cc
    return;
  }
  if (c.attr_int("spatial", 1) == 0) c.unsupported("BatchNormalization with spatial=0 (opset < 9)");
  c.set_output(0, c.emit(Op::BatchNorm, {c.input(0), c.input(1), c.input(2), c.input(3), c.input(4)},
                         {{"eps", c.attr_float("epsilon", 1e-5)}}));
}

void layer_norm(NodeCtx& c) {
  Value* x = c.input(0);
  int axis = normalize_axis(c, c.attr_int("axis", -1), x->type.rank());
  double eps = c.attr_float("epsilon", 1e-5);
  std::vector<Value*> ops{x, c.input(1)};
  if (c.has_input(2)) ops.push_back(c.input(2));
  c.set_output(0, c.emit(Op::LayerNorm, ops, {{"axis", int64_t(axis)}, {"eps", eps}}));
  if (c.wants_output(1) || c.wants_output(2)) {  // Mean and InvStdDev, kept as size-1 dims
    std::vector<int64_t> axes;
    for (int i = axis; i < x->type.rank(); ++i) axes.push_back(i);
    Attrs ra{{"axes", axes}, {"keepdim", int64_t(1)}};
    Value* mean = c.emit(Op::ReduceMean, {x}, ra);
    Value* d = c.emit(Op::Sub, {x, mean});
    Value* var = c.emit(Op::ReduceMean, {c.emit(Op::Mul, {d, d})}, ra);
    c.set_output(1, mean);
    c.set_output(2, c.emit(Op::Rsqrt, {c.emit(Op::Add, {var, c.scalar_like(var, eps)})}));
  }
}

void instance_norm(NodeCtx& c) {
  Value* x = c.input(0);
  if (x->type.rank() < 3) c.fail("input must be [N, C, spatial...]");
  double eps = c.attr_float("epsilon", 1e-5);
  Attrs ra{{"axes", spatial_axes(x)}, {"keepdim", int64_t(1)}};
  Value* mean = c.emit(Op::ReduceMean, {x}, ra);
  Value* d = c.emit(Op::Sub, {x, mean});
  Value* var = c.emit(Op::ReduceMean, {c.emit(Op::Mul, {d, d})}, ra);
  Value* y = c.emit(Op::Mul, {d, c.emit(Op::Rsqrt, {c.emit(Op::Add, {var, c.scalar_like(var, eps)})})});
  Shape per_channel(size_t(x->type.rank() - 1), SymInt(1));
  per_channel[0] = x->type.shape[1];
  y = c.emit(Op::Mul, {y, c.reshape(c.input(1), per_channel)});
  c.set_output(0, c.emit(Op::Add, {y, c.reshape(c.input(2), per_channel)}));
}

void lp_norm(NodeCtx& c) {
  Value* x = c.input(0);
  int axis = normalize_axis(c, c.attr_int("axis", -1), x->type.rank());
  int64_t p = c.attr_int("p", 2);
  Attrs ra{{"axes", std::vector<int64_t>{axis}}, {"keepdim", int64_t(1)}};
  Value* norm;
  if (p == 1) norm = c.emit(Op::ReduceSum, {c.emit(Op::Abs, {x})}, ra);
  else if (p == 2) norm = c.emit(Op::Sqrt, {c.emit(Op::ReduceSum, {c.emit(Op::Mul, {x, x})}, ra)});
  else c.fail("p must be 1 or 2");
  c.set_output(0, c.emit(Op::Div, {x, norm}));
}

// ---- Einsum: reduce letters used once, then contract operand pairs with permute+reshape+matmul.
struct Term {
  Value* v;
  std::string letters;
};

Term sum_out(NodeCtx& c, Term t, const std::set<char>& keep) {
  std::vector<int64_t> axes;
  std::string rest;
  for (size_t i = 0; i < t.letters.size(); ++i) {
    if (keep.count(t.letters[i])) rest += t.letters[i];
    else axes.push_back(int64_t(i));
  }
  if (axes.empty()) return t;
  return {c.emit(Op::ReduceSum, {t.v}, {{"axes", axes}}), rest};
}

Value* to_order(NodeCtx& c, const Term& t, const std::string& order) {
  std::vector<int64_t> perm;
  for (char ch : order) perm.push_back(int64_t(t.letters.find(ch)));
  return permute(c, t.v, perm);
}

Term contract(NodeCtx& c, Term a, Term b, const std::set<char>& keep) {
  std::string batch, contracted, a_free, b_free;
  for (char ch : a.letters) {
    bool in_b = b.letters.find(ch) != std::string::npos;
    if (in_b && keep.count(ch)) batch += ch;
    else if (in_b) contracted += ch;
    else a_free += ch;
  }
  for (char ch : b.letters)
    if (a.letters.find(ch) == std::string::npos) b_free += ch;
  auto dim = [&](const Term& t, char ch) { return t.v->type.shape[t.letters.find(ch)]; };
  auto prod = [&](const Term& t, const std::string& s) {
    SymInt p(1);
    for (char ch : s) p = p * dim(t, ch);
    return p;
  };
  Shape batch_dims;
  for (char ch : batch) batch_dims.push_back(dim(a, ch) == SymInt(1) ? dim(b, ch) : dim(a, ch));
  Shape sa, sb;
  for (char ch : batch) sa.push_back(dim(a, ch)), sb.push_back(dim(b, ch));
  sa.push_back(prod(a, a_free));
  sa.push_back(prod(a, contracted));
  sb.push_back(prod(b, contracted));
  sb.push_back(prod(b, b_free));
  Value* ma = c.reshape(to_order(c, a, batch + a_free + contracted), sa);
  Value* mb = c.reshape(to_order(c, b, batch + contracted + b_free), sb);
  Value* y = c.emit(Op::MatMul, {ma, mb});
  Shape out = batch_dims;
  for (char ch : a_free) out.push_back(dim(a, ch));
  for (char ch : b_free) out.push_back(dim(b, ch));
  return {c.reshape(y, out), batch + a_free + b_free};
}

// Why: a letter repeated in one operand ("ii") reads its diagonal. The two axes move to the end,
// merge into one of n * n, and a gather at 0, n + 1, 2 (n + 1), ... keeps the diagonal.
Term take_diagonals(NodeCtx& c, Term t) {
  for (size_t q = 0; q < t.letters.size(); ++q) {
    size_t p = t.letters.find(t.letters[q]);
    if (p == q) continue;
    int64_t n = static_dim(c, t.v, int(p), "einsum diagonal");
    if (static_dim(c, t.v, int(q), "einsum diagonal") != n)
      c.fail(str("letter '", t.letters[q], "' is repeated in an operand over dims of different sizes"));
    std::vector<int64_t> perm;
    std::string rest;
    Shape merged;
    for (size_t i = 0; i < t.letters.size(); ++i)
      if (i != p && i != q) perm.push_back(int64_t(i)), rest += t.letters[i], merged.push_back(t.v->type.shape[i]);
    perm.push_back(int64_t(p));
    perm.push_back(int64_t(q));
    merged.push_back(SymInt(n * n));
    std::vector<double> at;
    for (int64_t i = 0; i < n; ++i) at.push_back(double(i * (n + 1)));
    Value* flat = c.reshape(permute(c, t.v, perm), merged);
    Value* diag = c.emit(Op::Gather, {flat, const_of(c, DType::I64, {n}, at)}, {{"axis", int64_t(rest.size())}});
    return take_diagonals(c, {diag, rest + t.letters[q]});
  }
  return t;
}

// Why: "..." stands for the same leading batch dims in every operand (right-aligned, broadcast
// like numpy). Each of those dims gets a fresh letter, so the rest of einsum sees only letters;
// an operand's size-1 ellipsis dim is expanded to the other operands' size.
void expand_ellipses(NodeCtx& c, std::vector<std::string>& specs, std::string& out, bool explicit_out,
                     std::vector<Value*>& operands) {
  std::string fresh;
  std::string used;
  for (const auto& s : specs) used += s;
  used += out;
  for (char ch = 'A'; ch <= 'z'; ++ch)
    if (std::isalpha(static_cast<unsigned char>(ch)) && used.find(ch) == std::string::npos) fresh += ch;
  int ell_rank = 0;
  std::vector<int> ranks(specs.size(), 0);
  for (size_t i = 0; i < specs.size(); ++i) {
    size_t at = specs[i].find("...");
    if (at == std::string::npos) continue;
    if (specs[i].find("...", at + 3) != std::string::npos) c.fail(str("operand ", i, " has two ellipses"));
    ranks[i] = operands[i]->type.rank() - int(specs[i].size() - 3);
    if (ranks[i] < 0) c.fail(str("operand ", i, " has rank ", operands[i]->type.rank(), ", fewer than its letters"));
    ell_rank = std::max(ell_rank, ranks[i]);
  }
  if (ell_rank > int(fresh.size())) c.unsupported("einsum ellipsis spanning more dims than unused letters");
  std::string ell = fresh.substr(0, size_t(ell_rank));
  std::vector<SymInt> size(size_t(ell_rank), SymInt(1));  // the broadcast size of each ellipsis dim
  for (size_t i = 0; i < specs.size(); ++i) {
    size_t at = specs[i].find("...");
    if (at == std::string::npos) continue;
    for (int k = 0; k < ranks[i]; ++k) {
      const SymInt& d = operands[i]->type.shape[at + size_t(k)];
      SymInt& b = size[size_t(ell_rank - ranks[i] + k)];
      if (d == SymInt(1) || d == b) continue;
      if (b != SymInt(1)) c.fail(str("ellipsis dims ", shape_to_string({b}), " and ", shape_to_string({d}), " do not broadcast"));
      b = d;
    }
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    size_t at = specs[i].find("...");
    if (at == std::string::npos) continue;
    Shape target = operands[i]->type.shape;
    for (int k = 0; k < ranks[i]; ++k) target[at + size_t(k)] = size[size_t(ell_rank - ranks[i] + k)];
    if (target != operands[i]->type.shape) operands[i] = c.emit(Op::Expand, {operands[i]}, {{"shape", target}});
    specs[i].replace(at, 3, ell.substr(size_t(ell_rank - ranks[i])));
  }
  size_t at = out.find("...");
  if (at != std::string::npos) out.replace(at, 3, ell);
  else if (!explicit_out) out = ell + out;
}

void einsum(NodeCtx& c) {
  std::string eq;
  for (char ch : c.attr_string("equation", "")) if (ch != ' ') eq += ch;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow), out;
  std::vector<std::string> specs;
  for (size_t s = 0, e; s <= lhs.size(); s = e + 1) {
    e = lhs.find(',', s);
    if (e == std::string::npos) e = lhs.size();
    specs.push_back(lhs.substr(s, e - s));
  }
  if (int(specs.size()) != c.num_inputs()) c.fail(str("equation has ", specs.size(), " operands, node has ", c.num_inputs()));
  std::map<char, int> count;
  for (const auto& s : specs)
    for (char ch : s) {
      if (ch == '.') continue;
      if (!std::isalpha(static_cast<unsigned char>(ch))) c.fail(str("equation '", eq, "' has '", ch, "', not a letter"));
      ++count[ch];
    }
  if (arrow != std::string::npos) out = eq.substr(arrow + 2);
  else
    for (auto& [ch, n] : count) if (n == 1) out += ch;
  std::vector<Value*> operands;
  for (int i = 0; i < c.num_inputs(); ++i) operands.push_back(c.input(i));
  if (eq.find('.') != std::string::npos) expand_ellipses(c, specs, out, arrow != std::string::npos, operands);
  for (char ch : out)
    if (!std::isalpha(static_cast<unsigned char>(ch)) || std::none_of(specs.begin(), specs.end(), [&](const std::string& s) {
          return s.find(ch) != std::string::npos;
        }))
      c.fail(str("output letter '", ch, "' appears in no operand"));
  std::vector<Term> terms;
  for (size_t i = 0; i < specs.size(); ++i) {
    Value* v = operands[i];
    if (int(specs[i].size()) != v->type.rank()) c.fail(str("operand ", i, " has rank ", v->type.rank(), ", equation says ", specs[i].size()));
    for (char ch : specs[i])
      if (!std::isalpha(static_cast<unsigned char>(ch))) c.fail(str("equation '", eq, "' has a stray '", ch, "'"));
    terms.push_back(take_diagonals(c, {v, specs[i]}));
  }
  auto needed_after = [&](size_t i) {
    std::set<char> keep(out.begin(), out.end());
    for (size_t j = i + 1; j < terms.size(); ++j) keep.insert(terms[j].letters.begin(), terms[j].letters.end());
    return keep;
  };
  std::set<char> keep0 = needed_after(0);
  for (size_t j = 1; j < terms.size(); ++j) keep0.insert(terms[j].letters.begin(), terms[j].letters.end());
  Term acc = sum_out(c, terms[0], keep0);
  for (size_t i = 1; i < terms.size(); ++i) {
    std::set<char> keep = needed_after(i);
    std::set<char> keep_b = keep;
    keep_b.insert(acc.letters.begin(), acc.letters.end());
    Term b = sum_out(c, terms[i], keep_b);
    std::set<char> keep_a = keep;
    keep_a.insert(b.letters.begin(), b.letters.end());
    acc = sum_out(c, acc, keep_a);
    acc = contract(c, acc, b, keep);
  }
  acc = sum_out(c, acc, std::set<char>(out.begin(), out.end()));
  c.set_output(0, to_order(c, acc, out));
}

int64_t static_dim_or_fail(NodeCtx& c, const Value* x, int i) {
  auto d = x->type.shape[size_t(i)].maybe_constant();
  if (!d) c.unsupported("Resize of a symbolic dim");
  return *d;
}

// Why: antialiased linear/cubic taps (the ONNX reference's filters, widened by 1/scale when
// downsampling and normalised to sum 1) for one output position at fractional offset `ratio`.
std::vector<double> antialias_coeffs(bool cubic, double ratio, double scale, double A) {
  scale = std::min(scale, 1.0);
  std::vector<double> w;
  int64_t start = int64_t(std::floor((cubic ? -2.0 : -1.0) / scale)) + 1;
  int64_t end = cubic ? 2 - start : start + 2 - 2 * start;
  for (int64_t i = start; i < end; ++i) {
    double t = std::abs(scale * (double(i) - ratio));
    if (!cubic) w.push_back(std::clamp(1.0 - t, 0.0, 1.0));
    else if (t <= 1) w.push_back((A + 2) * t * t * t - (A + 3) * t * t + 1);
    else if (t < 2) w.push_back(A * t * t * t - 5 * A * t * t + 8 * A * t - 4 * A);
    else w.push_back(0.0);
  }
  double sum = 0;
  for (double v : w) sum += v;
  for (double& v : w) v /= sum;
  return w;
}

// Why: an antialiased Resize is separable, so each resized axis is one constant [out, in] matrix
// built from the reference's taps (nearest `n` edge-padded neighbours, ties to the lower index).
std::vector<double> antialias_matrix(NodeCtx& c, int64_t in, int64_t out, double scale, bool cubic,
                                     const std::string& coord, double A, bool exclude_outside) {
  std::vector<double> m = c.table({out, in}, "resize weight");
  double out_w = scale * double(in);
  for (int64_t o = 0; o < out; ++o) {
    double xo = double(o), xi;
    if (coord == "align_corners") xi = out_w == 1 ? 0.0 : xo * double(in - 1) / (out_w - 1);
    else if (coord == "asymmetric") xi = xo / scale;
    else if (coord == "pytorch_half_pixel") xi = out_w == 1 ? -0.5 : (xo + 0.5) / scale - 0.5;
    else if (coord == "half_pixel") xi = (xo + 0.5) / scale - 0.5;
    else if (coord == "half_pixel_symmetric")
      xi = double(in) / 2 * (1 - double(out) / out_w) + (xo + 0.5) / scale - 0.5;
    else c.unsupported("Resize with antialias and coordinate_transformation_mode " + coord);
    double ratio = xi == std::floor(xi) ? 1.0 : xi - std::floor(xi);
    std::vector<double> w = antialias_coeffs(cubic, ratio, scale, A);
    int64_t n = int64_t(w.size()), pw = (n + 1) / 2, L = in + 2 * pw;
    double xp = xi + double(pw);
    int64_t l = std::min<int64_t>(int64_t(std::floor(xp)), L - 1), r = std::max<int64_t>(l + 1, 0);
    std::vector<int64_t> idx;
    while (int64_t(idx.size()) < n) {
      double dl = l >= 0 ? xp - double(l) : 1e300, dr = r < L ? double(r) - xp : 1e300;
      if (dl <= dr) idx.push_back(l--);
      else idx.push_back(r++);
    }
    std::sort(idx.begin(), idx.end());
    double kept = 0;
    for (int64_t t = 0; t < n; ++t) {
      int64_t q = idx[size_t(t)] - pw;
      if (exclude_outside && (q < 0 || q >= in)) w[size_t(t)] = 0;
      kept += w[size_t(t)];
    }
    for (int64_t t = 0; t < n; ++t) {
      int64_t q = std::clamp<int64_t>(idx[size_t(t)] - pw, 0, in - 1);
      m[size_t(o * in + q)] += exclude_outside ? w[size_t(t)] / kept : w[size_t(t)];
    }
  }
  return m;
}

void resize(NodeCtx& c) {
  Value* x = c.input(0);
  int rank = x->type.rank();
  std::string policy = c.attr_string("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    c.fail("keep_aspect_ratio_policy must be stretch, not_larger or not_smaller, got '" + policy + "'");
  std::string mode = c.attr_string("mode", "nearest");
  std::string coord = c.attr_string("coordinate_transformation_mode", "half_pixel");
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  int scales_at = c.opset() >= 11 ? 2 : 1, sizes_at = 3;
  if (c.opset() >= 11 && c.has_input(1)) {
    HostTensor r = c.require_known(1, "roi");
    roi = r.to_doubles();
  }
  if (c.has_input(scales_at)) {
    HostTensor s = c.require_known(scales_at, "scales");
    scales = s.to_doubles();
  }
  if (c.has_input(sizes_at)) sizes = c.require_ints(sizes_at, "sizes");
  // axes: scales/sizes/roi name only some dims; the others keep scale 1, their size, roi [0, 1].
  std::vector<int64_t> axes = c.attr_ints("axes");
  for (auto& a : axes) a = normalize_axis(c, a, rank);
  if (!axes.empty()) {
    size_t n = axes.size();
    if (!scales.empty() && scales.size() != n) c.fail("scales must have one entry per axis");
    if (!sizes.empty() && sizes.size() != n) c.fail("sizes must have one entry per axis");
    if (!roi.empty() && roi.size() != 2 * n) c.fail("roi must have two entries per axis");
    std::vector<double> fs(size_t(rank), 1.0), fr;
    std::vector<int64_t> fz;
    for (int i = 0; i < rank; ++i) fz.push_back(x->type.shape[size_t(i)].maybe_constant().value_or(-1));
    if (!roi.empty()) {
      fr.assign(size_t(rank), 0.0);
      fr.resize(size_t(2 * rank), 1.0);
    }
    for (size_t i = 0; i < n; ++i) {
      size_t a = size_t(axes[i]);
      if (!scales.empty()) fs[a] = scales[i];
      if (!sizes.empty()) fz[a] = sizes[i];
      if (!roi.empty()) { fr[a] = roi[i]; fr[a + size_t(rank)] = roi[n + i]; }
    }
    if (!scales.empty()) scales = fs;
    if (!sizes.empty()) sizes = fz;
    if (!roi.empty()) roi = fr;
  } else {
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  }
  std::optional<double> kept_scale;  // the coordinate transform then uses this one scale
  if (!sizes.empty() && policy != "stretch") {
    // One scale for every resized axis (the smallest or largest), sizes rounded half up.
    if (int(sizes.size()) != rank) c.fail("sizes must have one entry per dim");
    double k = policy == "not_larger" ? 1e300 : -1e300;
    for (int64_t a : axes) {
      double r = double(sizes[size_t(a)]) / double(static_dim_or_fail(c, x, int(a)));
      k = policy == "not_larger" ? std::min(k, r) : std::max(k, r);
    }
    for (int64_t a : axes) sizes[size_t(a)] = int64_t(k * double(static_dim_or_fail(c, x, int(a))) + 0.5);
    kept_scale = k;
  }
  Shape out;
  if (!sizes.empty()) {
    if (int(sizes.size()) != rank) c.fail("sizes must have one entry per dim");
    scales.clear();
    for (int i = 0; i < rank; ++i) {
      auto d = x->type.shape[size_t(i)].maybe_constant();
      if (!d) c.unsupported("Resize of a symbolic dim");
      scales.push_back(double(sizes[size_t(i)]) / double(*d));
      out.push_back(SymInt(sizes[size_t(i)]));
    }
  } else {
    if (int(scales.size()) != rank) c.fail("scales must have one entry per dim");
    for (int i = 0; i < rank; ++i) {
      auto d = x->type.shape[size_t(i)].maybe_constant();
      if (!d) c.unsupported("Resize of a symbolic dim");
      out.push_back(SymInt(int64_t(std::floor(double(*d) * scales[size_t(i)]))));
    }
  }
  if (kept_scale)
    for (int64_t a : axes) scales[size_t(a)] = *kept_scale;
  if (c.attr_int("antialias", 0) != 0 && mode != "nearest") {
    if (mode != "linear" && mode != "cubic") c.fail("mode must be nearest, linear or cubic, got '" + mode + "'");
    Value* y = c.cast(x, DType::F64);
    for (int i = 0; i < rank; ++i) {
      int64_t in = static_dim_or_fail(c, x, i), o = *out[size_t(i)].maybe_constant();
      if (o == in && scales[size_t(i)] == 1.0) continue;  // identity axis
      if (o <= 0 || scales[size_t(i)] <= 0) c.fail(str("Resize to a non-positive size or scale on dim ", i));
      y = apply_axis_matrix(c, y, i, o, antialias_matrix(c, in, o, scales[size_t(i)], mode == "cubic", coord,
                                                          c.attr_float("cubic_coeff_a", -0.75), c.attr_int("exclude_outside", 0) != 0));
    }
    c.set_output(0, c.cast(y, x->type.dtype));
    return;
  }
  c.set_output(0, c.emit(Op::Resize, {x}, {{"sizes", out}, {"scales", scales}, {"mode", mode}, {"coord_mode", coord},
                                           {"nearest_mode", c.attr_string("nearest_mode", "round_prefer_floor")},
                                           {"cubic_coeff_a", c.attr_float("cubic_coeff_a", -0.75)},
                                           {"exclude_outside", c.attr_int("exclude_outside", 0)},
                                           {"extrapolation_value", c.attr_float("extrapolation_value", 0.0)},
                                           {"roi", roi}}));
}

}  // namespace

void register_nn_ops(OpRegistry& r) {
  r["MatMul"] = [](NodeCtx& c) { c.set_output(0, c.emit(Op::MatMul, {c.input(0), c.input(1)})); };
  r["Gemm"] = gemm;
  r["Conv"] = conv;
  r["ConvTranspose"] = conv_transpose;
  r["MaxPool"] = [](NodeCtx& c) { pool(c, true); };
  r["AveragePool"] = [](NodeCtx& c) { pool(c, false); };
  r["GlobalAveragePool"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    c.set_output(0, c.emit(Op::ReduceMean, {x}, {{"axes", spatial_axes(x)}, {"keepdim", int64_t(1)}}));
  };
  r["GlobalMaxPool"] = [](NodeCtx& c) {
    Value* x = c.input(0);
    c.set_output(0, c.emit(Op::ReduceMax, {x}, {{"axes", spatial_axes(x)}, {"keepdim", int64_t(1)}}));
  };
  r["BatchNormalization"] = batch_norm;
  r["LayerNormalization"] = layer_norm;
  r["InstanceNormalization"] = instance_norm;
  r["LpNormalization"] = lp_norm;
  r["Einsum"] = einsum;
  r["Resize"] = resize;
}


WindowAttrs window_attrs(NodeCtx& c, const Value* x, std::vector<int64_t> kernel) {
  int spatial = x->type.rank() - 2;
  if (spatial < 1) c.fail("input must be [N, C, spatial...]");
  if (int(kernel.size()) != spatial) c.fail(str("kernel has ", kernel.size(), " dims, input has ", spatial, " spatial dims"));
  auto strides = c.attr_ints("strides", std::vector<int64_t>(size_t(spatial), 1));
  auto dil = c.attr_ints("dilations", std::vector<int64_t>(size_t(spatial), 1));
  auto pads = c.attr_ints("pads", std::vector<int64_t>(size_t(2 * spatial), 0));
  if (int(strides.size()) != spatial || int(dil.size()) != spatial || int(pads.size()) != 2 * spatial)
    c.fail("strides, dilations and pads must match the spatial rank");
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (int i = 0; i < spatial; ++i) {
      auto in = x->type.shape[size_t(2 + i)].maybe_constant();
      if (!in) c.unsupported("auto_pad SAME on a symbolic spatial dim");
      if (strides[size_t(i)] < 1) c.fail("strides must be positive");
      int64_t out = (*in + strides[size_t(i)] - 1) / strides[size_t(i)];
      int64_t total = std::max<int64_t>((out - 1) * strides[size_t(i)] + (kernel[size_t(i)] - 1) * dil[size_t(i)] + 1 - *in, 0);
      int64_t small = total / 2, big = total - small;
      pads[size_t(i)] = auto_pad == "SAME_UPPER" ? small : big;
      pads[size_t(i + spatial)] = auto_pad == "SAME_UPPER" ? big : small;
    }
  } else if (auto_pad == "VALID") {
    std::fill(pads.begin(), pads.end(), 0);
  } else if (auto_pad != "NOTSET") {
    c.fail("unknown auto_pad '" + auto_pad + "'");
  }
  return WindowAttrs{std::move(kernel), std::move(strides), std::move(dil), std::move(pads)};
}

Window window_params(NodeCtx& c, Value* x, std::vector<int64_t> kernel) {
  int spatial = x->type.rank() - 2;
  if (spatial > 2) c.unsupported(str(spatial, "-D windows (only 1-D and 2-D are supported)"));
  WindowAttrs a = window_attrs(c, x, std::move(kernel));
  if (spatial == 1)
    return Window{{1, a.kernel[0]}, {1, a.strides[0]}, {0, a.pads[0], 0, a.pads[1]}, {1, a.dilations[0]}, true};
  return Window{a.kernel, a.strides, a.pads, a.dilations, false};
}

Value* lift(NodeCtx& c, Value* x, bool lifted) {
  return lifted ? c.emit(Op::Unsqueeze, {x}, {{"axes", std::vector<int64_t>{2}}}) : x;
}
Value* unlift(NodeCtx& c, Value* y, bool lifted) {
  return lifted ? c.emit(Op::Squeeze, {y}, {{"axes", std::vector<int64_t>{2}}}) : y;
}

}  // namespace kiln::onnx_import
