// The row-form selector (see select_row_form.h). The order is the measured one (docs/cuda.md, "Row
// forms"): a whole row in one block with a bulk ring beat a cluster of smaller blocks with rings or
// with the register prefetch; split over a cluster, mail with the register prefetch beat a ring;
// staged rows take what register rows cannot hold.
#include "codegen/cuda/rows/select_row_form.h"

#include <algorithm>

#include "kiln/error.h"

namespace kiln::codegen::cuda {

const std::vector<std::string>& row_form_names() {
  static const std::vector<std::string> names = {"bulk_rows", "cluster_mail", "register_rows", "staged_rows"};
  return names;
}

void check_row_form(const std::string& form) {
  if (form.empty()) return;
  const auto& names = row_form_names();
  if (std::find(names.begin(), names.end(), form) != names.end()) return;
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  throw Error(str("unknown CUDA row form '", form, "' (CudaCompileOptions::row_form): the forms are ", list,
                  ", or \"\" to choose by shape and device"));
}

RowFormOptions with_device_limits(const RowFormOptions& options, const RowDevice& device) {
  RowFormOptions out = options;
  RegisterRowOptions& r = out.registers;
  r.max_per_thread = std::max(1, r.max_per_thread);
  r.max_threads = std::clamp(r.max_threads, 32, 1024);
  r.register_words = std::max(1, r.register_words);
  r.max_cluster = device.has_clusters() ? std::clamp(r.max_cluster, 1, 16) : 1;
  r.preferred_threads = std::clamp(r.preferred_threads, 32, 1024);
  r.occupancy_threads = std::clamp(r.occupancy_threads, 32, 2048);
  out.bulk.min_per_thread = std::max(1, out.bulk.min_per_thread);
  out.mail.enabled = out.mail.enabled && device.has_clusters();
  return out;
}

RowPlan select_row_form(const std::vector<lower::Stmt>& row_body, const std::vector<std::string>& grid_vars,
                        const std::vector<lower::KernelParam>& params, const RowFormOptions& options,
                        const RowDevice& device) {
  check_row_form(options.form);
  const RowFormOptions forms = with_device_limits(options, device);
  const bool any = forms.form.empty();
  auto forced = [&](const char* name) { return forms.form == name; };
  if (any || forced("bulk_rows")) {
    RowPlan p = plan_whole_row_bulk(row_body, grid_vars, params, forms, device);
    if (p.in_registers) return p;
  }
  if (any || forced("register_rows")) {
    RowPlan p = plan_register_rows(row_body, grid_vars, params, forms, device);
    // Register rows that would split over a cluster with a bulk ring exchange by mail instead.
    if (any && p.bulk_stages > 0 && p.cluster > 1) {
      RowPlan mail = plan_cluster_mail(row_body, grid_vars, params, forms, device);
      if (mail.in_registers) return mail;
    }
    if (p.in_registers) return p;
  }
  if (forced("cluster_mail")) {
    RowPlan p = plan_cluster_mail(row_body, grid_vars, params, forms, device);
    if (p.in_registers) return p;
  }
  return plan_staged_rows(row_body, grid_vars, params, device.shared_per_block);
}

}  // namespace kiln::codegen::cuda
