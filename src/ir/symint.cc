// SymInt canonical form and simplifier: polynomials with integer coefficients over atoms, where an
// atom is a named dim or an irreducible floordiv/mod/max. Division by a constant pulls divisible
// terms out exactly: (c*x + r) // c == x + r // c for integer x.
#include "kiln/symint.h"

#include <algorithm>
#include <cctype>

#include "kiln/error.h"

namespace kiln {

namespace {

struct SymAtom {
  enum Kind { kSymbol, kFloorDiv, kMod, kMax } kind;
  std::string name;  // symbol name
  SymInt a, b;       // operands for floordiv/mod/max
  std::string key;   // canonical printed form: ordering and equality
};
using AtomPtr = std::shared_ptr<const SymAtom>;
using Monomial = std::vector<AtomPtr>;  // sorted by key, repeats allowed

struct MonoLess {
  bool operator()(const Monomial& x, const Monomial& y) const {
    // Higher degree first, then by keys, so printing reads "B*T + B + 1".
    if (x.size() != y.size()) return x.size() > y.size();
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i]->key != y[i]->key) return x[i]->key < y[i]->key;
    return false;
  }
};

int64_t py_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t py_mod(int64_t a, int64_t b) { return a - py_floordiv(a, b) * b; }

}  // namespace

struct SymPoly {
  std::map<Monomial, int64_t, MonoLess> terms;  // empty monomial = constant term
};

namespace {

SymPoly to_poly(const SymInt& s) {
  if (s.poly()) return *s.poly();
  SymPoly p;
  if (s.constant() != 0) p.terms[{}] = s.constant();
  return p;
}

// Dimension arithmetic that leaves int64 is an error to report, not undefined behaviour (absurd
// shapes in a corrupt model file reach here).
int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  KILN_CHECK(!__builtin_add_overflow(a, b, &r), "dimension arithmetic overflows int64: ", a, " + ", b);
  return r;
}
int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  KILN_CHECK(!__builtin_mul_overflow(a, b, &r), "dimension arithmetic overflows int64: ", a, " * ", b);
  return r;
}

void add_term(SymPoly& p, const Monomial& m, int64_t c) {
  if (c == 0) return;
  auto it = p.terms.find(m);
  if (it == p.terms.end()) {
    p.terms.emplace(m, c);
  } else {
    it->second = checked_add(it->second, c);
    if (it->second == 0) p.terms.erase(it);
  }
}

SymInt atom_value(AtomPtr atom) {
  SymPoly p;
  p.terms[{std::move(atom)}] = 1;
  return SymInt::from_poly(std::move(p));
}

// Operands that are sums print in parentheses so the key parses back to the same expression.
std::string operand_text(const SymInt& s) {
  std::string t = s.to_string();
  return t.find(' ') == std::string::npos ? t : "(" + t + ")";
}

SymInt make_atom(SymAtom::Kind kind, const SymInt& a, const SymInt& b) {
  auto atom = std::make_shared<SymAtom>();
  atom->kind = kind;
  atom->a = a;
  atom->b = b;
  switch (kind) {
    case SymAtom::kFloorDiv: atom->key = "(" + operand_text(a) + " // " + operand_text(b) + ")"; break;
    case SymAtom::kMod: atom->key = "(" + operand_text(a) + " % " + operand_text(b) + ")"; break;
    case SymAtom::kMax: atom->key = "max(" + a.to_string() + ", " + b.to_string() + ")"; break;
    case SymAtom::kSymbol: break;
  }
  return atom_value(atom);
}

// Splits p into the part whose coefficients are divisible by c, and the rest with its constant
// reduced modulo c. Returns {divisible / c, remainder}.
std::pair<SymPoly, SymPoly> split_divisible(const SymPoly& p, int64_t c) {
  SymPoly quotient, rest;
  for (const auto& [mono, coeff] : p.terms) {
    if (mono.empty()) {
      add_term(quotient, mono, py_floordiv(coeff, c));
      add_term(rest, mono, py_mod(coeff, c));
    } else if (coeff % c == 0) {
      add_term(quotient, mono, coeff / c);
    } else {
      add_term(rest, mono, coeff);
    }
  }
  return {quotient, rest};
}

}  // namespace

