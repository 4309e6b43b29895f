// SymInt: a tensor dimension that is a constant or an integer expression over named dims (B, T).
// Why: shapes are symbolic from day one, so one captured graph serves every batch size; values are
// kept in a canonical polynomial form so that equal expressions compare equal.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln {

struct SymPoly;  // canonical form: sum of coeff * product(atoms); defined in symint.cc

class SymInt {
 public:
  SymInt() : c_(0) {}
  SymInt(int64_t c) : c_(c) {}  // NOLINT: implicit on purpose, constants are the common case
  SymInt(int c) : c_(c) {}      // NOLINT
  static SymInt symbol(const std::string& name);

  bool is_constant() const { return poly_ == nullptr; }
  // The constant value; throws kiln::Error if symbolic.
  int64_t constant() const;
  std::optional<int64_t> maybe_constant() const {
    return is_constant() ? std::optional<int64_t>(c_) : std::nullopt;
  }

  friend SymInt operator+(const SymInt& a, const SymInt& b);
  friend SymInt operator-(const SymInt& a, const SymInt& b);
  friend SymInt operator*(const SymInt& a, const SymInt& b);
  SymInt operator-() const;
  friend SymInt floordiv(const SymInt& a, const SymInt& b);
  friend SymInt mod(const SymInt& a, const SymInt& b);  // Python-style: sign of the divisor
  friend SymInt max(const SymInt& a, const SymInt& b);

  // Structural equality of canonical forms: true means provably equal.
  friend bool operator==(const SymInt& a, const SymInt& b);
  friend bool operator!=(const SymInt& a, const SymInt& b) { return !(a == b); }
  // Total order on canonical forms (for use as map keys), not numeric order.
  friend bool operator<(const SymInt& a, const SymInt& b);

  // Proves a relation: true/false when decided, nullopt when it depends on symbol values.
  static std::optional<bool> prove_equal(const SymInt& a, const SymInt& b);

  std::string to_string() const;
  // Evaluates with concrete values for every symbol; throws kiln::Error naming a missing one.
  int64_t evaluate(const std::map<std::string, int64_t>& bindings) const;
  // Replaces symbols by other expressions (symbols not in the map stay).
  SymInt substitute(const std::map<std::string, SymInt>& subs) const;
  void collect_symbols(std::set<std::string>& out) const;

  const std::shared_ptr<const SymPoly>& poly() const { return poly_; }
  static SymInt from_poly(SymPoly p);

 private:
  int64_t c_ = 0;
  std::shared_ptr<const SymPoly> poly_;  // null when constant
};

using Shape = std::vector<SymInt>;

std::string shape_to_string(const Shape& s);  // "[B, 128]"
// Parses a SymInt expression: ints, identifiers, + - * // % max(a, b) and parentheses.
// Throws kiln::Error with the column of the problem.
SymInt parse_symint(const std::string& text);
// Parses one expression starting at text[pos], stopping before the first character that cannot
// continue it (such as "," or "]"); advances pos. Throws kiln::Error naming the column.
SymInt parse_symint_at(const std::string& text, size_t& pos);

}  // namespace kiln
