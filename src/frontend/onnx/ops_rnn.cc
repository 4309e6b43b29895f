// ONNX RNN, GRU and LSTM, unrolled at import over the static sequence length into matmul, add,
// mul and activation primitives. Why: Kiln has no recurrence op; with T known the recurrence is a
// straight-line graph (T steps per direction) that every backend already runs.
#include <algorithm>

#include "frontend/onnx/build_helpers.h"

namespace kiln::onnx_import {

namespace {

enum class Cell { Rnn, Gru, Lstm };

struct Act {
  std::string name;
  double alpha = 0, beta = 0;
};

Value* apply_act(NodeCtx& c, const Act& a, Value* x) {
  DType dt = x->type.dtype;
  auto k = [&](double v) { return scalar_of(c, dt, v); };
  const std::string& n = a.name;
  if (n == "Tanh") return c.emit(Op::Tanh, {x});
  if (n == "Sigmoid") return c.emit(Op::Sigmoid, {x});
  if (n == "Relu") return c.emit(Op::Relu, {x});
  if (n == "Affine") return c.emit(Op::Add, {c.emit(Op::Mul, {x, k(a.alpha)}), k(a.beta)});
  if (n == "LeakyRelu") return c.emit(Op::Where, {c.emit(Op::Ge, {x, k(0)}), x, c.emit(Op::Mul, {x, k(a.alpha)})});
  if (n == "ThresholdedRelu") return c.emit(Op::Where, {c.emit(Op::Gt, {x, k(a.alpha)}), x, k(0)});
  if (n == "ScaledTanh") return c.emit(Op::Mul, {c.emit(Op::Tanh, {c.emit(Op::Mul, {x, k(a.beta)})}), k(a.alpha)});
  if (n == "HardSigmoid")
    return c.emit(Op::Clamp, {c.emit(Op::Add, {c.emit(Op::Mul, {x, k(a.alpha)}), k(a.beta)})}, {{"min", 0.0}, {"max", 1.0}});
  if (n == "Elu")
    return c.emit(Op::Where, {c.emit(Op::Ge, {x, k(0)}), x,
                              c.emit(Op::Mul, {c.emit(Op::Sub, {c.emit(Op::Exp, {x}), k(1)}), k(a.alpha)})});
  if (n == "Softsign") return c.emit(Op::Div, {x, c.emit(Op::Add, {c.emit(Op::Abs, {x}), k(1)})});
  if (n == "Softplus") return c.emit(Op::Log, {c.emit(Op::Add, {c.emit(Op::Exp, {x}), k(1)})});
  c.unsupported("activation '" + n + "' is not supported");
}

// Activations for one direction: the ONNX list holds gates_per_dir names per direction.
std::vector<Act> activations(NodeCtx& c, Cell cell, int num_dirs) {
  std::vector<std::string> dflt = cell == Cell::Rnn ? std::vector<std::string>{"Tanh", "Tanh"}
                                  : cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                      : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  size_t per = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 2 : 3;
  std::vector<std::string> names;
  if (auto* a = c.attr("activations")) {
    for (const auto& s : a->strings()) names.push_back(s);
  } else {
    for (int d = 0; d < num_dirs; ++d) names.insert(names.end(), dflt.begin(), dflt.begin() + long(per));
  }
  if (names.size() != per * size_t(num_dirs)) {
    if (names.size() == per) {  // one set given for both directions
      auto once = names;
      names.insert(names.end(), once.begin(), once.end());
    }
    if (names.size() != per * size_t(num_dirs)) c.fail(str("activations must list ", per * size_t(num_dirs), " functions"));
  }
  auto alphas = c.attr_floats("activation_alpha"), betas = c.attr_floats("activation_beta");
  std::vector<Act> out;
  for (size_t i = 0; i < names.size(); ++i) {
    Act a{names[i]};
    // Defaults from the ONNX operator spec of each activation.
    if (a.name == "LeakyRelu") a.alpha = 0.01;
    if (a.name == "ThresholdedRelu" || a.name == "Elu") a.alpha = 1.0;
    if (a.name == "HardSigmoid") { a.alpha = 0.2; a.beta = 0.5; }
    if (a.name == "Affine" || a.name == "ScaledTanh") { a.alpha = 1.0; a.beta = 0.0; }
    if (i < alphas.size()) a.alpha = alphas[i];
    if (i < betas.size()) a.beta = betas[i];
    out.push_back(a);
  }
  return out;
}

Value* take(NodeCtx& c, Value* x, int axis, int64_t i) {
  return c.emit(Op::Squeeze, {slice_axis(c, x, axis, i, i + 1)}, {{"axes", std::vector<int64_t>{axis}}});
}

void recurrent(NodeCtx& c, Cell cell) {
  Value* X = c.input(0);
  Value* W = c.input(1);
  Value* R = c.input(2);
  if (X->type.rank() != 3 || W->type.rank() != 3 || R->type.rank() != 3) c.fail("X, W and R must be 3-D");
  DType dt = X->type.dtype;
  if (!is_float(dt)) c.fail("X must be a float tensor");
  int64_t H = c.attr_int("hidden_size", 0);
  if (H <= 0) c.fail("attribute hidden_size must be positive");
  int64_t layout = c.attr_int("layout", 0);
  std::string direction = c.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    c.fail("direction must be forward, reverse or bidirectional, got '" + direction + "'");
  int D = direction == "bidirectional" ? 2 : 1;
  int64_t G = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  if (layout == 1) X = c.emit(Op::Permute, {X}, {{"perm", std::vector<int64_t>{1, 0, 2}}});  // -> [T, B, I]
  int64_t T = static_dim(c, X, 0, "X"), B = static_dim(c, X, 1, "X"), I = static_dim(c, X, 2, "X");
  if (static_shape_of(c, W, "W") != std::vector<int64_t>{D, G * H, I})
    c.fail(str("W must be [", D, ", ", G * H, ", ", I, "]"));
  if (static_shape_of(c, R, "R") != std::vector<int64_t>{D, G * H, H}) c.fail(str("R must be [", D, ", ", G * H, ", ", H, "]"));
  double clip = c.attr_float("clip", 0.0);
  bool has_clip = c.has_attr("clip");
  bool linear_before_reset = cell == Cell::Gru && c.attr_int("linear_before_reset", 0) != 0;
  bool input_forget = cell == Cell::Lstm && c.attr_int("input_forget", 0) != 0;
  auto acts = activations(c, cell, D);
  size_t per = acts.size() / size_t(D);

  Value* lens = c.has_input(4) ? c.cast(c.input(4), DType::I64) : nullptr;
  if (lens && (lens->type.rank() != 1 || static_dim(c, lens, 0, "sequence_lens") != B))
    c.fail(str("sequence_lens must be 1-D of the batch size ", B));
  auto from_layout = [&](int i, const char* what) -> Value* {  // initial_h / initial_c -> [D, B, H]
    if (!c.has_input(i)) return nullptr;
    Value* v = c.input(i);
    if (layout == 1) v = c.emit(Op::Permute, {v}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
    if (static_shape_of(c, v, what) != std::vector<int64_t>{D, B, H}) c.fail(str(what, " must be [num_directions, batch, hidden]"));
    return v;
  };
  Value* h0 = from_layout(5, "initial_h");
  Value* c0 = cell == Cell::Lstm ? from_layout(6, "initial_c") : nullptr;
  Value* P = cell == Cell::Lstm && c.has_input(7) ? c.input(7) : nullptr;
  if (P && static_shape_of(c, P, "P") != std::vector<int64_t>{D, 3 * H}) c.fail(str("P must be [", D, ", ", 3 * H, "]"));
  if (c.has_input(3) && static_shape_of(c, c.input(3), "B") != std::vector<int64_t>{D, 2 * G * H})
    c.fail(str("B must be [", D, ", ", 2 * G * H, "]"));

  auto clipped = [&](Value* v) { return has_clip ? c.emit(Op::Clamp, {v}, {{"min", -clip}, {"max", clip}}) : v; };
  auto gate = [&](Value* v, int64_t g) { return slice_axis(c, v, 1, g * H, (g + 1) * H); };
  Value* zero_bh = c.emit(Op::Full, {}, {{"shape", Shape{SymInt(B), SymInt(H)}}, {"value", 0.0}, {"dtype", dt}});

  std::vector<std::vector<Value*>> ys(static_cast<size_t>(D), std::vector<Value*>(static_cast<size_t>(T)));
  std::vector<Value*> hs, cs;
  for (int d = 0; d < D; ++d) {
    bool reverse = direction == "reverse" || d == 1;
    if (reverse && lens) c.unsupported("sequence_lens with a reverse direction");
    const Act* act = &acts[size_t(d) * per];
    Value* Wt = c.emit(Op::Permute, {take(c, W, 0, d)}, {{"perm", std::vector<int64_t>{1, 0}}});  // [I, G*H]
    Value* Rt = c.emit(Op::Permute, {take(c, R, 0, d)}, {{"perm", std::vector<int64_t>{1, 0}}});  // [H, G*H]
    Value* XW = c.emit(Op::MatMul, {X, Wt});                                                       // [T, B, G*H]
    Value* Rb = nullptr;
    if (c.has_input(3)) {
      Value* b = take(c, c.input(3), 0, d);
      XW = c.emit(Op::Add, {XW, slice_axis(c, b, 0, 0, G * H)});
      Rb = slice_axis(c, b, 0, G * H, 2 * G * H);
    }
    Value* Rt_zr = cell == Cell::Gru && !linear_before_reset ? slice_axis(c, Rt, 1, 0, 2 * H) : nullptr;
    Value* Rt_h = Rt_zr ? slice_axis(c, Rt, 1, 2 * H, 3 * H) : nullptr;
    Value* Rb_h = Rt_zr && Rb ? slice_axis(c, Rb, 0, 2 * H, 3 * H) : nullptr;
    Value* Rb_zr = Rt_zr && Rb ? slice_axis(c, Rb, 0, 0, 2 * H) : nullptr;
    Value* h = h0 ? take(c, h0, 0, d) : zero_bh;
    Value* cst = c0 ? take(c, c0, 0, d) : zero_bh;
    Value *Pi = nullptr, *Po = nullptr, *Pf = nullptr;
    if (P) {
      Value* p = take(c, P, 0, d);
      Pi = slice_axis(c, p, 0, 0, H);
      Po = slice_axis(c, p, 0, H, 2 * H);
      Pf = slice_axis(c, p, 0, 2 * H, 3 * H);
    }
    for (int64_t step = 0; step < T; ++step) {
      int64_t t = reverse ? T - 1 - step : step;
      Value* xw = take(c, XW, 0, t);  // [B, G*H]
      Value *h_new = nullptr, *c_new = nullptr;
      if (cell == Cell::Rnn) {
        Value* s = c.emit(Op::Add, {xw, c.emit(Op::MatMul, {h, Rt})});
        if (Rb) s = c.emit(Op::Add, {s, Rb});
        h_new = apply_act(c, act[0], clipped(s));
      } else if (cell == Cell::Gru) {
        Value* hr = Rt_zr ? c.emit(Op::MatMul, {h, Rt_zr}) : c.emit(Op::MatMul, {h, Rt});
        if (Rb) hr = c.emit(Op::Add, {hr, Rt_zr ? Rb_zr : Rb});
        Value* z = apply_act(c, act[0], clipped(c.emit(Op::Add, {gate(xw, 0), gate(hr, 0)})));
        Value* r = apply_act(c, act[0], clipped(c.emit(Op::Add, {gate(xw, 1), gate(hr, 1)})));
        Value* rec;
        if (linear_before_reset) {
          rec = c.emit(Op::Mul, {r, gate(hr, 2)});
        } else {
          rec = c.emit(Op::MatMul, {c.emit(Op::Mul, {r, h}), Rt_h});
          if (Rb_h) rec = c.emit(Op::Add, {rec, Rb_h});
        }
        Value* hh = apply_act(c, act[1], clipped(c.emit(Op::Add, {gate(xw, 2), rec})));
        // H = (1 - z) * hh + z * h = hh + z * (h - hh)
        h_new = c.emit(Op::Add, {hh, c.emit(Op::Mul, {z, c.emit(Op::Sub, {h, hh})})});
      } else {
        Value* s = c.emit(Op::Add, {xw, c.emit(Op::MatMul, {h, Rt})});
        if (Rb) s = c.emit(Op::Add, {s, Rb});
        Value* si = gate(s, 0);
        if (Pi) si = c.emit(Op::Add, {si, c.emit(Op::Mul, {Pi, cst})});
        Value* i_g = apply_act(c, act[0], clipped(si));
        Value* f_g;
        if (input_forget) {
          f_g = c.emit(Op::Sub, {scalar_of(c, dt, 1.0), i_g});
        } else {
          Value* sf = gate(s, 2);
          if (Pf) sf = c.emit(Op::Add, {sf, c.emit(Op::Mul, {Pf, cst})});
          f_g = apply_act(c, act[0], clipped(sf));
        }
        Value* cc = apply_act(c, act[1], clipped(gate(s, 3)));
        c_new = c.emit(Op::Add, {c.emit(Op::Mul, {f_g, cst}), c.emit(Op::Mul, {i_g, cc})});
        Value* so = gate(s, 1);
        if (Po) so = c.emit(Op::Add, {so, c.emit(Op::Mul, {Po, c_new})});
        Value* o_g = apply_act(c, act[0], clipped(so));
        h_new = c.emit(Op::Mul, {o_g, apply_act(c, act[2], c_new)});
      }
      if (lens) {  // past a sequence's end the state holds and Y is 0
        Value* live = c.reshape(c.emit(Op::Lt, {scalar_of(c, DType::I64, double(t)), lens}), {B, 1});
        ys[size_t(d)][size_t(t)] = c.emit(Op::Where, {live, h_new, zero_bh});
        h = c.emit(Op::Where, {live, h_new, h});
        if (c_new) cst = c.emit(Op::Where, {live, c_new, cst});
      } else {
        ys[size_t(d)][size_t(t)] = h_new;
        h = h_new;
        if (c_new) cst = c_new;
      }
    }
    hs.push_back(c.reshape(h, {1, B, H}));
    cs.push_back(c.reshape(cst, {1, B, H}));
  }
  auto cat = [&](std::vector<Value*> v, int64_t axis) { return v.size() == 1 ? v[0] : c.emit(Op::Concat, v, {{"axis", axis}}); };
  if (c.wants_output(0)) {
    std::vector<Value*> steps;
    for (int64_t t = 0; t < T; ++t) {
      std::vector<Value*> per_dir;
      for (int d = 0; d < D; ++d) per_dir.push_back(c.reshape(ys[size_t(d)][size_t(t)], {1, 1, B, H}));
      steps.push_back(cat(per_dir, 1));
    }
    Value* Y = cat(steps, 0);  // [T, D, B, H]
    if (layout == 1) Y = c.emit(Op::Permute, {Y}, {{"perm", std::vector<int64_t>{2, 0, 1, 3}}});
    c.set_output(0, Y);
  }
  auto state_out = [&](std::vector<Value*> v) {
    Value* s = cat(v, 0);  // [D, B, H]
    return layout == 1 ? c.emit(Op::Permute, {s}, {{"perm", std::vector<int64_t>{1, 0, 2}}}) : s;
  };
  if (c.wants_output(1)) c.set_output(1, state_out(hs));
  if (cell == Cell::Lstm && c.wants_output(2)) c.set_output(2, state_out(cs));
}

}  // namespace

void register_rnn_ops(OpRegistry& r) {
  r["RNN"] = [](NodeCtx& c) { recurrent(c, Cell::Rnn); };
  r["GRU"] = [](NodeCtx& c) { recurrent(c, Cell::Gru); };
  r["LSTM"] = [](NodeCtx& c) { recurrent(c, Cell::Lstm); };
}

}  // namespace kiln::onnx_import
