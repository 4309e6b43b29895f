// Loop IR factories, printer and verifier. Why: every kernel can be dumped for `kiln explain` and
// is checked before any C++ is generated from it.
#include "lower/loop_ir.h"

#include <map>
#include <set>
#include <sstream>

#include "kiln/error.h"

namespace kiln::lower {

std::string_view fold_name(Fold f) {
  switch (f) {
    case Fold::Sum: return "sum";
    case Fold::Prod: return "prod";
    case Fold::Max: return "max";
    case Fold::Min: return "min";
  }
  return "?";
}

std::string_view compute_type_name(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: return "float";
    case DType::F8E4M3FN: case DType::F8E4M3FNUZ: case DType::F8E5M2: case DType::F8E5M2FNUZ:
    case DType::F4E2M1: case DType::F8E8M0: return "float";
    case DType::F64: return "double";
    case DType::I8: return "int8_t";
    case DType::I16: return "int16_t";
    case DType::I32: return "int32_t";
    case DType::I64: return "int64_t";
    case DType::U8: return "uint8_t";
    case DType::U16: return "uint16_t";
    case DType::U32: return "uint32_t";
    case DType::Bool: return "bool";
    case DType::U64: return "uint64_t";
    case DType::I4: return "int8_t";   // kept in [-8, 7]
    case DType::U4: return "uint8_t";  // kept in [0, 15]
    case DType::Str: break;            // never in a kernel: string nodes are host steps
  }
  return "?";
}

ScalarPtr Scalar::load(DType dtype, int param, Index index) {
  auto s = std::make_shared<Scalar>();
  s->kind = kLoad;
  s->dtype = dtype;
  s->param = param;
  s->index = std::move(index);
  return s;
}
ScalarPtr Scalar::apply(Op op, DType dtype, Attrs attrs, std::vector<ScalarPtr> args) {
  auto s = std::make_shared<Scalar>();
  s->kind = kOp;
  s->op = op;
  s->dtype = dtype;
  s->attrs = std::move(attrs);
  s->args = std::move(args);
  return s;
}
ScalarPtr Scalar::constant(DType dtype, double value) {
  auto s = std::make_shared<Scalar>();
  s->kind = kConst;
  s->dtype = dtype;
  s->value = value;
  return s;
}
ScalarPtr Scalar::ref(DType dtype, std::string name) {
  auto s = std::make_shared<Scalar>();
  s->kind = kRef;
  s->dtype = dtype;
  s->name = std::move(name);
  return s;
}

ScalarPtr Scalar::index_value(DType dtype, Index index) {
  auto s = std::make_shared<Scalar>();
  s->kind = kIndexValue;
  s->dtype = dtype;
  s->index = std::move(index);
  return s;
}

Stmt Stmt::for_loop(std::string var, Index extent, std::vector<Stmt> body) {
  Stmt s;
  s.kind = kFor;
  s.var = std::move(var);
  s.extent = std::move(extent);
  s.body = std::move(body);
  return s;
}
Stmt Stmt::let(std::string name, ScalarPtr value) {
  Stmt s;
  s.kind = kLet;
  s.name = std::move(name);
  s.dtype = value->dtype;
  s.value = std::move(value);
  return s;
}
Stmt Stmt::store(int param, Index index, ScalarPtr value) {
  Stmt s;
  s.kind = kStore;
  s.param = param;
  s.index = std::move(index);
  s.dtype = value->dtype;
  s.value = std::move(value);
  return s;
}
Stmt Stmt::acc_init(std::string name, DType dtype, Fold fold) {
  Stmt s;
  s.kind = kAccInit;
  s.name = std::move(name);
  s.dtype = dtype;
  s.fold = fold;
  return s;
}
Stmt Stmt::acc_update(std::string name, DType dtype, Fold fold, ScalarPtr value) {
  Stmt s;
  s.kind = kAccUpdate;
  s.name = std::move(name);
  s.dtype = dtype;
  s.fold = fold;
  s.value = std::move(value);
  return s;
}

namespace {

std::string scalar_text(const Scalar& s) {
  switch (s.kind) {
    case Scalar::kLoad: return str("p", s.param, "[", s.index.to_string(), "]");
    case Scalar::kConst: return str(s.value, ":", dtype_name(s.dtype));
    case Scalar::kRef: return s.name;
    case Scalar::kIndexValue: return str("index(", s.index.to_string(), ")");
    case Scalar::kOp: {
      std::string out = str(op_name(s.op), "(");
      for (size_t i = 0; i < s.args.size(); ++i) out += (i ? ", " : "") + scalar_text(*s.args[i]);
      return out + ")";
    }
  }
  return "?";
}

void print_stmts(std::ostringstream& os, const std::vector<Stmt>& body, int depth) {
  std::string pad(size_t(depth) * 2, ' ');
  for (const Stmt& s : body) {
    switch (s.kind) {
      case Stmt::kFor:
        os << pad << "for " << s.var << " in 0.." << s.extent.to_string();
        if (s.parallel)
          os << " parallel" << (s.collapse > 1 ? str("(collapse ", s.collapse, ")") : "")
             << " (work " << s.parallel_work.to_string() << ")";
        if (s.vectorize) os << " vector";
        os << ":\n";
        print_stmts(os, s.body, depth + 1);
        break;
      case Stmt::kLet:
        os << pad << s.name << ": " << dtype_name(s.dtype) << " = " << scalar_text(*s.value) << "\n";
        break;
      case Stmt::kStore:
        os << pad << "p" << s.param << "[" << s.index.to_string() << "] = " << scalar_text(*s.value)
           << "\n";
        break;
      case Stmt::kAccInit:
        os << pad << "acc " << s.name << ": " << dtype_name(s.dtype) << " = identity("
           << fold_name(s.fold) << ")\n";
        break;
      case Stmt::kAccUpdate:
        os << pad << s.name << " = " << fold_name(s.fold) << "(" << s.name << ", "
           << scalar_text(*s.value) << ")\n";
        break;
    }
  }
}

struct Verifier {
  const LoopKernel& k;
  std::set<std::string> loop_vars;
  std::set<std::string> names;  // lets and accumulators in scope
  std::set<std::string> extents;

