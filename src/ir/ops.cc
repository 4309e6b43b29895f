// Builds the OpInfo table from ops.def, parsing each row's operand and attribute specs once.
#include <mutex>
#include <unordered_map>

#include "ir/decompositions.h"
#include "ir/shape_rules.h"
#include "kiln/error.h"
#include "kiln/graph.h"

namespace kiln {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Splits on commas at bracket depth 0 and outside quotes.
std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  bool quoted = false;
  for (char c : s) {
    if (c == '"') quoted = !quoted;
    if (!quoted && (c == '[' || c == '(' || c == '<')) ++depth;
    if (!quoted && (c == ']' || c == ')' || c == '>')) --depth;
    if (c == ',' && depth == 0 && !quoted) {
      parts.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty()) parts.push_back(trim(cur));
  return parts;
}

AttrKind parse_kind(const std::string& k) {
  static const std::unordered_map<std::string, AttrKind> kinds = {
      {"int", AttrKind::Int},       {"float", AttrKind::Float},   {"ints", AttrKind::Ints},
      {"floats", AttrKind::Floats}, {"string", AttrKind::String}, {"dtype", AttrKind::DType},
      {"shape", AttrKind::Shape},   {"tensor", AttrKind::Tensor}, {"graph", AttrKind::Graph}};
  auto it = kinds.find(k);
  KILN_ASSERT(it != kinds.end());
  return it->second;
}

OpInfo make_info(Op op, std::string_view name, const char* operands, const char* attrs,
                 uint32_t traits, ShapeFn shape_fn, DecompFn decomp, std::string_view doc) {
  OpInfo info;
  info.op = op;
  info.name = name;
  info.traits = traits;
  info.shape_fn = shape_fn;
  info.decompose = decomp;
  info.doc = doc;
  for (const auto& part : split_top(operands)) {
    OperandSpec spec;
    spec.name = part;
    if (part.size() > 4 && part.substr(part.size() - 4) == "...?") {  // zero or more
      spec.variadic = spec.optional = true;
      spec.name = part.substr(0, part.size() - 4);
    } else if (part.size() > 3 && part.substr(part.size() - 3) == "...") {
      spec.variadic = true;
      spec.name = part.substr(0, part.size() - 3);
    } else if (part.back() == '?') {
      spec.optional = true;
      spec.name = part.substr(0, part.size() - 1);
    }
    info.operands.push_back(spec);
  }
  for (const auto& s : info.operands) {
    if (s.variadic) info.max_operands = -1;
    if (!s.optional) ++info.min_operands;
  }
  if (info.max_operands != -1) info.max_operands = int(info.operands.size());
  for (const auto& part : split_top(attrs)) {
    AttrSpec spec;
    size_t colon = part.find(':');
    KILN_ASSERT(colon != std::string::npos);
    spec.name = trim(part.substr(0, colon));
    std::string rest = part.substr(colon + 1);
    size_t eq = rest.find('=');
    spec.kind = parse_kind(trim(rest.substr(0, eq)));
    if (eq != std::string::npos) {
      spec.required = false;
      std::string text = trim(rest.substr(eq + 1));
      size_t pos = 0;
      spec.default_value = parse_attr_value(text, pos, spec.kind);
    }
    info.attrs.push_back(spec);
  }
  return info;
}

const std::vector<OpInfo>& table() {
  static const std::vector<OpInfo> t = [] {
    std::vector<OpInfo> v;
#define OP(e, name, operands, attrs, traits, shape_fn, decomp, doc) \
  v.push_back(make_info(Op::e, name, operands, attrs, traits, shape_fn, decomp, doc));
#include "ir/ops.def"
#undef OP
    return v;
  }();
  return t;
}

}  // namespace

const OpInfo& op_info(Op op) { return table()[size_t(op)]; }
std::string_view op_name(Op op) { return op_info(op).name; }

std::optional<Op> op_from_name(std::string_view name) {
  static const std::unordered_map<std::string_view, Op> by_name = [] {
    std::unordered_map<std::string_view, Op> m;
    for (const auto& info : table()) m.emplace(info.name, info.op);
    return m;
  }();
  auto it = by_name.find(name);
  if (it == by_name.end()) return std::nullopt;
  return it->second;
}

const AttrSpec* OpInfo::find_attr(const std::string& attr_name) const {
  for (const auto& a : attrs)
    if (a.name == attr_name) return &a;
  return nullptr;
}

std::vector<TensorType> run_shape_rule(const InferCtx& ctx) {
  const OpInfo& info = op_info(ctx.op);
  if (!info.has(kContainer))
    for (size_t i = 0; i < ctx.inputs.size(); ++i)
      if (!ctx.inputs[i].is_tensor())
        ctx.fail(str("operand ", i, " is ", ctx.inputs[i].to_string(), "; '", info.name,
                     "' takes tensors only (sequences and optionals go through sequence_*/optional_* ops)"));
  // Strings only flow through ops that compare or move whole elements, read only shapes, or pass
  // values along (control flow, containers); everything else names the op and the operand.
  const bool strings_ok =
      info.has(kStrings) || info.has(kShapeOnly) || info.has(kContainer) || info.has(kSubgraph);
  if (!strings_ok)
    for (size_t i = 0; i < ctx.inputs.size(); ++i)
      if (ctx.inputs[i].dtype == DType::Str)
        ctx.fail(str("operand ", i, " has dtype str; '", info.name,
                     "' has no string version (strings support eq, ne and data movement ops only)"));
  std::vector<TensorType> results = info.shape_fn(ctx);
  if (!strings_ok)
    for (size_t i = 0; i < results.size(); ++i)
      if (results[i].dtype == DType::Str)
        ctx.fail(str("result ", i, " would have dtype str; '", info.name, "' cannot produce strings"));
  return results;
}

void InferCtx::fail(const std::string& msg) const {
  std::string types;
  for (size_t i = 0; i < inputs.size(); ++i) types += (i ? ", " : "") + inputs[i].to_string();
  throw Error(str(where, ": ", msg, " (operands: ", types.empty() ? "none" : types, ")"));
}

SymInt InferCtx::require_equal(const SymInt& a, const SymInt& b, const std::string& what) const {
  auto proven = SymInt::prove_equal(a, b);
  if (proven.has_value()) {
    if (!*proven) fail(str(what, ": ", a.to_string(), " != ", b.to_string()));
    return a;
  }
  if (!guards) fail(str(what, ": cannot prove ", a.to_string(), " == ", b.to_string()));
  guards->push_back(ShapeGuard{a, b, str(where, ": ", what)});
  return a.is_constant() ? a : (b.is_constant() ? b : a);
}

int InferCtx::normalize_axis(int64_t axis, int rank, const std::string& what) const {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) fail(str(what, " ", axis, " is out of range for rank ", rank));
  return int(a);
}

}  // namespace kiln
