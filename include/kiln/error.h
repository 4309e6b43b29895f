// Errors a user can cause (bad graphs, bad shapes, bad files). Why: every such failure must
// surface as one exception type with a message naming the thing that is wrong, never a crash.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string msg) : std::runtime_error(std::move(msg)) {}
};

// Concatenates anything streamable: str("op ", name, " expects ", n, " operands").
template <typename... Args> std::string str(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

}  // namespace kiln

// User-facing check: throws kiln::Error with the streamed message.
#define KILN_CHECK(cond, ...)                               \
  do {                                                      \
    if (!(cond)) throw ::kiln::Error(::kiln::str(__VA_ARGS__)); \
  } while (0)

// Internal invariant: a failure is a Kiln bug, reported with file and line.
#define KILN_ASSERT(cond)                                                            \
  do {                                                                               \
    if (!(cond))                                                                     \
      throw ::kiln::Error(::kiln::str("internal error: ", #cond, " at ", __FILE__, ":", \
                                      __LINE__));                                    \
  } while (0)
