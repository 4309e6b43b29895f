// Cluster mail (cluster_mail.cc): a fused row reduction split over a thread-block cluster ends
// without a cluster barrier — each block mails its partial to every block of the cluster with
// st.async completing the receiver's mbarrier, and each folds the partials in rank order. Why:
// softmax [512x262144] on the H200 ran at 2.72 TB/s with a cluster barrier a row (bulk rows), 3.20
// with mail and the register prefetch.
#pragma once

#include <string>
#include <vector>

#include "codegen/cuda/rows/row_plan.h"

namespace kiln::codegen::cuda {

struct RowFormOptions;

struct ClusterMailOptions {
  bool enabled = true;  // needs sm_90 (st.async, mbarrier transaction counts); off elsewhere
};

// Whether a register-row plan's fused reductions go by mail (RowPlan::mail).
bool uses_cluster_mail(const RowPlan& plan, const ClusterMailOptions& options);

// The form "cluster_mail": register rows split over a cluster, fused reductions by mail, and the
// register prefetch rather than a bulk ring (faster together on the H200). A plan with
// in_registers false where it does not apply (no cluster, no fused reduction, mail off).
RowPlan plan_cluster_mail(const std::vector<lower::Stmt>& row_body, const std::vector<std::string>& grid_vars,
                          const std::vector<lower::KernelParam>& params, const RowFormOptions& forms,
                          const RowDevice& device);

}  // namespace kiln::codegen::cuda
