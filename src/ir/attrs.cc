// Attribute values: typed access, text printing and kind-directed parsing (shared by the text IR
// parser and the op table's default values).
#include "kiln/attrs.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "ir/text_syntax.h"
#include "kiln/error.h"
#include "kiln/graph.h"
#include "kiln/types.h"

namespace kiln {

std::string_view attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::Int: return "int";
    case AttrKind::Float: return "float";
    case AttrKind::Ints: return "ints";
    case AttrKind::Floats: return "floats";
    case AttrKind::String: return "string";
    case AttrKind::DType: return "dtype";
    case AttrKind::Shape: return "shape";
    case AttrKind::Tensor: return "tensor";
    case AttrKind::Graph: return "graph";
  }
  return "?";
}

AttrKind attr_kind_of(const AttrValue& v) { return AttrKind(v.index()); }

namespace {

std::string float_text(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  // Prefer the shortest text that round-trips.
  for (int prec = 1; prec <= 17; ++prec) {
    char tmp[40];
    std::snprintf(tmp, sizeof tmp, "%.*g", prec, d);
    if (std::strtod(tmp, nullptr) == d) {
      std::strcpy(buf, tmp);
      break;
    }
  }
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// Whether printing element i as a number and parsing it back gives the same bits (not for NaN
// codes other than the one set_f64 makes, nor for u64 values above 2^63).
bool prints_exactly(const HostTensor& t, int64_t i) {
  HostTensor one = HostTensor::empty(t.dtype(), {});
  if (is_float(t.dtype())) one.set_f64(0, std::strtod(float_text(t.get_f64(i)).c_str(), nullptr));
  else if (t.dtype() == DType::U64 && t.get_i64(i) < 0) return false;
  else one.set_i64(0, t.get_i64(i));
  int n = dtype_size(t.dtype());
  return std::memcmp(one.raw(), static_cast<const uint8_t*>(t.raw()) + i * n, size_t(n)) == 0;
}

// A string element as a quoted literal on one line: \" \\ \n \t \r, other control bytes and DEL
// as \xHH; every other byte (UTF-8 included) as itself.
std::string string_element_text(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string out = "\"";
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\x";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string tensor_text(const HostTensor& t) {
  std::string out = "dense<" + std::string(dtype_name(t.dtype())) + dims_to_string(t.shape()) + ">";
  if (t.dtype() == DType::Str) {  // always the values: strings have no byte image
    out += "[";
    for (int64_t i = 0; i < t.numel(); ++i) out += (i ? ", " : "") + string_element_text(t.str_at(i));
    return out + "]";
  }
  bool exact = t.numel() <= 16;
  if (exact && (is_narrow(t.dtype()) || t.dtype() == DType::U64))
    for (int64_t i = 0; i < t.numel(); ++i) exact = exact && prints_exactly(t, i);
  if (exact) {
    out += "[";
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (i) out += ", ";
      out += is_float(t.dtype()) ? float_text(t.get_f64(i)) : std::to_string(t.get_i64(i));
    }
    return out + "]";
  }
  if (t.nbytes() > text_syntax::TensorElision::limit())
    return out + "\"" + text_syntax::kElidedTensorMark + std::to_string(t.nbytes()) + " bytes\"";
  static const char* hex = "0123456789abcdef";
  std::string h = "\"0x";
  const auto* bytes = static_cast<const uint8_t*>(t.raw());
  h.reserve(t.nbytes() * 2 + 4);
  for (size_t i = 0; i < t.nbytes(); ++i) {
    h += hex[bytes[i] >> 4];
    h += hex[bytes[i] & 15];
  }
  return out + h + "\"";
}

struct Lexer {
  const std::string& text;
  size_t& pos;
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(str("column ", pos + 1, ": ", what));
  }
  void skip() {
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  }
  bool eat(char c) {
    skip();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(str("expected '", c, "'"));
  }
  std::string ident() {
    skip();
    size_t start = pos;
    while (pos < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[pos])) || text[pos] == '_'))
      ++pos;
    if (start == pos) fail("expected a name");
    return text.substr(start, pos - start);
  }
  int64_t integer() {
    skip();
    size_t start = pos;
    if (pos < text.size() && (text[pos] == '-' || text[pos] == '+')) ++pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
    std::string tok = text.substr(start, pos - start);
    if (tok.empty() || tok == "-" || tok == "+") {
      pos = start;
      fail("expected an integer");
    }
    try {
      return std::stoll(tok);
    } catch (const std::exception&) {
      pos = start;
      fail("integer out of range");
    }
  }
  double number() {
    skip();
    size_t start = pos;
    bool neg = false;
    if (pos < text.size() && (text[pos] == '-' || text[pos] == '+')) neg = text[pos++] == '-';
    if (text.compare(pos, 3, "inf") == 0) {
      pos += 3;
      return neg ? -INFINITY : INFINITY;
    }
    if (text.compare(pos, 3, "nan") == 0) {
      pos += 3;
      return NAN;
    }
    pos = start;
    const char* begin = text.c_str() + pos;
    char* end = nullptr;
    double d = std::strtod(begin, &end);
    if (end == begin) fail("expected a number");
    pos += size_t(end - begin);
    return d;
  }
  std::string quoted() {
    skip();
    if (pos >= text.size() || text[pos] != '"') fail("expected a quoted string");
    ++pos;
    std::string out;
    while (pos < text.size() && text[pos] != '"') {
      if (text[pos] == '\\' && pos + 1 < text.size()) ++pos;
      out += text[pos++];
    }
    if (pos >= text.size()) fail("unterminated string");
    ++pos;
    return out;
  }
  // The inverse of string_element_text.
  std::string string_element() {
    skip();
    if (pos >= text.size() || text[pos] != '"') fail("expected a quoted string");
    ++pos;
    std::string out;
    while (pos < text.size() && text[pos] != '"') {
      char c = text[pos++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= text.size()) break;
      char e = text[pos++];
      if (e == 'n') out += '\n';
      else if (e == 't') out += '\t';
      else if (e == 'r') out += '\r';
      else if (e == '"' || e == '\\') out += e;
      else if (e == 'x' && pos + 2 <= text.size() && std::isxdigit(static_cast<unsigned char>(text[pos])) &&
               std::isxdigit(static_cast<unsigned char>(text[pos + 1]))) {
        out += char(std::stoi(text.substr(pos, 2), nullptr, 16));
        pos += 2;
      } else {
        --pos;
        fail("bad escape in string literal (use \\\" \\\\ \\n \\t \\r or \\xHH)");
      }
    }
    if (pos >= text.size()) fail("unterminated string");
    ++pos;
    return out;
  }
  template <typename F> void list(F&& item) {
    expect('[');
    if (eat(']')) return;
    do item(); while (eat(','));
    expect(']');
  }
};

