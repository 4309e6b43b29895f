// Loop IR -> C++ text (see c_emitter.h). Each elementwise op's formula mirrors its reference
// kernel in src/interp: floats compute in the dtype's compute type (f16/bf16 in float), integers
// in their own type with wrapping arithmetic through uint64_t.
#include "codegen/common/c_emitter.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>

#include "kiln/error.h"

namespace kiln::codegen {

using lower::Fold;
using lower::LoopKernel;
using lower::Scalar;
using lower::Stmt;

namespace {

std::string ct(DType t) { return std::string(lower::compute_type_name(t)); }

std::string storage_type(DType t) {
  if (t == DType::F16 || t == DType::BF16) return "uint16_t";
  if (is_narrow_float(t)) return "uint8_t";
  return ct(t);
}

// The prelude's number for a narrow float format (kiln_f32_to_narrow's `kind`).
int narrow_kind(DType t) {
  switch (t) {
    case DType::F8E4M3FN: return 0;
    case DType::F8E4M3FNUZ: return 1;
    case DType::F8E5M2: return 2;
    case DType::F8E5M2FNUZ: return 3;
    case DType::F4E2M1: return 4;
    default: break;
  }
  throw Error(str("internal error: ", dtype_name(t), " is not an 8- or 4-bit float with a kind number"));
}

// Code -> float and float -> code for the 8- and 4-bit floats.
std::string narrow_to_float(DType t, const std::string& code) {
  if (t == DType::F8E8M0) return str("kiln_e8m0_to_f32(", code, ")");
  return str("kiln_narrow_to_f32(", code, ", ", narrow_kind(t), ")");
}
std::string float_to_narrow(DType t, const std::string& v) {
  if (t == DType::F8E8M0) return str("kiln_f32_to_e8m0(float(", v, "))");
  return str("kiln_f32_to_narrow(float(", v, "), ", narrow_kind(t), ")");
}
// 4-bit integers keep their values in [-8, 7] / [0, 15]: every result wraps to the low nibble.
std::string wrap_4bit(DType t, const std::string& v) {
  return str(ct(t), "(kiln_wrap4(int64_t(", v, "), ", t == DType::I4 ? "true" : "false", "))");
}

std::string double_literal(double v) {
  // Parenthesised like the finite literals: typed_constant writes "float" + literal.
  if (std::isnan(v)) return "(std::numeric_limits<double>::quiet_NaN())";
  if (std::isinf(v)) return v > 0 ? "(std::numeric_limits<double>::infinity())"
                                  : "(-std::numeric_limits<double>::infinity())";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return "(" + s + ")";
}

std::string int_literal(int64_t v) {
  if (v == std::numeric_limits<int64_t>::lowest()) return "(-9223372036854775807LL - 1)";
  return str("INT64_C(", v, ")");
}

std::string typed_constant(DType t, double v) {
  if (t == DType::Bool) return v != 0 ? "true" : "false";
  if (is_float(t)) return str(ct(t), double_literal(v));
  return str(ct(t), "(", int_literal(int64_t(v)), ")");
}

// The position of `op` (" // " or " % ") at parenthesis depth 0 of s, or npos.
size_t top_level(const std::string& s, const char* op) {
  int depth = 0;
  size_t n = std::strlen(op);
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '(') ++depth;
    else if (s[i] == ')') --depth;
    else if (depth == 0 && s.compare(i, n, op) == 0) return i;
  }
  return std::string::npos;
}

// An index expression's text (SymInt::to_string: every floordiv and mod is one parenthesised
// "(a // b)" / "(a % b)") in C. Loop variables and dims are non-negative, so a dividend without a
// minus sign is too and C's / and % agree with the IR's floor semantics; others call the
// prelude's kiln_index_div / kiln_index_mod.
std::string index_c(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '(') {
      out += s[i];
      continue;
    }
    size_t j = i + 1;
    for (int depth = 1; depth > 0; ++j) depth += s[j] == '(' ? 1 : s[j] == ')' ? -1 : 0;
    std::string inner = s.substr(i + 1, j - i - 2);  // between the parentheses
    bool call = out.size() >= 3 && out.compare(out.size() - 3, 3, "max") == 0;
    if (call) out.replace(out.size() - 3, 3, "kiln_imax");
    size_t div = call ? std::string::npos : top_level(inner, " // ");
    size_t mod = call || div != std::string::npos ? std::string::npos : top_level(inner, " % ");
    size_t at = div != std::string::npos ? div : mod;
    if (at == std::string::npos) {
      out += "(" + index_c(inner) + ")";
    } else {
      std::string a = inner.substr(0, at), b = inner.substr(at + (div != std::string::npos ? 4 : 3));
      if (a.find('-') == std::string::npos && b.find('-') == std::string::npos)
        out += str("(", index_c(a), div != std::string::npos ? " / " : " % ", index_c(b), ")");
      else
        out += str(div != std::string::npos ? "kiln_index_div(" : "kiln_index_mod(", index_c(a), ", ", index_c(b), ")");
    }
    i = j - 1;
  }
  return out;
}

