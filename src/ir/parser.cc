// Parses the text IR written by printer.cc back into a Graph. Why: pass tests and bug reports are
// text, so the parser must rebuild exactly what was printed and say where text is wrong. Nodes are
// built through Graph::add_node, so parsed graphs are typed at birth like any other.
#include <algorithm>
#include <unordered_map>

#include "ir/text_syntax.h"
#include "kiln/error.h"
#include "kiln/graph.h"

namespace kiln {

namespace {

class Parser {
 public:
  explicit Parser(const std::string& text, size_t pos = 0) : text_(text), pos_(pos) {}

  std::unique_ptr<Graph> parse() {
    std::unique_ptr<Graph> g = parse_graph_here();
    skip_space();
    if (pos_ < text_.size()) fail_at(pos_, "unexpected text after the graph's closing '}'");
    return g;
  }

  TensorType parse_one_type() {
    skip_space();
    TensorType t = type();
    skip_space();
    if (pos_ < text_.size()) fail_at(pos_, "unexpected text after the type");
    return t;
  }

  size_t position() const { return pos_; }

  // `graph @name(inputs) { nodes; return ... }` from the current position; a sub-graph attribute
  // is parsed by a nested Parser over the same text, with its own value names.
  std::unique_ptr<Graph> parse_graph_here() {
    skip_space();
    if (!eat_keyword("graph")) fail_at(pos_, "expected 'graph' to start the text IR");
    skip_space();
    if (!eat('@')) fail_at(pos_, "expected '@' and the graph name after 'graph'");
    graph_ = std::make_unique<Graph>(name_token("graph name"));
    parse_inputs();
    expect('{', "to open the graph body");
    bool returned = false;
    while (true) {
      skip_space();
      if (pos_ >= text_.size()) fail_at(pos_, "unterminated graph: expected '}' before the end of the text");
      if (eat('}')) break;
      if (returned) fail_at(pos_, "expected '}' after 'return'");
      if (eat_keyword("return")) {
        parse_return();
        returned = true;
      } else if (peek() == '%') {
        parse_node();
      } else {
        fail_at(pos_, "expected a node ('%name = op(...)'), 'return' or '}'");
      }
    }
    if (!returned) fail_at(pos_ - 1, "graph has no 'return' statement");
    return std::move(graph_);
  }

 private:
  // ---- positions and errors ----
  struct LineSpan {
    size_t begin, end;  // [begin, end) excludes the '\n'
  };
  LineSpan line_span(size_t at) const {
    size_t previous_newline = at == 0 ? std::string::npos : text_.rfind('\n', at - 1);
    size_t begin = previous_newline == std::string::npos ? 0 : previous_newline + 1;
    size_t end = text_.find('\n', at);
    return {begin, end == std::string::npos ? text_.size() : end};
  }
  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    at = std::min(at, text_.size());
    size_t line = 1;
    for (size_t i = 0; i < at; ++i)
      if (text_[i] == '\n') ++line;
    size_t column = at - line_span(at).begin + 1;
    throw Error(str("line ", line, ", column ", column, ": ", what));
  }

  // Runs a helper that parses one line's text (parse_attr_value, parse_symint_at), mapping its
  // "column N: what" error onto this text's line and column.
  template <typename T, typename Fn> T parse_in_line(Fn&& fn, const std::string& context) {
    LineSpan span = line_span(pos_);
    std::string line = text_.substr(span.begin, span.end - span.begin);
    size_t line_pos = pos_ - span.begin;
    try {
      T result = fn(line, line_pos);
      pos_ = span.begin + line_pos;
      return result;
    } catch (const Error& e) {
      std::string msg = e.what();
      size_t at = pos_;
      size_t col = msg.find("column ");
      if (col != std::string::npos) {
        size_t digits = col + 7, digits_end = digits;
        while (digits_end < msg.size() && std::isdigit(static_cast<unsigned char>(msg[digits_end]))) ++digits_end;
        if (digits_end > digits && msg.compare(digits_end, 2, ": ") == 0) {
          at = span.begin + std::stoul(msg.substr(digits, digits_end - digits)) - 1;
          msg = msg.substr(digits_end + 2);
        }
      }
      std::string echo = " in '" + line + "'";  // the SymInt parser quotes its whole input
      if (msg.size() > echo.size() && msg.compare(msg.size() - echo.size(), echo.size(), echo) == 0)
        msg.resize(msg.size() - echo.size());
      fail_at(at, context + ": " + msg);
    } catch (const std::exception& e) {  // e.g. bad_alloc for an absurd tensor literal shape
      fail_at(pos_, context + ": " + e.what());
    }
  }