std::string escape(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

HostTensor parse_tensor(Lexer& lx) {
  std::string kw = lx.ident();
  if (kw != "dense") lx.fail("expected dense<...> tensor literal");
  lx.expect('<');
  std::string dt = lx.ident();
  auto dtype = parse_dtype(dt);
  if (!dtype) lx.fail("unknown dtype '" + dt + "'");
  std::vector<int64_t> dims;
  lx.list([&] { dims.push_back(lx.integer()); });
  lx.expect('>');
  lx.skip();
  if (lx.text.compare(lx.pos, 1 + std::string(text_syntax::kElidedTensorMark).size(),
                      std::string("\"") + text_syntax::kElidedTensorMark) == 0)
    lx.fail("this tensor's values were elided when the IR was printed (an IR dump of a large model keeps only "
            "the shapes of big constants); parse the model itself, or dump with --full-weights");
  int64_t numel = 1;
  for (int64_t d : dims) {
    if (d < 0) lx.fail("negative dimension in tensor literal");
    if (__builtin_mul_overflow(numel, d, &numel)) lx.fail("tensor literal shape is too large");
  }
  // Every element needs at least one character of text (two hex digits per byte): a literal that
  // declares more cannot be complete, so reject it before allocating anything.
  if (numel > int64_t(lx.text.size() - std::min(lx.text.size(), lx.pos)))
    lx.fail(str("tensor literal declares ", numel, " elements but the text is too short to hold them"));
  HostTensor t = HostTensor::empty(*dtype, dims);
  lx.skip();
  size_t values_start = lx.pos;  // size errors point at the start of the values
  if (lx.pos < lx.text.size() && lx.text[lx.pos] == '"' && *dtype != DType::Str) {
    std::string hex = lx.quoted();
    if (hex.size() != 2 + 2 * t.nbytes() || hex.compare(0, 2, "0x") != 0) {
      lx.pos = values_start;
      lx.fail(str("hex tensor literal needs ", t.nbytes(), " bytes"));
    }
    auto* bytes = static_cast<uint8_t*>(t.raw());
    auto nib = [&](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      lx.fail("bad hex digit in tensor literal");
    };
    for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = uint8_t(nib(hex[2 + 2 * i]) * 16 + nib(hex[3 + 2 * i]));
    return t;
  }
  int64_t i = 0;
  lx.list([&] {
    if (i >= t.numel()) lx.fail("too many values in tensor literal");
    if (*dtype == DType::Str) t.set_str(i, lx.string_element());
    else if (is_float(*dtype)) t.set_f64(i, lx.number());
    else t.set_i64(i, lx.integer());
    ++i;
  });
  if (i != t.numel()) {
    lx.pos = values_start;
    lx.fail(str("tensor literal has ", i, " values, shape needs ", t.numel()));
  }
  return t;
}

}  // namespace