std::string index_text(const lower::Index& idx) { return index_c(idx.to_string()); }

std::string wrap_int(DType t, const std::string& a, const char* op, const std::string& b) {
  return str(ct(t), "(uint64_t(", a, ") ", op, " uint64_t(", b, "))");
}

int64_t int_bound(double b) {
  if (b <= -9.2e18) return std::numeric_limits<int64_t>::lowest();
  if (b >= 9.2e18) return std::numeric_limits<int64_t>::max();
  return int64_t(b);
}

// The C expression of elementwise op s applied to argument expressions a.
std::string formula(const Scalar& s, const std::vector<std::string>& a) {
  DType rt = s.dtype;
  std::string T = ct(rt);
  DType arg_t = s.args.empty() ? rt : s.args[s.op == Op::Where ? 1 : 0]->dtype;
  bool fl = is_float(arg_t);
  auto call = [&](const char* fn) { return str(fn, "(", a[0], ")"); };
  switch (s.op) {
    case Op::Neg: return fl ? str("(-", a[0], ")") : wrap_int(rt, "0", "-", a[0]);
    case Op::Abs:
      return fl ? call("std::fabs")
                : str("(", a[0], " < 0 ? ", wrap_int(rt, "0", "-", a[0]), " : ", a[0], ")");
    case Op::Exp: return call("kiln_exp");  // vectorisable on float (c_prelude.cc)
    case Op::Log: return call("std::log");
    case Op::Sqrt: return call("std::sqrt");
    case Op::Rsqrt: return str("(", T, "(1) / std::sqrt(", a[0], "))");
    case Op::Reciprocal: return str("(", T, "(1) / ", a[0], ")");
    case Op::Tanh: return call("std::tanh");
    case Op::Sigmoid: return str("(", T, "(1) / (", T, "(1) + kiln_exp(-", a[0], ")))");
    case Op::Erf: return call("kiln_erf");  // vectorisable on float (c_prelude.cc)
    case Op::Relu: return fl ? call("kiln_relu") : str("(", a[0], " > 0 ? ", a[0], " : ", T, "(0))");
    case Op::Gelu:  // vectorisable forms in c_prelude.cc
      if (s.attrs.get_string("approximate") == "tanh") return call("kiln_gelu_tanh");
      return call("kiln_gelu");
    case Op::Silu: return str("(", a[0], " / (", T, "(1) + kiln_exp(-", a[0], ")))");
    case Op::Sin: return call("std::sin");
    case Op::Cos: return call("std::cos");
    case Op::Floor: return call("std::floor");
    case Op::Ceil: return call("std::ceil");
    case Op::Round: return call("std::nearbyint");
    case Op::Sign: return fl ? call("kiln_sign") : str(T, "((", a[0], " > 0) - (", a[0], " < 0))");
    case Op::Not: return str("(!", a[0], ")");
    case Op::IsNan: return call("std::isnan");
    case Op::Cast: {
      if (rt == DType::Bool) return str("(", a[0], " != 0)");
      if (rt == DType::F16) return str("kiln_round_h(float(", a[0], "))");
      if (rt == DType::BF16) return str("kiln_round_b(float(", a[0], "))");
      // Through f32, as ONNX converts: the value the narrow code holds, back in float.
      if (is_narrow_float(rt)) return narrow_to_float(rt, float_to_narrow(rt, a[0]));
      if (rt == DType::I4 || rt == DType::U4)
        return wrap_4bit(rt, fl ? str("kiln_f2i<int64_t>(", a[0], ")") : a[0]);
      if (is_float(rt) || !fl) return str(T, "(", a[0], ")");
      return str("kiln_f2i<", T, ">(", a[0], ")");
    }
    case Op::Clamp: {
      double lo = s.attrs.get_float("min"), hi = s.attrs.get_float("max");
      if (fl) return str("kiln_clamp<", T, ">(", a[0], ", ", double_literal(lo), ", ", double_literal(hi), ")");
      std::string ilo = int_literal(int_bound(std::ceil(lo))), ihi = int_literal(int_bound(std::floor(hi)));
      return str(T, "(int64_t(", a[0], ") < ", ilo, " ? ", ilo, " : (int64_t(", a[0], ") > ", ihi, " ? ",
                 ihi, " : int64_t(", a[0], ")))");
    }
    case Op::Add: return fl ? str("(", a[0], " + ", a[1], ")") : wrap_int(rt, a[0], "+", a[1]);
    case Op::Sub: return fl ? str("(", a[0], " - ", a[1], ")") : wrap_int(rt, a[0], "-", a[1]);
    case Op::Mul: return fl ? str("(", a[0], " * ", a[1], ")") : wrap_int(rt, a[0], "*", a[1]);
    case Op::Div:
      return fl ? str("(", a[0], " / ", a[1], ")")
                : str("kiln_idiv<", T, ">(", a[0], ", ", a[1], ", kiln_status)");
    case Op::Pow:
      return fl ? str("std::pow(", a[0], ", ", a[1], ")")
                : str("kiln_ipow<", T, ">(", a[0], ", ", a[1], ", kiln_status)");
    case Op::Maximum:
      return fl ? str("kiln_fmax<", T, ">(", a[0], ", ", a[1], ")")
                : str("(", a[0], " > ", a[1], " ? ", a[0], " : ", a[1], ")");
    case Op::Minimum:
      return fl ? str("kiln_fmin<", T, ">(", a[0], ", ", a[1], ")")
                : str("(", a[0], " < ", a[1], " ? ", a[0], " : ", a[1], ")");
    case Op::Mod: {
      bool c_fmod = s.attrs.get_int("fmod") != 0;
      if (fl) return c_fmod ? str("std::fmod(", a[0], ", ", a[1], ")") : str("kiln_pymod<", T, ">(", a[0], ", ", a[1], ")");
      return str("kiln_imod<", T, ">(", a[0], ", ", a[1], ", ", c_fmod ? "true" : "false", ", kiln_status)");
    }
    case Op::Eq: return str("(", a[0], " == ", a[1], ")");
    case Op::Ne: return str("(", a[0], " != ", a[1], ")");
    case Op::Lt: return str("(", a[0], " < ", a[1], ")");
    case Op::Le: return str("(", a[0], " <= ", a[1], ")");
    case Op::Gt: return str("(", a[0], " > ", a[1], ")");
    case Op::Ge: return str("(", a[0], " >= ", a[1], ")");
    case Op::And: return str("(", a[0], " && ", a[1], ")");
    case Op::Or: return str("(", a[0], " || ", a[1], ")");
    case Op::Xor: return str("(", a[0], " != ", a[1], ")");
    case Op::Where: return str("(", a[0], " ? ", a[1], " : ", a[2], ")");
    case Op::Asin: return call("std::asin");
    case Op::Acos: return call("std::acos");
    case Op::Atan: return call("kiln_atan");
    case Op::Sinh: return call("std::sinh");
    case Op::Cosh: return call("std::cosh");
    case Op::Asinh: return call("std::asinh");
    case Op::Acosh: return call("std::acosh");
    case Op::Atanh: return call("std::atanh");
    case Op::BitNot: return str(T, "(~int64_t(", a[0], "))");
    case Op::BitAnd: return str(T, "(int64_t(", a[0], ") & int64_t(", a[1], "))");
    case Op::BitOr: return str(T, "(int64_t(", a[0], ") | int64_t(", a[1], "))");
    case Op::BitXor: return str(T, "(int64_t(", a[0], ") ^ int64_t(", a[1], "))");
    case Op::BitShift: {
      // As the reference kernel: shifting by the bit width or more gives 0 (or -1 for a negative
      // signed value shifted right); unsigned values widen to non-negative int64.
      std::string x = str("int64_t(", a[0], ")"), n = str("int64_t(", a[1], ")");
      if (s.attrs.get_int("left") != 0)
        return str(T, "(", n, " < 0 || ", n, " >= ", dtype_size(rt) * 8, " ? uint64_t(0) : uint64_t(", x, ") << ", n, ")");
      return str(T, "(", n, " < 0 ? int64_t(0) : ", n, " >= 64 ? (", x, " < 0 ? int64_t(-1) : int64_t(0)) : ", x,
                 " >> ", n, ")");
    }
    default: break;
  }
  throw Error(str("internal error: no C formula for op ", op_name(s.op)));
}