SymInt SymInt::from_poly(SymPoly p) {
  if (p.terms.empty()) return SymInt(0);
  if (p.terms.size() == 1 && p.terms.begin()->first.empty()) return SymInt(p.terms.begin()->second);
  SymInt s;
  s.poly_ = std::make_shared<const SymPoly>(std::move(p));
  return s;
}

SymInt SymInt::symbol(const std::string& name) {
  KILN_CHECK(!name.empty(), "symbolic dim needs a name");
  auto atom = std::make_shared<SymAtom>();
  atom->kind = SymAtom::kSymbol;
  atom->name = name;
  atom->key = name;
  return atom_value(atom);
}

int64_t SymInt::constant() const {
  KILN_CHECK(is_constant(), "dimension ", to_string(), " is symbolic where a constant is needed");
  return c_;
}

SymInt operator+(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) return SymInt(checked_add(a.c_, b.c_));
  SymPoly p = to_poly(a);
  for (const auto& [m, c] : to_poly(b).terms) add_term(p, m, c);
  return SymInt::from_poly(std::move(p));
}

SymInt SymInt::operator-() const { return SymInt(-1) * *this; }
SymInt operator-(const SymInt& a, const SymInt& b) { return a + (-b); }

SymInt operator*(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) return SymInt(checked_mul(a.c_, b.c_));
  SymPoly pa = to_poly(a), pb = to_poly(b), out;
  for (const auto& [ma, ca] : pa.terms) {
    for (const auto& [mb, cb] : pb.terms) {
      Monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end(), [](const AtomPtr& x, const AtomPtr& y) { return x->key < y->key; });
      add_term(out, m, checked_mul(ca, cb));
    }
  }
  return SymInt::from_poly(std::move(out));
}

SymInt floordiv(const SymInt& a, const SymInt& b) {
  if (b.is_constant()) {
    int64_t c = b.constant();
    KILN_CHECK(c != 0, "symbolic floordiv by zero: ", a.to_string(), " // 0");
    if (a.is_constant()) return SymInt(py_floordiv(a.constant(), c));
    if (c == 1) return a;
    if (c > 0) {
      auto [quotient, rest] = split_divisible(to_poly(a), c);
      SymInt q = SymInt::from_poly(quotient);
      SymInt r = SymInt::from_poly(rest);
      if (r.is_constant()) return q + SymInt(py_floordiv(r.constant(), c));
      return q + make_atom(SymAtom::kFloorDiv, r, b);
    }
  }
  if (a == b) return SymInt(1);
  return make_atom(SymAtom::kFloorDiv, a, b);
}

SymInt mod(const SymInt& a, const SymInt& b) {
  if (b.is_constant()) {
    int64_t c = b.constant();
    KILN_CHECK(c != 0, "symbolic mod by zero: ", a.to_string(), " % 0");
    if (a.is_constant()) return SymInt(py_mod(a.constant(), c));
    if (c == 1) return SymInt(0);
    if (c > 0) {
      SymInt r = SymInt::from_poly(split_divisible(to_poly(a), c).second);
      if (r.is_constant()) return SymInt(py_mod(r.constant(), c));
      return make_atom(SymAtom::kMod, r, b);
    }
  }
  if (a == b) return SymInt(0);
  return make_atom(SymAtom::kMod, a, b);
}

SymInt max(const SymInt& a, const SymInt& b) {
  SymInt d = a - b;
  if (d.is_constant()) return d.constant() >= 0 ? a : b;
  // Commutative: order the operands canonically so max(a, b) == max(b, a).
  if (b.to_string() < a.to_string()) return make_atom(SymAtom::kMax, b, a);
  return make_atom(SymAtom::kMax, a, b);
}

