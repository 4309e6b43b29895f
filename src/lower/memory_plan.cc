// Liveness-based arena assignment (see memory_plan.h).
#include "lower/memory_plan.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "kiln/error.h"

namespace kiln::lower {

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, int64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  auto align = [&](int64_t x) { return (x + alignment - 1) / alignment * alignment; };
  // In-place chains become one buffer: root[r] is the first request of r's chain.
  std::vector<size_t> root(requests.size());
  std::iota(root.begin(), root.end(), 0);
  auto find = [&](size_t r) {
    while (root[r] != r) r = root[r];
    return r;
  };
  for (size_t r = 0; r < requests.size(); ++r) {
    plan.naive_bytes += align(requests[r].bytes);
    int of = requests[r].in_place_of;
    if (of >= 0 && size_t(of) < requests.size() && find(size_t(of)) != r) {
      root[r] = find(size_t(of));
      ++plan.in_place;
    }
  }
  std::vector<BufferRequest> merged;  // one per chain root, in request order
  std::vector<size_t> merged_of(requests.size());
  std::vector<size_t> roots;
  for (size_t r = 0; r < requests.size(); ++r)
    if (find(r) == r) {
      merged_of[r] = merged.size();
      merged.push_back(requests[r]);
      roots.push_back(r);
    }
  for (size_t r = 0; r < requests.size(); ++r) {
    BufferRequest& m = merged[merged_of[find(r)]];
    m.bytes = std::max(m.bytes, requests[r].bytes);
    m.first_step = std::min(m.first_step, requests[r].first_step);
    m.last_step = std::max(m.last_step, requests[r].last_step);
  }
  std::vector<int64_t> offsets(merged.size(), 0);
  std::vector<size_t> order(merged.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return merged[a].bytes > merged[b].bytes; });
  std::vector<size_t> placed;
  for (size_t r : order) {
    const BufferRequest& req = merged[r];
    // Intervals taken by live-overlapping buffers, sorted by offset; take the first gap that fits.
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (size_t p : placed) {
      const BufferRequest& o = merged[p];
      if (o.last_step < req.first_step || req.last_step < o.first_step) continue;
      taken.push_back({offsets[p], offsets[p] + align(o.bytes)});
    }
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0;
    for (const auto& [lo, hi] : taken) {
      if (offset + align(req.bytes) <= lo) break;
      offset = std::max(offset, hi);
    }
    offsets[r] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + align(req.bytes));
    placed.push_back(r);
  }
  for (size_t r = 0; r < requests.size(); ++r) plan.offsets[r] = offsets[merged_of[find(r)]];
  return plan;
}

std::string MemoryPlan::to_string(const std::vector<BufferRequest>& requests) const {
  std::ostringstream os;
  os << "memory plan: " << requests.size() << " intermediates, arena " << arena_bytes
     << " bytes (naive sum " << naive_bytes << " bytes";
  if (naive_bytes > 0) os << ", " << (100 * arena_bytes / naive_bytes) << "%";
  os << "; " << in_place << " written in place)\n";
  for (size_t i = 0; i < requests.size(); ++i)
    os << "  " << requests[i].label << ": " << requests[i].bytes << " bytes at offset " << offsets[i]
       << ", live steps " << requests[i].first_step << ".." << requests[i].last_step
       << (requests[i].in_place_of >= 0 ? str(" (in place of ", requests[size_t(requests[i].in_place_of)].label, ")") : "")
       << "\n";
  return os.str();
}

}  // namespace kiln::lower