std::string attr_to_string(const AttrValue& v) {
  switch (attr_kind_of(v)) {
    case AttrKind::Int: return std::to_string(std::get<int64_t>(v));
    case AttrKind::Float: return float_text(std::get<double>(v));
    case AttrKind::Ints: {
      std::string s = "[";
      const auto& l = std::get<std::vector<int64_t>>(v);
      for (size_t i = 0; i < l.size(); ++i) s += (i ? ", " : "") + std::to_string(l[i]);
      return s + "]";
    }
    case AttrKind::Floats: {
      std::string s = "[";
      const auto& l = std::get<std::vector<double>>(v);
      for (size_t i = 0; i < l.size(); ++i) s += (i ? ", " : "") + float_text(l[i]);
      return s + "]";
    }
    case AttrKind::String: return escape(std::get<std::string>(v));
    case AttrKind::DType: return std::string(dtype_name(std::get<DType>(v)));
    case AttrKind::Shape: return shape_to_string(std::get<Shape>(v));
    case AttrKind::Tensor: return tensor_text(std::get<HostTensor>(v));
    case AttrKind::Graph: {
      const GraphAttr& g = std::get<GraphAttr>(v);
      return g ? print_graph(*g) : "<null graph>";
    }
  }
  return "?";
}

AttrValue parse_attr_value(const std::string& text, size_t& pos, AttrKind expected) {
  Lexer lx{text, pos};
  switch (expected) {
    case AttrKind::Int: return lx.integer();
    case AttrKind::Float: return lx.number();
    case AttrKind::Ints: {
      std::vector<int64_t> l;
      lx.list([&] { l.push_back(lx.integer()); });
      return l;
    }
    case AttrKind::Floats: {
      std::vector<double> l;
      lx.list([&] { l.push_back(lx.number()); });
      return l;
    }
    case AttrKind::String: return lx.quoted();
    case AttrKind::DType: {
      lx.skip();
      size_t name_start = pos;
      std::string name = lx.ident();
      auto d = parse_dtype(name);
      if (!d) {
        pos = name_start;  // point at the name, not past it
        lx.fail("unknown dtype '" + name + "'");
      }
      return *d;
    }
    case AttrKind::Shape: {
      Shape s;
      lx.list([&] {
        lx.skip();
        s.push_back(parse_symint_at(text, pos));
      });
      return s;
    }
    case AttrKind::Tensor: return parse_tensor(lx);
    case AttrKind::Graph: lx.fail("a graph attribute has no one-line form (the text IR parser reads it)");
  }
  lx.fail("unknown attribute kind");
}