// f16/bf16 values computed inside a kernel stay in float (as PyTorch's opmath and the row kernels
// do: a decomposed softmax rounds once, not per primitive), except where a discontinuous op reads
// them: a comparison, floor/ceil/round/sign or a cast sees the value rounded to its dtype,
// the value the graph names (eq(sin(x), x) in bf16: tests/fuzz/regressions).
bool reads_exact_value(Op op) {
  switch (op) {
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: case Op::Floor:
    case Op::Ceil: case Op::Round: case Op::Sign: case Op::Cast:
      return true;
    default:
      return false;
  }
}

// sqrt, rsqrt, reciprocal, log, mod and pow jump where a tiny value rounds to a signed zero (rsqrt
// of gelu(-9) in f16: -inf for the -0 the graph holds, NaN for the -1e-20 the float holds): they
// read their operand flushed to zero where the dtype would (kiln_flush_h) but with the float's
// precision, so a softmax's or norm's row statistic loses nothing. Overflow is not emulated: the
// f16-typed intermediates of a decomposed layer_norm (its variance) legitimately exceed 65504.
bool reads_dtype_range(Op op) {
  return op == Op::Sqrt || op == Op::Rsqrt || op == Op::Reciprocal || op == Op::Log || op == Op::Mod || op == Op::Pow;
}