bool operator==(const SymInt& a, const SymInt& b) {
  if (a.is_constant() || b.is_constant()) return a.is_constant() && b.is_constant() && a.c_ == b.c_;
  const auto& ta = a.poly_->terms;
  const auto& tb = b.poly_->terms;
  if (ta.size() != tb.size()) return false;
  MonoLess less;
  for (auto ia = ta.begin(), ib = tb.begin(); ia != ta.end(); ++ia, ++ib) {
    if (ia->second != ib->second) return false;
    if (less(ia->first, ib->first) || less(ib->first, ia->first)) return false;
  }
  return true;
}

bool operator<(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) return a.c_ < b.c_;
  if (a.is_constant() != b.is_constant()) return a.is_constant();
  return a.to_string() < b.to_string();
}

std::optional<bool> SymInt::prove_equal(const SymInt& a, const SymInt& b) {
  SymInt d = a - b;
  if (d.is_constant()) return d.constant() == 0;
  return std::nullopt;
}

std::string SymInt::to_string() const {
  if (is_constant()) return std::to_string(c_);
  std::string out;
  bool first = true;
  auto emit = [&](const Monomial& m, int64_t coeff) {
    bool negative = coeff < 0;
    int64_t mag = negative ? -coeff : coeff;
    std::string body;
    if (m.empty()) {
      body = std::to_string(mag);
    } else {
      if (mag != 1) body = std::to_string(mag) + "*";
      for (size_t i = 0; i < m.size(); ++i) body += (i ? "*" : "") + m[i]->key;
    }
    if (first) out += (negative ? "-" : "") + body;
    else out += (negative ? " - " : " + ") + body;
    first = false;
  };
  const Monomial* constant_mono = nullptr;
  int64_t constant_coeff = 0;
  for (const auto& [m, c] : poly_->terms) {
    if (m.empty()) { constant_mono = &m; constant_coeff = c; continue; }
    emit(m, c);
  }
  if (constant_mono) emit(*constant_mono, constant_coeff);
  return out;
}

namespace {
int64_t eval_atom(const SymAtom& atom, const std::map<std::string, int64_t>& bindings) {
  switch (atom.kind) {
    case SymAtom::kSymbol: {
      auto it = bindings.find(atom.name);
      KILN_CHECK(it != bindings.end(), "no value bound for symbolic dim '", atom.name, "'");
      return it->second;
    }
    case SymAtom::kFloorDiv: {
      int64_t d = atom.b.evaluate(bindings);
      KILN_CHECK(d != 0, "division by zero evaluating ", atom.key);
      return py_floordiv(atom.a.evaluate(bindings), d);
    }
    case SymAtom::kMod: {
      int64_t d = atom.b.evaluate(bindings);
      KILN_CHECK(d != 0, "modulo by zero evaluating ", atom.key);
      return py_mod(atom.a.evaluate(bindings), d);
    }
    case SymAtom::kMax: return std::max(atom.a.evaluate(bindings), atom.b.evaluate(bindings));
  }
  return 0;
}

SymInt subst_atom(const SymAtom& atom, const std::map<std::string, SymInt>& subs) {
  switch (atom.kind) {
    case SymAtom::kSymbol: {
      auto it = subs.find(atom.name);
      return it == subs.end() ? SymInt::symbol(atom.name) : it->second;
    }
    case SymAtom::kFloorDiv: return floordiv(atom.a.substitute(subs), atom.b.substitute(subs));
    case SymAtom::kMod: return mod(atom.a.substitute(subs), atom.b.substitute(subs));
    case SymAtom::kMax: return max(atom.a.substitute(subs), atom.b.substitute(subs));
  }
  return SymInt(0);
}
}  // namespace

