// Shape rules of the control-flow ops (if, loop, scan) and the container ops (sequences,
// optionals). Why: a sub-graph is typed once, when its node is built, so a body of the wrong
// arity, mismatched branch types or a loop-carried value that changes type are errors naming the
// node rather than surprises at run time.
#include "ir/shape_rules.h"
#include "kiln/error.h"
#include "kiln/graph.h"

namespace kiln {

namespace {

bool is_one_element(const TensorType& t) {
  if (!t.is_tensor()) return false;
  for (const SymInt& d : t.shape)
    if (!(d == SymInt(1))) return false;
  return true;
}

void require_flag(const InferCtx& ctx, const TensorType& t, DType dtype, const std::string& what) {
  if (!is_one_element(t) || t.dtype != dtype)
    ctx.fail(str(what, " must be a one-element ", dtype_name(dtype), " tensor, got ", t.to_string()));
}

const Graph& sub_graph(const InferCtx& ctx, const std::string& name) {
  const GraphAttr* g = std::get_if<GraphAttr>(&ctx.attrs.get(name));
  if (g == nullptr || *g == nullptr) ctx.fail(str("attribute '", name, "' must be a graph"));
  return **g;
}

// The sub-graph's inputs must have exactly `types` (what the node passes it).
void check_sub_inputs(const InferCtx& ctx, const std::string& name, const Graph& g,
                      const std::vector<TensorType>& types, const std::string& layout) {
  if (g.inputs().size() != types.size())
    ctx.fail(str(name, " takes ", g.inputs().size(), " inputs, but the node passes it ", types.size(), " (",
                 layout, ")"));
  for (size_t i = 0; i < types.size(); ++i)
    if (g.inputs()[i]->type != types[i])
      ctx.fail(str(name, " input ", i, " has type ", g.inputs()[i]->type.to_string(), ", but the node passes ",
                   types[i].to_string()));
}

std::vector<TensorType> output_types(const Graph& g) {
  std::vector<TensorType> out;
  for (const Value* v : g.outputs()) out.push_back(v->type);
  return out;
}

std::vector<TensorType> tail(const std::vector<TensorType>& v, size_t from) {
  return {v.begin() + long(std::min(from, v.size())), v.end()};
}

}  // namespace

std::vector<TensorType> rule_if(const InferCtx& ctx) {
  require_flag(ctx, ctx.inputs[0], DType::Bool, "cond");
  std::vector<TensorType> captures = tail(ctx.inputs, 1);
  const Graph& then_g = sub_graph(ctx, "then_branch");
  const Graph& else_g = sub_graph(ctx, "else_branch");
  check_sub_inputs(ctx, "then_branch", then_g, captures, "one input per captured value");
  check_sub_inputs(ctx, "else_branch", else_g, captures, "one input per captured value");
  std::vector<TensorType> t = output_types(then_g), e = output_types(else_g);
  if (t.size() != e.size())
    ctx.fail(str("then_branch returns ", t.size(), " values, else_branch ", e.size(), "; they must match"));
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] != e[i])
      ctx.fail(str("branch types differ at output ", i, ": then_branch gives ", t[i].to_string(),
                   ", else_branch ", e[i].to_string()));
  return t;
}

