// CudaExecutable::explain: the schedule, Loop IR, device arena, NVRTC cache entry and generated CUDA
// of one compiled graph, for `kiln explain --device cuda` and tests.
#include <sstream>

#include "runtime/cuda/cuda_executable_internal.h"

namespace kiln::cuda {

std::string CudaExecutable::explain() const {
  std::ostringstream os;
  os << "== CUDA graph '" << lowered->graph->name() << "': " << stats_.kernels_generated << " generated kernels, "
     << stats_.library_calls << " library calls (cuBLASLt, fused attention) ==\n";
  for (const auto& note : lowered->decomposition_notes) os << note << "\n";
  os << lowered->schedule.explain();
  os << "\n== Loop IR ==\n";
  for (const auto& k : lowered->kernels) os << lower::print_kernel(k.kernel) << "\n";
  os << "== device memory ==\n";
  bool is_static = true;
  for (const Value* in : lowered->graph->inputs()) is_static &= in->type.is_static();
  if (is_static) {
    const DeviceArenaPlan arena = device_memory_plan({});
    os << arena.values.size() << " intermediates in one " << arena.plan.arena_bytes << "-byte arena ("
       << arena.plan.naive_bytes << " bytes as one buffer each)\n\n";
  } else {
    os << "intermediates planned per binding of the symbolic dims\n\n";
  }
  os << "== NVRTC ==\ncache key " << stats_.cache_key << (stats_.cache_hit ? " (hit)" : " (miss)") << ", compile "
     << stats_.compile_ms << " ms\n\n== generated CUDA ==\n" << source_;
  return os.str();
}

}  // namespace kiln::cuda
