// Lexical rules the text IR printer and parser share (which names print bare, how quoted names
// escape). Why: one definition keeps print -> parse -> print identical.
#pragma once

#include <cctype>
#include <string>

namespace kiln::text_syntax {

inline bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
inline bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Digits only: such value names are positional numbers (%0, %1...), not user names.
inline bool is_numeric(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// Names that print without quotes: an identifier, [A-Za-z_][A-Za-z0-9_]*.
inline bool is_bare_name(const std::string& s) {
  if (s.empty() || !is_name_start(s[0])) return false;
  for (char c : s)
    if (!is_name_char(c)) return false;
  return true;
}

// "a/b:0" -> "\"a/b:0\"" with \" \\ \n \t \r escaped, so a name never breaks a line.
inline std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

inline std::string bare_or_quoted(const std::string& s) { return is_bare_name(s) ? s : quote(s); }

}  // namespace kiln::text_syntax
