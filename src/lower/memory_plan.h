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
  // Written in place over request `in_place_of` (which dies in the step that writes this one, has
  // the same size, and whose kernel was checked by can_write_in_place): both get one offset.
  int in_place_of = -1;
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per request, in request order
  int64_t arena_bytes = 0;       // planned peak
  int64_t naive_bytes = 0;       // sum of all requests (one allocation each)
  int in_place = 0;              // requests that took their dying input's bytes
  std::string to_string(const std::vector<BufferRequest>& requests) const;
};

// Greedy best-fit by decreasing size: each buffer takes the lowest aligned offset that does not
// overlap a placed buffer whose lifetime intersects its own. Requests chained by in_place_of are
// placed as one buffer living from the first's write to the last's last read.
MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, int64_t alignment = 64);

}  // namespace kiln::lower