std::vector<TensorType> rule_loop(const InferCtx& ctx) {
  require_flag(ctx, ctx.inputs[0], DType::I64, "trip_count");
  require_flag(ctx, ctx.inputs[1], DType::Bool, "cond");
  int64_t carried = ctx.attrs.get_int("num_carried");
  std::vector<TensorType> rest = tail(ctx.inputs, 2);
  if (carried < 0 || carried > int64_t(rest.size()))
    ctx.fail(str("num_carried is ", carried, " but the node has ", rest.size(), " inputs after trip_count and cond"));
  const Graph& body = sub_graph(ctx, "body");
  std::vector<TensorType> body_in = {TensorType{DType::I64, {}, Device::CPU}, TensorType{DType::Bool, {}, Device::CPU}};
  body_in.insert(body_in.end(), rest.begin(), rest.end());
  check_sub_inputs(ctx, "body", body, body_in, "iteration number i64[], cond bool[], carried values, captures");
  std::vector<TensorType> out = output_types(body);
  if (int64_t(out.size()) < 1 + carried)
    ctx.fail(str("body returns ", out.size(), " values; a loop with ", carried,
                 " carried values needs at least ", 1 + carried, " (cond, carried values, scan outputs)"));
  require_flag(ctx, out[0], DType::Bool, "body output 0 (the next cond)");
  std::vector<TensorType> results;
  for (int64_t k = 0; k < carried; ++k) {
    if (out[size_t(1 + k)] != rest[size_t(k)])
      ctx.fail(str("loop-carried value ", k, " enters as ", rest[size_t(k)].to_string(), " but the body returns ",
                   out[size_t(1 + k)].to_string(), "; its type must not change across iterations"));
    results.push_back(rest[size_t(k)]);
  }
  Shape length = ctx.attrs.get_shape("scan_length");
  size_t scans = out.size() - size_t(1 + carried);
  if (scans > 0 && length.size() != 1)
    ctx.fail(str("the body has ", scans, " scan outputs, so scan_length must give their length (one dim); got ",
                 shape_to_string(length)));
  for (size_t k = 0; k < scans; ++k) {
    TensorType t = out[size_t(1 + carried) + k];
    if (!t.is_tensor()) ctx.fail(str("scan output ", k, " is ", t.to_string(), "; scan outputs must be tensors"));
    t.shape.insert(t.shape.begin(), length[0]);
    results.push_back(t);
  }
  return results;
}

namespace {
std::vector<int64_t> axes_or_zero(const InferCtx& ctx, const std::string& name, size_t count) {
  std::vector<int64_t> v = ctx.attrs.get_ints(name);
  if (v.empty()) v.assign(count, 0);
  if (v.size() != count) ctx.fail(str(name, " has ", v.size(), " entries, expected ", count));
  return v;
}
}  // namespace

std::vector<TensorType> rule_scan(const InferCtx& ctx) {
  int64_t carried = ctx.attrs.get_int("num_carried"), scanned = ctx.attrs.get_int("num_scan_inputs");
  if (carried < 0 || scanned < 1 || carried + scanned > int64_t(ctx.inputs.size()))
    ctx.fail(str("num_carried = ", carried, " and num_scan_inputs = ", scanned, " do not fit ", ctx.inputs.size(),
                 " inputs (at least one scan input)"));
  std::vector<int64_t> in_axes = axes_or_zero(ctx, "scan_input_axes", size_t(scanned));
  axes_or_zero(ctx, "scan_input_directions", size_t(scanned));
  std::vector<TensorType> body_in(ctx.inputs.begin(), ctx.inputs.begin() + carried);
  SymInt length;
  for (int64_t k = 0; k < scanned; ++k) {
    TensorType t = ctx.inputs[size_t(carried + k)];
    if (!t.is_tensor() || t.rank() < 1) ctx.fail(str("scan input ", k, " must be a tensor of rank >= 1"));
    int axis = ctx.normalize_axis(in_axes[size_t(k)], t.rank(), str("scan_input_axes[", k, "]"));
    length = k == 0 ? t.shape[size_t(axis)] : ctx.require_equal(length, t.shape[size_t(axis)], "scan input lengths");
    t.shape.erase(t.shape.begin() + axis);
    body_in.push_back(t);
  }
  body_in.insert(body_in.end(), ctx.inputs.begin() + carried + scanned, ctx.inputs.end());
  const Graph& body = sub_graph(ctx, "body");
  check_sub_inputs(ctx, "body", body, body_in, "carried values, one slice per scan input, captures");
  std::vector<TensorType> out = output_types(body);
  if (int64_t(out.size()) < carried)
    ctx.fail(str("body returns ", out.size(), " values; ", carried, " carried values need at least as many"));
  std::vector<TensorType> results;
  for (int64_t k = 0; k < carried; ++k) {
    if (out[size_t(k)] != ctx.inputs[size_t(k)])
      ctx.fail(str("carried value ", k, " enters as ", ctx.inputs[size_t(k)].to_string(), " but the body returns ",
                   out[size_t(k)].to_string(), "; its type must not change across iterations"));
    results.push_back(out[size_t(k)]);
  }
  size_t scans = out.size() - size_t(carried);
  std::vector<int64_t> out_axes = axes_or_zero(ctx, "scan_output_axes", scans);
  axes_or_zero(ctx, "scan_output_directions", scans);
  for (size_t k = 0; k < scans; ++k) {
    TensorType t = out[size_t(carried) + k];
    if (!t.is_tensor()) ctx.fail(str("scan output ", k, " is ", t.to_string(), "; scan outputs must be tensors"));
    int axis = ctx.normalize_axis(out_axes[k], t.rank() + 1, str("scan_output_axes[", k, "]"));
    t.shape.insert(t.shape.begin() + axis, length);
    results.push_back(t);
  }
  return results;
}