const AttrValue& Attrs::get(const std::string& name) const {
  auto it = map_.find(name);
  KILN_CHECK(it != map_.end(), "missing attribute '", name, "'");
  return it->second;
}

namespace {
template <typename T>
const T& get_as(const Attrs& a, const std::string& name, AttrKind want) {
  const AttrValue& v = a.get(name);
  KILN_CHECK(std::holds_alternative<T>(v), "attribute '", name, "' should be ", attr_kind_name(want),
             " but is ", attr_kind_name(attr_kind_of(v)));
  return std::get<T>(v);
}
}  // namespace

int64_t Attrs::get_int(const std::string& n) const { return get_as<int64_t>(*this, n, AttrKind::Int); }
double Attrs::get_float(const std::string& n) const {
  const AttrValue& v = get(n);
  if (auto* i = std::get_if<int64_t>(&v)) return double(*i);
  return get_as<double>(*this, n, AttrKind::Float);
}
const std::vector<int64_t>& Attrs::get_ints(const std::string& n) const {
  return get_as<std::vector<int64_t>>(*this, n, AttrKind::Ints);
}
std::vector<double> Attrs::get_floats(const std::string& n) const {
  const AttrValue& v = get(n);
  if (auto* l = std::get_if<std::vector<int64_t>>(&v)) return std::vector<double>(l->begin(), l->end());
  return get_as<std::vector<double>>(*this, n, AttrKind::Floats);
}
const std::string& Attrs::get_string(const std::string& n) const {
  return get_as<std::string>(*this, n, AttrKind::String);
}
DType Attrs::get_dtype(const std::string& n) const { return get_as<DType>(*this, n, AttrKind::DType); }
Shape Attrs::get_shape(const std::string& n) const {
  const AttrValue& v = get(n);
  if (auto* l = std::get_if<std::vector<int64_t>>(&v)) return to_shape(*l);
  return get_as<Shape>(*this, n, AttrKind::Shape);
}
const HostTensor& Attrs::get_tensor(const std::string& n) const {
  return get_as<HostTensor>(*this, n, AttrKind::Tensor);
}
const Graph& Attrs::get_graph(const std::string& n) const {
  const GraphAttr& g = get_as<GraphAttr>(*this, n, AttrKind::Graph);
  KILN_CHECK(g != nullptr, "attribute '", n, "' is a null graph");
  return *g;
}

bool attr_values_equal(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  if (auto* ta = std::get_if<HostTensor>(&a)) return ta->bit_equal(std::get<HostTensor>(b));
  if (auto* ga = std::get_if<GraphAttr>(&a)) {
    const GraphAttr& gb = std::get<GraphAttr>(b);
    if (*ga == gb) return true;
    return *ga && gb && print_graph(**ga) == print_graph(*gb);
  }
  if (auto* fa = std::get_if<double>(&a)) {
    double fb = std::get<double>(b);
    return std::memcmp(fa, &fb, sizeof fb) == 0;  // bitwise: NaN equals NaN, 0 != -0
  }
  return std::visit(
      [&](const auto& x) -> bool {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, HostTensor> || std::is_same_v<T, GraphAttr>) return false;  // above
        else return x == std::get<T>(b);
      },
      a);
}

bool operator==(const Attrs& a, const Attrs& b) {
  if (a.map_.size() != b.map_.size()) return false;
  for (auto ia = a.map_.begin(), ib = b.map_.begin(); ia != a.map_.end(); ++ia, ++ib)
    if (ia->first != ib->first || !attr_values_equal(ia->second, ib->second)) return false;
  return true;
}

}  // namespace kiln