  // ---- tokens ----
  void skip_space() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (text_.compare(pos_, 2, "//") == 0) {
        size_t nl = text_.find('\n', pos_);
        pos_ = nl == std::string::npos ? text_.size() : nl;
      } else {
        break;
      }
    }
  }
  char peek() {
    skip_space();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool eat(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c, const std::string& why) {
    if (!eat(c)) fail_at(pos_, str("expected '", c, "' ", why));
  }
  bool eat_keyword(const std::string& word) {
    skip_space();
    if (text_.compare(pos_, word.size(), word) != 0) return false;
    size_t after = pos_ + word.size();
    if (after < text_.size() && text_syntax::is_name_char(text_[after])) return false;
    pos_ = after;
    return true;
  }
  std::string identifier(const std::string& what) {
    skip_space();
    size_t start = pos_;
    while (pos_ < text_.size() && text_syntax::is_name_char(text_[pos_])) ++pos_;
    if (start == pos_) fail_at(pos_, "expected " + what);
    return text_.substr(start, pos_ - start);
  }
  std::string quoted_string() {
    size_t start = pos_;
    ++pos_;  // the opening quote
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\n') {
      char c = text_[pos_++];
      if (c == '\\' && pos_ < text_.size()) {
        char e = text_[pos_++];
        c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
      }
      out += c;
    }
    if (pos_ >= text_.size() || text_[pos_] != '"') fail_at(start, "unterminated quoted name");
    ++pos_;
    return out;
  }
  // A name after '%' or '@': bare ([A-Za-z0-9_]+) or quoted.
  std::string name_token(const std::string& what) {
    if (pos_ < text_.size() && text_[pos_] == '"') return quoted_string();
    size_t start = pos_;
    while (pos_ < text_.size() && text_syntax::is_name_char(text_[pos_])) ++pos_;
    if (start == pos_) fail_at(pos_, "expected " + what);
    return text_.substr(start, pos_ - start);
  }

  // A value reference: %name, %"quoted name" or %12. Returns the label; `at` gets its position.
  struct ValueToken {
    std::string label;
    bool numbered;  // %12: a positional number, not a name
    size_t at;
  };
  ValueToken value_token() {
    skip_space();
    ValueToken tok{"", false, pos_};
    if (!eat('%')) fail_at(pos_, "expected a value ('%name' or '%0')");
    bool quoted = pos_ < text_.size() && text_[pos_] == '"';
    tok.label = name_token("a value name after '%'");
    tok.numbered = !quoted && text_syntax::is_numeric(tok.label);
    return tok;
  }
  Value* use(const ValueToken& tok) {
    auto it = values_.find(tok.label);
    if (it == values_.end()) fail_at(tok.at, "undefined value %" + tok.label);
    return it->second;
  }
  void define(const ValueToken& tok, Value* v) {
    if (!tok.numbered) v->name = tok.label;
    values_[tok.label] = v;
  }
  void require_new(const ValueToken& tok) {
    if (values_.count(tok.label)) fail_at(tok.at, "value %" + tok.label + " is already defined");
  }

  // ---- types: f32[B, 128], bf16[4]@cuda ----
  TensorType type() {
    TensorType t;
    size_t at = pos_;
    std::string dtype = identifier("a type such as f32[4]");
    if ((dtype == "seq" || dtype == "opt") && pos_ < text_.size() && text_[pos_] == '<') {
      ++pos_;
      if (dtype == "opt") {
        skip_space();
        TensorType inner = type();
        expect('>', "closing opt<...>");
        return TensorType::optional(inner);
      }
      skip_space();
      size_t first = pos_;
      std::string name = identifier("an element type");
      auto empty_dtype = parse_dtype(name);
      if (empty_dtype && peek() == '>') {  // seq<f32>: an empty sequence
        ++pos_;
        return TensorType::sequence(*empty_dtype, {});
      }
      pos_ = first;
      std::vector<TensorType> elements;
      do {
        skip_space();
        size_t elem_at = pos_;
        elements.push_back(type());
        if (!elements.back().is_tensor() || elements.back().dtype != elements.front().dtype)
          fail_at(elem_at, "sequence elements must be tensors of one dtype");
      } while (eat(','));
      expect('>', "closing seq<...>");
      return TensorType::sequence(elements.front().dtype, elements);
    }
    auto parsed = parse_dtype(dtype);
    if (!parsed) fail_at(at, "unknown dtype '" + dtype + "'");
    t.dtype = *parsed;
    if (pos_ >= text_.size() || text_[pos_] != '[') fail_at(pos_, "expected '[' and the dims after the dtype");
    ++pos_;
    if (!eat(']')) {
      do {
        skip_space();
        t.shape.push_back(parse_in_line<SymInt>(
            [](const std::string& line, size_t& p) { return parse_symint_at(line, p); }, "bad dimension"));
      } while (eat(','));
      expect(']', "closing the dims");
    }
    if (pos_ < text_.size() && text_[pos_] == '@') {
      ++pos_;
      size_t dev_at = pos_;
      std::string dev = identifier("a device after '@'");
      if (dev == "cuda") t.device = Device::CUDA;
      else if (dev == "cpu") t.device = Device::CPU;
      else fail_at(dev_at, "unknown device '" + dev + "' (expected cpu or cuda)");
    }
    return t;
  }

  // ---- statements ----
  void parse_inputs() {
    expect('(', "to open the graph's inputs");
    if (eat(')')) return;
    do {
      ValueToken tok = value_token();
      require_new(tok);
      expect(':', "and the input's type");
      skip_space();
      TensorType t = type();
      define(tok, graph_->add_input(tok.numbered ? "" : tok.label, t));
    } while (eat(','));
    expect(')', "closing the graph's inputs");
  }

  void parse_node() {
    std::vector<ValueToken> results;
    do {
      results.push_back(value_token());
      require_new(results.back());
      for (size_t i = 0; i + 1 < results.size(); ++i)
        if (results[i].label == results.back().label)
          fail_at(results.back().at, "value %" + results.back().label + " is named twice");
    } while (eat(','));
    expect('=', "after the node's results");
    skip_space();
    size_t op_at = pos_;
    std::string name = identifier("an op name");
    auto op = op_from_name(name);
    if (!op) fail_at(op_at, "unknown op '" + name + "'");
    const OpInfo& info = op_info(*op);

    expect('(', "to open the operands of '" + name + "'");
    std::vector<Value*> operands;
    if (!eat(')')) {
      do operands.push_back(use(value_token()));
      while (eat(','));
      expect(')', "closing the operands");
    }
    Attrs attrs = parse_attrs(info);
    expect(':', "and the result types");
    std::vector<std::pair<TensorType, size_t>> types;
    do {
      skip_space();
      size_t at = pos_;
      types.emplace_back(type(), at);
    } while (eat(','));
    std::string node_name;
    if (eat_keyword("loc")) {
      expect('(', "after 'loc'");
      skip_space();
      if (peek() != '"') fail_at(pos_, "expected a quoted node name in loc(...)");
      node_name = quoted_string();
      expect(')', "closing loc(...)");
    }

    std::vector<Value*> outs;
    try {
      outs = graph_->add_node(*op, operands, std::move(attrs), node_name);
    } catch (const std::exception& e) {
      fail_at(op_at, e.what());
    }
    if (types.size() != outs.size())
      fail_at(types.front().second,
              str("'", name, "' produces ", outs.size(), " result(s), ", types.size(), " type(s) given"));
    if (results.size() != outs.size())
      fail_at(results.front().at,
              str("'", name, "' produces ", outs.size(), " result(s), ", results.size(), " named"));
    for (size_t i = 0; i < outs.size(); ++i) {
      if (types[i].first != outs[i]->type)
        fail_at(types[i].second, str("result type ", types[i].first.to_string(),
                                     " does not match the inferred type ", outs[i]->type.to_string()));
      define(results[i], outs[i]);
    }
  }

  // {name = value, ...}, each value parsed as the kind the op table declares for it.
  Attrs parse_attrs(const OpInfo& info) {
    Attrs attrs;
    if (!eat('{')) return attrs;
    if (eat('}')) return attrs;
    do {
      skip_space();
      size_t at = pos_;
      std::string name = identifier("an attribute name");
      const AttrSpec* spec = info.find_attr(name);
      if (!spec) fail_at(at, str("op '", info.name, "' has no attribute '", name, "'"));
      if (attrs.has(name)) fail_at(at, "attribute '" + name + "' is given twice");
      expect('=', "after attribute '" + name + "'");
      skip_space();
      AttrKind kind = spec->kind;
      if (kind == AttrKind::Graph) {
        Parser sub(text_, pos_);
        attrs.set(name, GraphAttr(sub.parse_graph_here()));
        pos_ = sub.position();
        continue;
      }
      attrs.set(name, parse_in_line<AttrValue>(
                          [kind](const std::string& line, size_t& p) { return parse_attr_value(line, p, kind); },
                          str("bad value for attribute '", name, "' (", attr_kind_name(kind), ")")));
    } while (eat(','));
    expect('}', "closing the attributes");
    return attrs;
  }

  void parse_return() {
    std::vector<Value*> outs;
    if (peek() == '%') {
      do outs.push_back(use(value_token()));
      while (eat(','));
    }
    graph_->set_outputs(outs);
  }

  const std::string& text_;
  size_t pos_ = 0;
  std::unique_ptr<Graph> graph_;
  std::unordered_map<std::string, Value*> values_;  // label after '%' -> value
};

}  // namespace

std::unique_ptr<Graph> parse_graph(const std::string& text) { return Parser(text).parse(); }

TensorType parse_type(const std::string& text) { return Parser(text).parse_one_type(); }

}  // namespace kiln
