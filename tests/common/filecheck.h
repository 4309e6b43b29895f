// A small FileCheck: matches `// CHECK:` style directives against a tool's output. Why: pass
// tests are text files (input IR plus expected lines), read like LLVM/MLIR tests, without
// depending on LLVM.
//
// Directives (any comment prefix before them is ignored; `CHECK` is the default prefix):
//   CHECK: p       p matches on some line after the previous match
//   CHECK-NEXT: p  p matches on the line right after the previous match's line
//   CHECK-SAME: p  p matches on the previous match's line, after that match
//   CHECK-NOT: p   p matches nowhere between the previous match and the next positive match
//                  (or the end of the output)
// Patterns are literal text, except {{regex}} (an ECMAScript regex), [[NAME:regex]] (captures
// into NAME) and [[NAME]] (the text NAME captured last). Runs of spaces match runs of spaces.
#pragma once

#include <string>
#include <vector>

namespace kiln::testing {

struct CheckResult {
  bool ok = true;
  std::string message;  // on failure: which directive, on which line, and the output near it
  int num_directives = 0;
};

// Checks `output` against the directives found in `check_text`.
CheckResult filecheck(const std::string& check_text, const std::string& output,
                      const std::string& prefix = "CHECK");

}  // namespace kiln::testing
