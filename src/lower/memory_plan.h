// The memory planner: every intermediate buffer gets an offset in one arena; buffers whose
// lifetimes (first to last step that touches them) do not overlap share bytes. Why: peak memory
// and cache footprint follow the live set, not the number of intermediates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::lower {

struct BufferRequest {
  std::string label;    // for reports
  int64_t bytes = 0;
  int first_step = 0;   // the step that writes it
  int last_step = 0;    // the last step that reads it
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per request, in request order
  int64_t arena_bytes = 0;       // planned peak
  int64_t naive_bytes = 0;       // sum of all requests (one allocation each)
  std::string to_string(const std::vector<BufferRequest>& requests) const;
};

// Greedy best-fit by decreasing size: each buffer takes the lowest aligned offset that does not
// overlap a placed buffer whose lifetime intersects its own.
MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, int64_t alignment = 64);

}  // namespace kiln::lower
