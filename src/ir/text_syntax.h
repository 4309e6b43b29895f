// Lexical rules the text IR printer and parser share (which names print bare, how quoted names
// escape). Why: one definition keeps print -> parse -> print identical.
#pragma once

#include <cctype>
#include <cstddef>
#include <cstdint>
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

// While one of these lives (on this thread), tensor literals of more than `max_bytes` bytes print
// as `dense<f32[768,3072]>"elided: 9437184 bytes"`: their shape without their values. Why: the IR
// dumps of a real model (one file per pass) otherwise repeat every weight in hex, gigabytes a model;
// the parser refuses an elided literal by name.
class TensorElision {
 public:
  explicit TensorElision(size_t max_bytes) : saved_(limit()) { limit() = max_bytes; }
  ~TensorElision() { limit() = saved_; }
  TensorElision(const TensorElision&) = delete;
  TensorElision& operator=(const TensorElision&) = delete;
  // The active limit; SIZE_MAX when no elision is in force.
  static size_t& limit() {
    static thread_local size_t max_bytes = SIZE_MAX;
    return max_bytes;
  }

 private:
  size_t saved_;
};

// The IR dumps' default (PassManager's per-pass files, `kiln dump`): weights go, small constants
// (shapes, scalars, masks of a few KB) stay. A scope of SIZE_MAX - 1 keeps everything
// (`kiln dump --full-weights`).
inline constexpr size_t kDumpTensorBytes = 64 * 1024;

// What an elided tensor literal holds in place of its values.
inline constexpr const char* kElidedTensorMark = "elided: ";

}  // namespace kiln::text_syntax