  [[noreturn]] void fail(const std::string& msg) const {
    throw Error(str("Loop IR verifier: kernel ", k.name, ": ", msg));
  }

  void check_index(const Index& idx, const std::string& where) const {
    std::set<std::string> syms;
    idx.collect_symbols(syms);
    for (const auto& s : syms)
      if (!loop_vars.count(s) && !extents.count(s))
        fail(str(where, " uses '", s, "', which is neither an enclosing loop var nor an extent"));
  }

  void check_scalar(const Scalar& s) const {
    switch (s.kind) {
      case Scalar::kLoad:
        if (s.param < 0 || s.param >= int(k.params.size())) fail(str("load of unknown param p", s.param));
        if (k.params[size_t(s.param)].dtype != s.dtype)
          fail(str("load of p", s.param, " as ", dtype_name(s.dtype), " but it holds ",
                   dtype_name(k.params[size_t(s.param)].dtype)));
        check_index(s.index, str("load of p", s.param));
        break;
      case Scalar::kRef:
        if (!names.count(s.name)) fail(str("reference to '", s.name, "' before its definition"));
        break;
      case Scalar::kOp:
        if (!has_trait(s.op, kElementwise)) fail(str("scalar op ", op_name(s.op), " is not elementwise"));
        for (const auto& a : s.args) check_scalar(*a);
        break;
      case Scalar::kIndexValue: check_index(s.index, "index value"); break;
      case Scalar::kConst: break;
    }
  }

  void define(const std::string& name) {
    if (names.count(name) || loop_vars.count(name)) fail(str("'", name, "' is defined twice"));
    names.insert(name);
  }

  void check_body(const std::vector<Stmt>& body) {
    std::vector<std::string> scoped;
    for (const Stmt& s : body) {
      switch (s.kind) {
        case Stmt::kFor: {
          check_index(s.extent, str("extent of loop ", s.var));
          if (loop_vars.count(s.var) || names.count(s.var)) fail(str("loop var ", s.var, " shadows another name"));
          if (s.parallel && s.collapse > 1) {
            const Stmt* cur = &s;
            for (int d = 1; d < s.collapse; ++d) {
              if (cur->body.size() != 1 || cur->body[0].kind != Stmt::kFor)
                fail(str("loop ", s.var, " collapses ", s.collapse, " loops that are not perfectly nested"));
              cur = &cur->body[0];
            }
          }
          loop_vars.insert(s.var);
          check_body(s.body);
          loop_vars.erase(s.var);
          break;
        }
        case Stmt::kLet:
          check_scalar(*s.value);
          define(s.name);
          scoped.push_back(s.name);
          break;
        case Stmt::kAccInit:
          define(s.name);
          scoped.push_back(s.name);
          break;
        case Stmt::kAccUpdate:
          if (!names.count(s.name)) fail(str("update of undeclared accumulator ", s.name));
          check_scalar(*s.value);
          break;
        case Stmt::kStore:
          if (s.param < 0 || s.param >= int(k.params.size())) fail(str("store to unknown param p", s.param));
          if (!k.params[size_t(s.param)].is_output) fail(str("store to input param p", s.param));
          check_index(s.index, str("store to p", s.param));
          check_scalar(*s.value);
          break;
      }
    }
    for (const auto& n : scoped) names.erase(n);
  }
};

}  // namespace

std::string print_kernel(const LoopKernel& k) {
  std::ostringstream os;
  os << "kernel " << k.name << "(";
  for (size_t i = 0; i < k.params.size(); ++i)
    os << (i ? ", " : "") << (k.params[i].is_output ? "out " : "in ") << "p" << i << ": "
       << dtype_name(k.params[i].dtype) << "[" << k.params[i].numel.to_string() << "] "
       << k.params[i].label;
  os << ")";
  if (!k.symbols.empty()) {
    os << "  extents:";
    for (size_t i = 0; i < k.symbols.size(); ++i) os << " s" << i << "=" << k.symbols[i];
  }
  os << "\n";
  for (const auto& note : k.notes) os << "  # " << note << "\n";
  print_stmts(os, k.body, 1);
  return os.str();
}

void verify_kernel(const LoopKernel& k) {
  Verifier v{k, {}, {}, {}};
  for (size_t i = 0; i < k.symbols.size(); ++i) v.extents.insert(str("s", i));
  v.check_body(k.body);
}

}  // namespace kiln::lower
