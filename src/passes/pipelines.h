// The optimization pipelines, as data. Why: the order of passes is a design decision that should
// be read in one place with the reason for each position, not buried in code.
#pragma once

#include "passes/pass_manager.h"

namespace kiln::passes {

// The pipeline kiln::optimize runs: clean up what capture produced, decompose for the target,
// clean up again, then put broadcasts in the form the lowering expects.
const Pipeline& default_pipeline();

}  // namespace kiln::passes