std::string rounded_for(Op consumer, const Scalar& arg, const std::string& e) {
  // Loads and literals hold values of the dtype already; ops and named scalars (lets) may not.
  if (arg.kind != Scalar::kOp && arg.kind != Scalar::kRef) return e;
  const bool exact = reads_exact_value(consumer);
  if (!exact && !reads_dtype_range(consumer)) return e;
  if (arg.dtype == DType::F16) return str(exact ? "kiln_round_h" : "kiln_flush_h", "(float(", e, "))");
  if (arg.dtype == DType::BF16) return str(exact ? "kiln_round_b" : "kiln_flush_b", "(float(", e, "))");
  return e;
}

std::string scalar_expr(const Scalar& s) {
  switch (s.kind) {
    case Scalar::kLoad: {
      std::string e = str("p", s.param, "[", index_text(s.index), "]");
      if (s.dtype == DType::F16) return str("kiln_h2f(", e, ")");
      if (s.dtype == DType::BF16) return str("kiln_b2f(", e, ")");
      if (is_narrow_float(s.dtype)) return narrow_to_float(s.dtype, e);
      return e;
    }
    case Scalar::kConst: return typed_constant(s.dtype, s.value);
    case Scalar::kRef: return s.name;
    case Scalar::kIndexValue: return str(ct(s.dtype), "(", index_text(s.index), ")");
    case Scalar::kOp: {
      std::vector<std::string> args;
      for (const auto& a : s.args) args.push_back(rounded_for(s.op, *a, scalar_expr(*a)));
      std::string e = formula(s, args);
      // Integer results are narrowed to their dtype after every op, as the interpreter does.
      if ((s.dtype == DType::I4 || s.dtype == DType::U4) && s.op != Op::Cast) return wrap_4bit(s.dtype, e);
      return e;
    }
  }
  return "?";
}

std::string store_expr(DType t, const std::string& v) {
  if (t == DType::F16) return str("kiln_f2h(", v, ")");
  if (t == DType::BF16) return str("kiln_f2b(", v, ")");
  if (is_narrow_float(t)) return float_to_narrow(t, v);
  if (t == DType::I4 || t == DType::U4) return wrap_4bit(t, v);
  return str(ct(t), "(", v, ")");
}

std::string acc_identity(DType t, Fold f) {
  bool fl = is_float(t);
  switch (f) {
    case Fold::Sum: return str(ct(t), "(0)");
    case Fold::Prod: return str(ct(t), "(1)");
    case Fold::Max:
      return fl ? str("-std::numeric_limits<", ct(t), ">::infinity()") : str("std::numeric_limits<", ct(t), ">::lowest()");
    case Fold::Min:
      return fl ? str("std::numeric_limits<", ct(t), ">::infinity()") : str("std::numeric_limits<", ct(t), ">::max()");
  }
  return "0";
}

