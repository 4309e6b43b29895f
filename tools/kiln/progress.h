// Progress lines on stderr for long steps, shown only when stderr is a terminal. Why: compiling,
// calibrating and benchmarking take seconds; a pipe or a test log should not fill with them.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

namespace kiln::cli {

inline bool stderr_is_tty() { return isatty(STDERR_FILENO) == 1; }

// "kiln: compiling..." overwritten in place; done() clears the line.
inline void progress(const std::string& what) {
  if (stderr_is_tty()) std::fprintf(stderr, "\r\033[Kkiln: %s...", what.c_str());
}
inline void progress_done() {
  if (stderr_is_tty()) std::fprintf(stderr, "\r\033[K");
}

}  // namespace kiln::cli
