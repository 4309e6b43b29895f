// Choosing a row kernel's form (select_row_form.cc): every form's options in one place, and the
// selector that tries the forms in the order the H200 measurements gave — bulk rows in one block,
// then register rows (split over a cluster where long), cluster mail where register rows would
// split with a bulk ring, and staged rows for the rest. Why: each form is a module with its own
// options and applicability check (rows/*.h); the choice between them lives here alone.
#pragma once

#include <string>
#include <vector>

#include "codegen/cuda/rows/bulk_rows.h"
#include "codegen/cuda/rows/cluster_mail.h"
#include "codegen/cuda/rows/fused_row_reductions.h"
#include "codegen/cuda/rows/register_rows.h"
#include "codegen/cuda/rows/row_plan.h"
#include "codegen/cuda/rows/staged_rows.h"

namespace kiln::codegen::cuda {

// The forms `RowFormOptions::form` can force, in the selector's order of preference.
const std::vector<std::string>& row_form_names();
// Throws kiln::Error naming `form` and the forms there are, unless it is "" or one of them.
void check_row_form(const std::string& form);

struct RowFormOptions {
  // "" picks by shape and device; a name from row_form_names() takes only that form where it
  // applies, and staged rows (which always apply) elsewhere. compile_cuda sets it from
  // CudaCompileOptions::row_form.
  std::string form;
  RegisterRowOptions registers;
  BulkRowOptions bulk;
  ClusterMailOptions mail;
  FusedReductionOptions fused;
};

// The options as the planners take them: knobs clamped to what the hardware allows, and the
// forms the device lacks turned off (clusters and mail before sm_90).
RowFormOptions with_device_limits(const RowFormOptions& options, const RowDevice& device);

// The plan for one row body (the statements below the grid-mapped loops).
RowPlan select_row_form(const std::vector<lower::Stmt>& row_body, const std::vector<std::string>& grid_vars,
                        const std::vector<lower::KernelParam>& params, const RowFormOptions& options,
                        const RowDevice& device);

}  // namespace kiln::codegen::cuda