std::string acc_update(const Stmt& st) {
  std::string v = scalar_expr(*st.value), a = st.name;
  bool fl = is_float(st.dtype);
  switch (st.fold) {
    case Fold::Sum: return fl ? str(a, " += ", v, ";") : str(a, " = ", wrap_int(st.dtype, a, "+", v), ";");
    case Fold::Prod: return fl ? str(a, " *= ", v, ";") : str(a, " = ", wrap_int(st.dtype, a, "*", v), ";");
    case Fold::Max:
      return fl ? str(a, " = kiln_acc_max<", ct(st.dtype), ">(", a, ", ", v, ");")
                : str("{ ", ct(st.dtype), " v_ = ", v, "; ", a, " = v_ > ", a, " ? v_ : ", a, "; }");
    case Fold::Min:
      return fl ? str(a, " = kiln_acc_min<", ct(st.dtype), ">(", a, ", ", v, ");")
                : str("{ ", ct(st.dtype), " v_ = ", v, "; ", a, " = v_ < ", a, " ? v_ : ", a, "; }");
  }
  return "";
}

// Accumulators declared outside `loop` and updated inside it, with their folds and dtypes.
void outer_accumulators(const std::vector<Stmt>& body, const std::set<std::string>& declared_inside,
                        std::vector<const Stmt*>& out) {
  std::set<std::string> inner = declared_inside;
  for (const Stmt& st : body) {
    if (st.kind == Stmt::kAccInit) inner.insert(st.name);
    if (st.kind == Stmt::kAccUpdate && !inner.count(st.name)) {
      bool seen = false;
      for (const Stmt* o : out) seen |= o->name == st.name;
      if (!seen) out.push_back(&st);
    }
    if (st.kind == Stmt::kFor) outer_accumulators(st.body, inner, out);
  }
}

struct Printer {
  const LoopKernel& k;
  const CTarget& target;
  std::ostringstream os;

  void line(int depth, const std::string& text) { os << std::string(size_t(depth) * 2, ' ') << text << "\n"; }

  void emit_for(const Stmt& st, int depth) {
    std::vector<const Stmt*> accs;
    outer_accumulators(st.body, {}, accs);
    // Float max/min use the NaN-propagating reductions declared in the prelude.
    std::string clauses;
    bool combinable = true;
    for (const Stmt* a : accs) {
      bool fl = is_float(a->dtype);
      const char* op = a->fold == Fold::Sum ? "+" : a->fold == Fold::Prod ? "*" : a->fold == Fold::Max ? "max" : "min";
      if (fl && (a->fold == Fold::Max || a->fold == Fold::Min)) op = a->fold == Fold::Max ? "kiln_max" : "kiln_min";
      clauses += str(" reduction(", op, ":", a->name, ")");
    }
    if (target.openmp && combinable) {
      bool par = st.parallel, simd = st.vectorize;
      if (par || simd) {
        std::string pragma = "#pragma omp";
        if (par) pragma += " parallel for";
        if (simd) pragma += " simd";
        if (par && st.collapse > 1) pragma += str(" collapse(", st.collapse, ")");
        if (par) {
          pragma += " schedule(static) num_threads(kiln_nthreads > 0 ? kiln_nthreads : omp_get_max_threads())";
          if (!st.parallel_work.is_constant())
            pragma += str(" if(", index_text(st.parallel_work), " >= ", k.parallel_threshold, ")");
        }
        pragma += clauses;
        line(0, pragma);
      }
    }
    line(depth, str("for (int64_t ", st.var, " = 0; ", st.var, " < ", index_text(st.extent), "; ++", st.var, ") {"));
    emit_body(st.body, depth + 1);
    line(depth, "}");
  }

  void emit_body(const std::vector<Stmt>& body, int depth) {
    for (const Stmt& st : body) {
      switch (st.kind) {
        case Stmt::kFor: emit_for(st, depth); break;
        case Stmt::kLet: line(depth, str("const ", ct(st.dtype), " ", st.name, " = ", scalar_expr(*st.value), ";")); break;
        case Stmt::kStore:
          line(depth, str("p", st.param, "[", index_text(st.index), "] = ",
                          store_expr(k.params[size_t(st.param)].dtype, scalar_expr(*st.value)), ";"));
          break;
        case Stmt::kAccInit: line(depth, str(ct(st.dtype), " ", st.name, " = ", acc_identity(st.dtype, st.fold), ";")); break;
        case Stmt::kAccUpdate: line(depth, acc_update(st)); break;
      }
    }
  }