int64_t SymInt::evaluate(const std::map<std::string, int64_t>& bindings) const {
  if (is_constant()) return c_;
  int64_t total = 0;
  for (const auto& [m, c] : poly_->terms) {
    int64_t prod = c;
    for (const auto& atom : m) prod *= eval_atom(*atom, bindings);
    total += prod;
  }
  return total;
}

SymInt SymInt::substitute(const std::map<std::string, SymInt>& subs) const {
  if (is_constant()) return *this;
  SymInt total(0);
  for (const auto& [m, c] : poly_->terms) {
    SymInt prod(c);
    for (const auto& atom : m) prod = prod * subst_atom(*atom, subs);
    total = total + prod;
  }
  return total;
}

void SymInt::collect_symbols(std::set<std::string>& out) const {
  if (is_constant()) return;
  for (const auto& [m, c] : poly_->terms) {
    for (const auto& atom : m) {
      if (atom->kind == SymAtom::kSymbol) out.insert(atom->name);
      else { atom->a.collect_symbols(out); atom->b.collect_symbols(out); }
    }
  }
}

std::string shape_to_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].to_string();
  return out + "]";
}

// ---- expression parser ----
namespace {
struct ExprParser {
  const std::string& text;
  size_t pos;

  void skip() { while (pos < text.size() && text[pos] == ' ') ++pos; }
  [[noreturn]] void fail(const std::string& what) {
    throw Error(str("symbolic dim parse error at column ", pos + 1, ": ", what, " in '", text, "'"));
  }
  bool eat(const char* tok) {
    skip();
    size_t n = std::char_traits<char>::length(tok);
    if (text.compare(pos, n, tok) == 0) {
      // "/" alone is not an operator; "//" is.
      pos += n;
      return true;
    }
    return false;
  }
  SymInt expr() {
    SymInt v = term();
    while (true) {
      if (eat("+")) v = v + term();
      else if (eat("-")) v = v - term();
      else return v;
    }
  }
  SymInt term() {
    SymInt v = unary();
    while (true) {
      if (eat("//")) v = floordiv(v, unary());
      else if (eat("*")) v = v * unary();
      else if (eat("%")) v = mod(v, unary());
      else return v;
    }
  }
  SymInt unary() {
    if (eat("-")) return -unary();
    return primary();
  }
  SymInt primary() {
    skip();
    if (pos >= text.size()) fail("expected a dimension");
    char c = text[pos];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t start = pos;
      while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
      try {
        return SymInt(int64_t(std::stoll(text.substr(start, pos - start))));
      } catch (const std::out_of_range&) {
        pos = start;
        fail("integer out of range");
      }
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = pos;
      while (pos < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[pos])) || text[pos] == '_'))
        ++pos;
      std::string name = text.substr(start, pos - start);
      if (name == "max") {
        if (!eat("(")) fail("expected '(' after max");
        SymInt a = expr();
        if (!eat(",")) fail("expected ',' in max(a, b)");
        SymInt b = expr();
        if (!eat(")")) fail("expected ')' closing max(");
        return max(a, b);
      }
      return SymInt::symbol(name);
    }
    if (eat("(")) {
      SymInt v = expr();
      if (!eat(")")) fail("expected ')'");
      return v;
    }
    fail(str("unexpected character '", c, "'"));
  }
};
}  // namespace

SymInt parse_symint_at(const std::string& text, size_t& pos) {
  ExprParser p{text, pos};
  SymInt v = p.expr();
  pos = p.pos;
  return v;
}

SymInt parse_symint(const std::string& text) {
  size_t pos = 0;
  SymInt v = parse_symint_at(text, pos);
  while (pos < text.size() && text[pos] == ' ') ++pos;
  KILN_CHECK(pos == text.size(), "symbolic dim parse error at column ", pos + 1,
             ": unexpected trailing text in '", text, "'");
  return v;
}

}  // namespace kiln
