// Size-class pools, best-fit search, splitting, coalescing and cross-stream event tracking.
#include "runtime/cuda/caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <tuple>

#include "kiln/error.h"

namespace kiln::cuda {
namespace {

std::string hex_address(DevicePtr ptr) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(ptr));
  return text;
}

std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace

bool CachingAllocator::ByStreamSizeAddress::operator()(const Block* a, const Block* b) const {
  return std::tie(a->stream, a->size, a->ptr) < std::tie(b->stream, b->size, b->ptr);
}

CachingAllocator::CachingAllocator(DeviceMemoryBackend& backend) : backend_(backend) {}

CachingAllocator::~CachingAllocator() {
  for (auto& [event, block] : pending_) backend_.release_event(event);
  for (auto& [base, segment] : segments_) {
    for (Block* block = segment.head; block;) {
      Block* next = block->next;
      delete block;
      block = next;
    }
    backend_.release(base, segment.size);
  }
}

std::size_t CachingAllocator::round_size(std::size_t bytes) {
  return bytes < kMinBlockSize ? kMinBlockSize : round_up(bytes, kMinBlockSize);
}

std::size_t CachingAllocator::segment_size_for(std::size_t rounded_bytes) {
  if (rounded_bytes <= kSmallRequestLimit) return kSmallSegmentSize;
  if (rounded_bytes < kMidRequestLimit) return kMidSegmentSize;
  return round_up(rounded_bytes, kLargeRounding);
}

DevicePtr CachingAllocator::allocate(std::size_t bytes, StreamId stream) {
  if (bytes == 0) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  process_completed_events();
  const std::size_t rounded = round_size(bytes);
  const bool small_pool = rounded <= kSmallRequestLimit;
  Block* block = take_free_block(rounded, stream, small_pool);
  if (block) {
    ++counters_.cache_hits;
  } else {
    block = new_segment(rounded, stream, small_pool);
  }
  split_if_worthwhile(block, rounded);
  block->allocated = true;
  block->requested = bytes;
  allocated_.emplace(block->ptr, block);
  ++counters_.allocations;
  counters_.allocated_bytes += block->size;
  counters_.requested_bytes += bytes;
  update_peaks();
  return block->ptr;
}

CachingAllocator::Block* CachingAllocator::take_free_block(std::size_t rounded, StreamId stream,
                                                           bool small_pool) {
  FreeSet& pool = pool_for(small_pool);
  Block key;
  key.stream = stream;
  key.size = rounded;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  pool.erase(it);
  return block;
}

CachingAllocator::Block* CachingAllocator::new_segment(std::size_t rounded, StreamId stream,
                                                       bool small_pool) {
  const std::size_t segment_size = segment_size_for(rounded);
  DevicePtr ptr = backend_.allocate(segment_size);
  if (ptr == 0) {
    // Give the cache back to the driver and try once more before reporting out-of-memory.
    wait_for_all_events();
    release_free_segments();
    ptr = backend_.allocate(segment_size);
  }
  KILN_CHECK(ptr != 0, "out of device memory: allocating ", rounded, " bytes (a segment of ",
             segment_size, ") with ", counters_.allocated_bytes, " bytes allocated and ",
             counters_.reserved_bytes, " reserved by Kiln's caching allocator");
  KILN_ASSERT(ptr % kMinBlockSize == 0);
  auto* block = new Block;
  block->ptr = ptr;
  block->size = segment_size;
  block->stream = stream;
  block->small_pool = small_pool;
  segments_[ptr] = Segment{segment_size, block};
  ++counters_.driver_allocations;
  ++counters_.segments;
  counters_.reserved_bytes += segment_size;
  return block;
}

void CachingAllocator::split_if_worthwhile(Block* block, std::size_t rounded) {
  const std::size_t remaining = block->size - rounded;
  // A large-pool remainder that could only ever serve small requests is left attached: splitting
  // it off would scatter small leftovers across large segments.
  const bool worthwhile = block->small_pool ? remaining >= kMinBlockSize
                                            : remaining > kSmallRequestLimit;
  if (!worthwhile) return;
  auto* rest = new Block;
  rest->ptr = block->ptr + rounded;
  rest->size = remaining;
  rest->stream = block->stream;
  rest->small_pool = block->small_pool;
  rest->prev = block;
  rest->next = block->next;
  if (block->next) block->next->prev = rest;
  block->next = rest;
  block->size = rounded;
  ++counters_.splits;
  pool_for(rest->small_pool).insert(rest);
}

