// A caching allocator for device memory. Why: cuMemAlloc/cuMemFree synchronise the device and
// cost tens of microseconds, so an eager executor that allocated each result from the driver would
// be limited by the allocator; in steady state a repeated sequence of allocations must make no
// driver call at all. The logic is written against DeviceMemoryBackend so it is tested on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::cuda {

using DevicePtr = std::uint64_t;  // a CUdeviceptr value; 0 is null
using StreamId = std::uintptr_t;  // a CUstream value (0: the legacy default stream) or a fake id
using EventId = std::uintptr_t;   // a CUevent value or a fake id

// What the allocator needs from a device: raw memory and stream-ordered completion events.
class DeviceMemoryBackend {
 public:
  virtual ~DeviceMemoryBackend() = default;
  // A new device allocation of exactly `bytes`, or 0 when the device is out of memory.
  virtual DevicePtr allocate(std::size_t bytes) = 0;
  virtual void release(DevicePtr ptr, std::size_t bytes) = 0;
  // An event that completes once all work queued on `stream` so far has finished.
  virtual EventId record_event(StreamId stream) = 0;
  virtual bool event_completed(EventId event) = 0;
  virtual void wait_event(EventId event) = 0;  // blocks the host until the event completes
  virtual void release_event(EventId event) = 0;
};

struct AllocatorStats {
  std::size_t allocated_bytes = 0;       // rounded sizes of blocks handed out and not yet freed
  std::size_t requested_bytes = 0;       // the sizes callers asked for, of those blocks
  std::size_t reserved_bytes = 0;        // memory held from the driver (all segments)
  std::size_t peak_allocated_bytes = 0;
  std::size_t peak_reserved_bytes = 0;
  std::size_t cached_free_bytes = 0;     // reserved, not allocated, ready for reuse
  std::size_t largest_free_block = 0;
  std::size_t awaiting_event_bytes = 0;  // freed but still in use by another stream
  int64_t driver_allocations = 0;        // backend allocate() calls that succeeded
  int64_t driver_frees = 0;
  int64_t allocations = 0;               // allocate() calls of non-zero size
  int64_t cache_hits = 0;                // allocations served without a driver call
  int64_t splits = 0;
  int64_t merges = 0;
  int64_t segments = 0;
  int64_t active_blocks = 0;
  // External fragmentation of the cache: 1 - largest free block / free cached bytes; 0 when no
  // memory is cached. Near 1: plenty cached, but only in pieces too small for a large request.
  double fragmentation = 0;
};

class CachingAllocator {
 public:
  // Sizes are rounded up to this; every pointer handed out is aligned to it.
  static constexpr std::size_t kMinBlockSize = 512;
  // Requests up to this come from the small pool, carved out of kSmallSegmentSize segments.
  static constexpr std::size_t kSmallRequestLimit = std::size_t(1) << 20;
  static constexpr std::size_t kSmallSegmentSize = std::size_t(2) << 20;
  // Large requests under kMidRequestLimit share kMidSegmentSize segments; bigger ones get a
  // segment of their own, rounded to kLargeRounding.
  static constexpr std::size_t kMidRequestLimit = std::size_t(10) << 20;
  static constexpr std::size_t kMidSegmentSize = std::size_t(20) << 20;
  static constexpr std::size_t kLargeRounding = std::size_t(2) << 20;

  explicit CachingAllocator(DeviceMemoryBackend& backend);
  ~CachingAllocator();  // returns every segment to the backend
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` for use on `stream`; 0 for 0 bytes. Throws kiln::Error when the
  // device is out of memory even after the cache was returned to the driver.
  DevicePtr allocate(std::size_t bytes, StreamId stream);
  // The block may be reused by later allocations on its stream at once (stream order keeps that
  // safe), and on its stream only once every other stream it was recorded on has caught up.
  void free(DevicePtr ptr);
  // Declares that `ptr` is also used by work on `stream`, so freeing it must wait for that work.
  void record_stream(DevicePtr ptr, StreamId stream);
  // Returns every segment that holds no allocated block to the backend (waits for pending events).
  void empty_cache();

  AllocatorStats stats() const;
  void reset_peak_stats();
  // Segments, their blocks and the statistics as JSON, for debugging memory use.
  std::string snapshot_json() const;

  static std::size_t round_size(std::size_t bytes);
  static std::size_t segment_size_for(std::size_t rounded_bytes);

 private:
  struct Block {
    DevicePtr ptr = 0;
    std::size_t size = 0;
    std::size_t requested = 0;
    StreamId stream = 0;
    bool small_pool = false;
    bool allocated = false;
    int pending_events = 0;
    std::vector<StreamId> other_streams;  // streams other than `stream` that used the block
    Block* prev = nullptr;                // neighbours inside the same segment
    Block* next = nullptr;
    bool reusable() const { return !allocated && pending_events == 0; }
  };
  struct ByStreamSizeAddress {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeSet = std::set<Block*, ByStreamSizeAddress>;
  struct Segment {
    std::size_t size = 0;
    Block* head = nullptr;  // the block at the segment's base address; never merged away
  };

  FreeSet& pool_for(bool small_pool) { return small_pool ? small_free_ : large_free_; }
  Block* take_free_block(std::size_t rounded, StreamId stream, bool small_pool);
  Block* new_segment(std::size_t rounded, StreamId stream, bool small_pool);
  void split_if_worthwhile(Block* block, std::size_t rounded);
  void return_to_pool(Block* block);
  void process_completed_events();
  void wait_for_all_events();
  std::size_t release_free_segments();
  void update_peaks();

  DeviceMemoryBackend& backend_;
  mutable std::mutex mutex_;
  FreeSet small_free_;
  FreeSet large_free_;
  std::unordered_map<DevicePtr, Block*> allocated_;  // by pointer, blocks handed out
  std::map<DevicePtr, Segment> segments_;            // by base address
  std::deque<std::pair<EventId, Block*>> pending_;   // events freed blocks wait for
  AllocatorStats counters_;  // the counting fields; the derived ones are filled in by stats()
};

}  // namespace kiln::cuda
