// FileCheck-style matching (see filecheck.h): directives become regexes matched line by line.
#include "common/filecheck.h"

#include <cctype>
#include <map>
#include <optional>
#include <regex>
#include <sstream>

namespace kiln::testing {

namespace {

enum class Kind { Check, Next, Same, Not };

struct Directive {
  Kind kind;
  std::string pattern;
  int line;  // in the check file, 1-based
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<Directive> parse_directives(const std::string& text, const std::string& prefix) {
  static const std::pair<const char*, Kind> kSuffixes[] = {
      {"-NEXT:", Kind::Next}, {"-SAME:", Kind::Same}, {"-NOT:", Kind::Not}, {":", Kind::Check}};
  std::vector<Directive> out;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    for (size_t at = line.find(prefix); at != std::string::npos; at = line.find(prefix, at + 1)) {
      // The prefix must start a word: "// CHECK:" but not "// XCHECK:".
      if (at > 0 && (std::isalnum(static_cast<unsigned char>(line[at - 1])) || line[at - 1] == '-'))
        continue;
      std::string rest = line.substr(at + prefix.size());
      bool found = false;
      for (const auto& [suffix, kind] : kSuffixes) {
        if (rest.rfind(suffix, 0) == 0) {
          out.push_back({kind, trim(rest.substr(std::string(suffix).size())), number});
          found = true;
          break;
        }
      }
      if (found) break;
    }
  }
  return out;
}

std::string escape_regex(const std::string& literal) {
  static const std::string special = R"(\^$.|?*+()[]{}/)";
  std::string out;
  bool in_space = false;
  for (char c : literal) {
    if (c == ' ' || c == '\t') {
      if (!in_space) out += "[ \\t]+";
      in_space = true;
      continue;
    }
    in_space = false;
    if (special.find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

// A compiled pattern: the regex, and which capture group defines which variable.
struct Compiled {
  std::regex re;
  std::vector<std::string> defines;  // group i+1 defines defines[i]
};

Compiled compile(const std::string& pattern, const std::map<std::string, std::string>& vars) {
  std::string re;
  std::vector<std::string> defines;
  size_t i = 0;
  while (i < pattern.size()) {
    if (pattern.compare(i, 2, "{{") == 0) {
      size_t end = pattern.find("}}", i + 2);
      if (end == std::string::npos) throw std::runtime_error("unterminated {{ in '" + pattern + "'");
      re += "(?:" + pattern.substr(i + 2, end - i - 2) + ")";
      i = end + 2;
    } else if (pattern.compare(i, 2, "[[") == 0) {
      size_t end = pattern.find("]]", i + 2);
      if (end == std::string::npos) throw std::runtime_error("unterminated [[ in '" + pattern + "'");
      std::string body = pattern.substr(i + 2, end - i - 2);
      size_t colon = body.find(':');
      if (colon != std::string::npos) {
        re += "(" + body.substr(colon + 1) + ")";
        defines.push_back(body.substr(0, colon));
      } else {
        auto it = vars.find(body);
        if (it == vars.end()) throw std::runtime_error("use of undefined variable [[" + body + "]]");
        re += escape_regex(it->second);
      }
      i = end + 2;
    } else {
      size_t next = std::min(pattern.find("{{", i), pattern.find("[[", i));
      if (next == std::string::npos) next = pattern.size();
      re += escape_regex(pattern.substr(i, next - i));
      i = next;
    }
  }
  return {std::regex(re, std::regex::ECMAScript), defines};
}

struct Match {
  size_t line, end_column;
};

// Finds the pattern in lines [from_line, to_line), starting at from_column on from_line.
std::optional<Match> search(const Compiled& c, const std::vector<std::string>& lines, size_t from_line,
                            size_t from_column, size_t to_line, std::map<std::string, std::string>* vars) {
  for (size_t l = from_line; l < to_line && l < lines.size(); ++l) {
    size_t start = l == from_line ? from_column : 0;
    if (start > lines[l].size()) continue;
    std::smatch m;
    std::string tail = lines[l].substr(start);
    if (std::regex_search(tail, m, c.re)) {
      if (vars)
        for (size_t g = 0; g < c.defines.size(); ++g) (*vars)[c.defines[g]] = m[g + 1].str();
      return Match{l, start + size_t(m.position(0) + m.length(0))};
    }
  }
  return std::nullopt;
}

std::string context(const std::vector<std::string>& lines, size_t around) {
  std::string out;
  size_t lo = around >= 2 ? around - 2 : 0;
  for (size_t l = lo; l < lines.size() && l < around + 4; ++l)
    out += (l == around ? "  >> " : "     ") + lines[l] + "\n";
  return out;
}

}  // namespace

CheckResult filecheck(const std::string& check_text, const std::string& output,
                      const std::string& prefix) {
  CheckResult result;
  std::vector<Directive> directives = parse_directives(check_text, prefix);
  result.num_directives = int(directives.size());
  std::vector<std::string> lines;
  {
    std::istringstream in(output);
    std::string l;
    while (std::getline(in, l)) lines.push_back(l);
  }
  std::map<std::string, std::string> vars;
  size_t line = 0, column = 0;  // just after the previous match
  bool matched_any = false;
  std::vector<const Directive*> pending_nots;
  auto fail = [&](const Directive& d, const std::string& why, size_t near) {
    result.ok = false;
    result.message = "check line " + std::to_string(d.line) + ": " + why + " '" + d.pattern +
                     "'\noutput near line " + std::to_string(near + 1) + ":\n" + context(lines, near);
    return result;
  };
  // CHECK-NOTs apply to the range between the previous match and the next one.
  auto check_nots = [&](size_t to_line, size_t to_column) -> const Directive* {
    for (const Directive* d : pending_nots) {
      Compiled c = compile(d->pattern, vars);
      std::optional<Match> m = search(c, lines, line, column, to_line + 1, nullptr);
      if (m && (m->line < to_line || m->end_column <= to_column)) return d;
    }
    pending_nots.clear();
    return nullptr;
  };
  try {
    for (const Directive& d : directives) {
      if (d.kind == Kind::Not) {
        pending_nots.push_back(&d);
        continue;
      }
      Compiled c = compile(d.pattern, vars);
      std::optional<Match> m;
      std::map<std::string, std::string> new_vars = vars;
      if (d.kind == Kind::Check) {
        m = search(c, lines, line, column, lines.size(), &new_vars);
        if (!m) return fail(d, "no match for", line);
      } else if (d.kind == Kind::Next) {
        size_t next = matched_any ? line + 1 : 0;
        m = search(c, lines, next, 0, next + 1, &new_vars);
        if (!m) return fail(d, "CHECK-NEXT: the next line does not match", next);
      } else {
        m = search(c, lines, line, column, line + 1, &new_vars);
        if (!m) return fail(d, "CHECK-SAME: the rest of the line does not match", line);
      }
      if (const Directive* bad = check_nots(m->line, m->end_column))
        return fail(*bad, "CHECK-NOT matched", m->line);
      vars = std::move(new_vars);
      line = m->line;
      column = m->end_column;
      matched_any = true;
    }
    if (const Directive* bad = check_nots(lines.size(), 0)) return fail(*bad, "CHECK-NOT matched", line);
  } catch (const std::exception& e) {
    result.ok = false;
    result.message = std::string("bad check pattern: ") + e.what();
  }
  return result;
}

}  // namespace kiln::testing