void CachingAllocator::free(DevicePtr ptr) {
  if (ptr == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocated_.find(ptr);
  KILN_CHECK(it != allocated_.end(), "free of device pointer ", hex_address(ptr),
             " that Kiln's caching allocator did not hand out (or already freed)");
  Block* block = it->second;
  allocated_.erase(it);
  block->allocated = false;
  counters_.allocated_bytes -= block->size;
  counters_.requested_bytes -= block->requested;
  block->requested = 0;
  if (block->other_streams.empty()) {
    return_to_pool(block);
    return;
  }
  for (StreamId stream : block->other_streams) {
    pending_.emplace_back(backend_.record_event(stream), block);
    ++block->pending_events;
  }
  block->other_streams.clear();
}

void CachingAllocator::record_stream(DevicePtr ptr, StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocated_.find(ptr);
  KILN_CHECK(it != allocated_.end(), "record_stream on device pointer ", hex_address(ptr),
             " that is not allocated by Kiln's caching allocator");
  Block* block = it->second;
  if (stream == block->stream) return;
  auto& others = block->other_streams;
  if (std::find(others.begin(), others.end(), stream) == others.end()) others.push_back(stream);
}

void CachingAllocator::return_to_pool(Block* block) {
  FreeSet& pool = pool_for(block->small_pool);
  if (Block* next = block->next; next && next->reusable()) {
    pool.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next) next->next->prev = block;
    delete next;
    ++counters_.merges;
  }
  if (Block* prev = block->prev; prev && prev->reusable()) {
    pool.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (block->next) block->next->prev = prev;
    delete block;
    block = prev;
    ++counters_.merges;
  }
  pool.insert(block);
}

void CachingAllocator::process_completed_events() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!backend_.event_completed(it->first)) {
      ++it;
      continue;
    }
    backend_.release_event(it->first);
    Block* block = it->second;
    it = pending_.erase(it);
    if (--block->pending_events == 0) return_to_pool(block);
  }
}

void CachingAllocator::wait_for_all_events() {
  for (auto& [event, block] : pending_) backend_.wait_event(event);
  process_completed_events();
}

std::size_t CachingAllocator::release_free_segments() {
  std::size_t released = 0;
  for (auto it = segments_.begin(); it != segments_.end();) {
    Block* head = it->second.head;
    if (head->next != nullptr || !head->reusable()) {
      ++it;
      continue;
    }
    pool_for(head->small_pool).erase(head);
    backend_.release(head->ptr, head->size);
    counters_.reserved_bytes -= head->size;
    released += head->size;
    ++counters_.driver_frees;
    --counters_.segments;
    delete head;
    it = segments_.erase(it);
  }
  return released;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  wait_for_all_events();
  release_free_segments();
}

void CachingAllocator::update_peaks() {
  counters_.peak_allocated_bytes = std::max(counters_.peak_allocated_bytes,
                                            counters_.allocated_bytes);
  counters_.peak_reserved_bytes = std::max(counters_.peak_reserved_bytes,
                                           counters_.reserved_bytes);
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  counters_.peak_allocated_bytes = counters_.allocated_bytes;
  counters_.peak_reserved_bytes = counters_.reserved_bytes;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  AllocatorStats out = counters_;
  out.active_blocks = int64_t(allocated_.size());
  out.cached_free_bytes = 0;
  out.largest_free_block = 0;
  for (const FreeSet* pool : {&small_free_, &large_free_}) {
    for (const Block* block : *pool) {
      out.cached_free_bytes += block->size;
      out.largest_free_block = std::max(out.largest_free_block, block->size);
    }
  }
  out.awaiting_event_bytes = 0;
  for (const auto& [base, segment] : segments_) {
    for (const Block* block = segment.head; block; block = block->next) {
      if (!block->allocated && block->pending_events > 0) out.awaiting_event_bytes += block->size;
    }
  }
  out.fragmentation = out.cached_free_bytes == 0
                          ? 0.0
                          : 1.0 - double(out.largest_free_block) / double(out.cached_free_bytes);
  return out;
}

std::string CachingAllocator::snapshot_json() const {
  const AllocatorStats s = stats();
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json segments = nlohmann::json::array();
  for (const auto& [base, segment] : segments_) {
    nlohmann::json blocks = nlohmann::json::array();
    for (const Block* block = segment.head; block; block = block->next) {
      const char* state = block->allocated             ? "allocated"
                          : block->pending_events > 0 ? "awaiting_events"
                                                      : "free";
      blocks.push_back({{"offset", block->ptr - base},
                        {"size", block->size},
                        {"requested", block->requested},
                        {"state", state}});
    }
    segments.push_back({{"address", hex_address(base)},
                        {"size", segment.size},
                        {"pool", segment.head->small_pool ? "small" : "large"},
                        {"stream", segment.head->stream},
                        {"blocks", std::move(blocks)}});
  }
  nlohmann::json stats_json = {
      {"allocated_bytes", s.allocated_bytes},     {"requested_bytes", s.requested_bytes},
      {"reserved_bytes", s.reserved_bytes},       {"peak_allocated_bytes", s.peak_allocated_bytes},
      {"peak_reserved_bytes", s.peak_reserved_bytes},
      {"cached_free_bytes", s.cached_free_bytes}, {"largest_free_block", s.largest_free_block},
      {"awaiting_event_bytes", s.awaiting_event_bytes},
      {"driver_allocations", s.driver_allocations}, {"driver_frees", s.driver_frees},
      {"allocations", s.allocations},             {"cache_hits", s.cache_hits},
      {"splits", s.splits},                       {"merges", s.merges},
      {"segments", s.segments},                   {"active_blocks", s.active_blocks},
      {"fragmentation", s.fragmentation}};
  return nlohmann::json{{"stats", stats_json}, {"segments", segments}}.dump(2);
}

}  // namespace kiln::cuda