std::vector<TensorType> rule_sequence_construct(const InferCtx& ctx) {
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (!ctx.inputs[i].is_tensor()) ctx.fail(str("operand ", i, " must be a tensor"));
    if (ctx.inputs[i].dtype != ctx.inputs[0].dtype) ctx.fail("sequence elements must share one dtype");
  }
  return {TensorType::sequence(ctx.inputs[0].dtype, ctx.inputs)};
}

std::vector<TensorType> rule_sequence_empty(const InferCtx& ctx) {
  return {TensorType::sequence(ctx.attrs.get_dtype("dtype"), {})};
}

namespace {
const TensorType& require_sequence(const InferCtx& ctx) {
  if (ctx.inputs[0].kind != ValueKind::Sequence) ctx.fail(str("operand 0 must be a sequence"));
  return ctx.inputs[0];
}
}  // namespace

std::vector<TensorType> rule_sequence_at(const InferCtx& ctx) {
  const TensorType& s = require_sequence(ctx);
  int64_t i = ctx.attrs.get_int("index");
  if (i < 0 || i >= int64_t(s.elements.size()))
    ctx.fail(str("index ", i, " is outside the sequence of length ", s.elements.size()));
  return {s.elements[size_t(i)]};
}

std::vector<TensorType> rule_sequence_insert(const InferCtx& ctx) {
  TensorType s = require_sequence(ctx);
  const TensorType& x = ctx.inputs[1];
  if (!x.is_tensor() || x.dtype != s.dtype)
    ctx.fail(str("the inserted value must be a ", dtype_name(s.dtype), " tensor"));
  int64_t p = ctx.attrs.get_int("position");
  if (p < 0 || p > int64_t(s.elements.size()))
    ctx.fail(str("position ", p, " is outside [0, ", s.elements.size(), "]"));
  s.elements.insert(s.elements.begin() + p, x);
  return {s};
}

std::vector<TensorType> rule_sequence_erase(const InferCtx& ctx) {
  TensorType s = require_sequence(ctx);
  int64_t p = ctx.attrs.get_int("position");
  if (p < 0 || p >= int64_t(s.elements.size()))
    ctx.fail(str("position ", p, " is outside the sequence of length ", s.elements.size()));
  s.elements.erase(s.elements.begin() + p);
  return {s};
}

std::vector<TensorType> rule_optional_wrap(const InferCtx& ctx) {
  if (ctx.inputs[0].kind == ValueKind::Optional) ctx.fail("an optional cannot hold an optional");
  return {TensorType::optional(ctx.inputs[0])};
}

std::vector<TensorType> rule_optional_none(const InferCtx& ctx) {
  TensorType t;
  try {
    t = parse_type(ctx.attrs.get_string("type"));
  } catch (const Error& e) {
    ctx.fail(str("bad type text '", ctx.attrs.get_string("type"), "': ", e.what()));
  }
  if (t.kind != ValueKind::Optional) ctx.fail(str("type must be an optional type (opt<...>), got ", t.to_string()));
  return {t};
}

std::vector<TensorType> rule_optional_has(const InferCtx& ctx) {
  if (ctx.inputs[0].kind != ValueKind::Optional) ctx.fail("operand 0 must be an optional");
  return {TensorType{DType::Bool, {}, Device::CPU}};
}

std::vector<TensorType> rule_optional_get(const InferCtx& ctx) {
  if (ctx.inputs[0].kind != ValueKind::Optional) ctx.fail("operand 0 must be an optional");
  return {ctx.inputs[0].elements.at(0)};
}

}  // namespace kiln
