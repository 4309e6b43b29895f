// Cluster mail (see cluster_mail.h): when a register-row plan's fused reductions go by mail, the
// form that prefers mail and the register prefetch to a bulk ring, and the mbarriers' set-up.
#include "codegen/cuda/rows/cluster_mail.h"

#include "codegen/cuda/kernel_printer.h"
#include "codegen/cuda/rows/select_row_form.h"

namespace kiln::codegen::cuda {

bool uses_cluster_mail(const RowPlan& plan, const ClusterMailOptions& options) {
  return options.enabled && plan.cluster > 1 && !plan.fused.empty();
}

// Split over a cluster, a fused reduction by mail pays more with the register prefetch than with
// bulk rows: softmax [512x262144] ran at 3.20 TB/s so, 3.03 with bulk rows and mail, 2.72 with
// bulk rows and a cluster barrier a row (layer norm there stays unfused, and bulk rows gave it 2.01
// against 1.78). Layer norm's mean and variance, unfused beside bulk rows, fuse there
// (plan_register_rows): 2.54 TB/s on [512x262144] against 2.01 with bulk rows and two cluster
// reductions a row.
RowPlan plan_cluster_mail(const std::vector<lower::Stmt>& row_body, const std::vector<std::string>& grid_vars,
                          const std::vector<lower::KernelParam>& params, const RowFormOptions& forms,
                          const RowDevice& device) {
  if (!forms.mail.enabled) return {};
  RowFormOptions registers_only = forms;
  registers_only.bulk.stages = 0;
  RowPlan r = plan_register_rows(row_body, grid_vars, params, registers_only, device);
  if (r.in_registers && r.mail) return r;
  return {};
}

// Before the row loop: each fused reduction's mail barriers, ready in every block of the cluster
// before any block sends (kiln_mail_combine in the prelude).
void KernelPrinter::emit_mail_init(const RowPlan& plan) {
  for (size_t site = 0; site < plan.fused.size(); ++site) line(1, str("kiln_mail_init<", site, ">();"));
  line(1, "kiln_cluster_sync();  // every block's mail barriers are ready before any is signalled");
}

}  // namespace kiln::codegen::cuda
