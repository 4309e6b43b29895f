// Liveness-based arena assignment (see memory_plan.h).
#include "lower/memory_plan.h"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace kiln::lower {

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, int64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  auto align = [&](int64_t x) { return (x + alignment - 1) / alignment * alignment; };
  std::vector<size_t> placed;
  for (size_t r : order) {
    const BufferRequest& req = requests[r];
    plan.naive_bytes += align(req.bytes);
    // Intervals taken by live-overlapping buffers, sorted by offset; take the first gap that fits.
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (size_t p : placed) {
      const BufferRequest& o = requests[p];
      if (o.last_step < req.first_step || req.last_step < o.first_step) continue;
      taken.push_back({plan.offsets[p], plan.offsets[p] + align(o.bytes)});
    }
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0;
    for (const auto& [lo, hi] : taken) {
      if (offset + align(req.bytes) <= lo) break;
      offset = std::max(offset, hi);
    }
    plan.offsets[r] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + align(req.bytes));
    placed.push_back(r);
  }
  return plan;
}

std::string MemoryPlan::to_string(const std::vector<BufferRequest>& requests) const {
  std::ostringstream os;
  os << "memory plan: " << requests.size() << " intermediates, arena " << arena_bytes
     << " bytes (naive sum " << naive_bytes << " bytes";
  if (naive_bytes > 0) os << ", " << (100 * arena_bytes / naive_bytes) << "%";
  os << ")\n";
  for (size_t i = 0; i < requests.size(); ++i)
    os << "  " << requests[i].label << ": " << requests[i].bytes << " bytes at offset " << offsets[i]
       << ", live steps " << requests[i].first_step << ".." << requests[i].last_step << "\n";
  return os.str();
}

}  // namespace kiln::lower