  std::string run() {
    os << "// " << k.name << ": " << k.source_ops.size() << " ops fused:";
    for (const auto& op : k.source_ops) os << " " << op;
    os << "\n" << target.function_qualifier << " " << k.name
       << "(void* const* kiln_bufs, const int64_t* kiln_syms, int kiln_nthreads, int* kiln_status) {\n";
    for (size_t i = 0; i < k.symbols.size(); ++i)
      line(1, str("const int64_t s", i, " = kiln_syms[", i, "]; (void)s", i, ";  // ", k.symbols[i]));
    for (size_t i = 0; i < k.params.size(); ++i) {
      const auto& p = k.params[i];
      std::string t = storage_type(p.dtype);
      line(1, str(p.is_output ? "" : "const ", t, p.may_alias ? "* p" : "* __restrict p", i, " = static_cast<",
                  p.is_output ? "" : "const ", t, "*>(kiln_bufs[", i, "]);  // ", p.label));
    }
    line(1, "(void)kiln_nthreads; (void)kiln_status;");
    emit_body(k.body, 1);
    os << "}\n";
    return os.str();
  }
};

}  // namespace

bool can_emit_elementwise(const Node& n) {
  if (!n.info().has(kElementwise)) return false;
  switch (n.op) {
    case Op::Gelu: {
      const std::string& mode = n.attrs.get_string("approximate");
      return mode == "none" || mode == "tanh";
    }
    case Op::Neg: case Op::Abs: case Op::Exp: case Op::Log: case Op::Sqrt: case Op::Rsqrt:
    case Op::Reciprocal: case Op::Tanh: case Op::Sigmoid: case Op::Erf: case Op::Relu:
    case Op::Silu: case Op::Sin: case Op::Cos: case Op::Floor: case Op::Ceil: case Op::Round:
    case Op::Sign: case Op::Not: case Op::IsNan: case Op::Cast: case Op::Clamp: case Op::Add:
    case Op::Sub: case Op::Mul: case Op::Div: case Op::Pow: case Op::Maximum: case Op::Minimum:
    case Op::Mod: case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge:
    case Op::And: case Op::Or: case Op::Xor: case Op::Where:
    case Op::Asin: case Op::Acos: case Op::Atan: case Op::Sinh: case Op::Cosh: case Op::Asinh:
    case Op::Acosh: case Op::Atanh: case Op::BitNot: case Op::BitAnd: case Op::BitOr: case Op::BitXor:
    case Op::BitShift:
      return true;
    default: return false;
  }
}

std::string emit_kernel(const LoopKernel& k, const CTarget& target) {
  Printer p{k, target, {}};
  return p.run();
}

std::string c_scalar_expression(const lower::Scalar& s) { return scalar_expr(s); }
std::vector<const lower::Stmt*> c_outer_accumulators(const std::vector<lower::Stmt>& body) {
  std::vector<const Stmt*> out;
  outer_accumulators(body, {}, out);
  return out;
}
std::string c_index_expression(const lower::Index& index) { return index_text(index); }
std::string c_store_expression(DType t, const std::string& v) { return store_expr(t, v); }
std::string c_storage_type(DType t) { return storage_type(t); }
std::string c_accumulator_identity(DType t, lower::Fold f) { return acc_identity(t, f); }
std::string c_accumulator_update(const lower::Stmt& update) { return acc_update(update); }
std::string c_fold_combine(DType t, lower::Fold f, const std::string& a, const std::string& b) {
  bool fl = is_float(t);
  switch (f) {
    case Fold::Sum: return fl ? str("(", a, " + ", b, ")") : wrap_int(t, a, "+", b);
    case Fold::Prod: return fl ? str("(", a, " * ", b, ")") : wrap_int(t, a, "*", b);
    case Fold::Max: return fl ? str("kiln_acc_max<", ct(t), ">(", a, ", ", b, ")") : str("(", b, " > ", a, " ? ", b, " : ", a, ")");
    case Fold::Min: return fl ? str("kiln_acc_min<", ct(t), ">(", a, ", ", b, ")") : str("(", b, " < ", a, " ? ", b, " : ", a, ")");
  }
  return a;
}

}  // namespace kiln::codegen
