// The caching allocator's logic on a fake device: pools, splitting, coalescing, stream ownership,
// events, statistics, snapshots, empty_cache and the zero-driver-allocation steady state.
#include "runtime/cuda/caching_allocator.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "kiln/error.h"
#include "unit/cuda/fake_device_backend.h"

namespace kiln::cuda {
namespace {

using testing::FakeDeviceBackend;
constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * 1024;
constexpr StreamId kStreamA = 1;
constexpr StreamId kStreamB = 2;

TEST(CachingAllocator, RoundsSizesAndChoosesSegmentSizes) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::segment_size_for(512), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size_for(1 * MiB), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size_for(1 * MiB + 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size_for(10 * MiB), 10 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size_for(11 * MiB + 512), 12 * MiB);
}

TEST(CachingAllocator, ZeroBytesIsNullAndFreeingNullIsANoOp) {
  FakeDeviceBackend device;
  CachingAllocator allocator(device);
  EXPECT_EQ(allocator.allocate(0, kStreamA), 0u);
  allocator.free(0);
  EXPECT_EQ(device.allocate_calls, 0);
}

TEST(CachingAllocator, SmallRequestsShareOneSegmentAndAreAligned) {
  FakeDeviceBackend device;
  CachingAllocator allocator(device);
  DevicePtr a = allocator.allocate(100, kStreamA);
  DevicePtr b = allocator.allocate(1000, kStreamA);
  DevicePtr c = allocator.allocate(200 * KiB, kStreamA);
  EXPECT_EQ(device.allocate_calls, 1);
  for (DevicePtr p : {a, b, c}) EXPECT_EQ(p % CachingAllocator::kMinBlockSize, 0u);
  EXPECT_EQ(b, a + 512);
  EXPECT_EQ(c, b + 1024);
  AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.reserved_bytes, 2 * MiB);
  EXPECT_EQ(s.allocated_bytes, 512 + 1024 + 200 * KiB);
  EXPECT_EQ(s.requested_bytes, 100 + 1000 + 200 * KiB);
  EXPECT_EQ(s.active_blocks, 3);
  EXPECT_EQ(s.splits, 3);
}

TEST(CachingAllocator, FreedNeighboursCoalesceBackIntoTheWholeSegment) {
  FakeDeviceBackend device;
  CachingAllocator allocator(device);
  DevicePtr a = allocator.allocate(1000, kStreamA);
  DevicePtr b = allocator.allocate(1000, kStreamA);
  DevicePtr c = allocator.allocate(1000, kStreamA);
  allocator.free(b);
  EXPECT_EQ(allocator.stats().merges, 0);  // both neighbours still allocated
  allocator.free(a);
  EXPECT_EQ(allocator.stats().merges, 1);  // a absorbs b
  allocator.free(c);                        // c joins a+b and the tail
  AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.merges, 3);
  EXPECT_EQ(s.largest_free_block, 2 * MiB);
  EXPECT_EQ(s.cached_free_bytes, 2 * MiB);
  EXPECT_EQ(s.fragmentation, 0.0);
  // The whole segment is one block again, so a 1 MiB request is served from it at its base.
  EXPECT_EQ(allocator.allocate(1 * MiB, kStreamA), a);
  EXPECT_EQ(device.allocate_calls, 1);
}

TEST(CachingAllocator, LargeRequestsSplitOnlyLargeRemainders) {
  FakeDeviceBackend device;
  CachingAllocator allocator(device);
  DevicePtr a = allocator.allocate(3 * MiB, kStreamA);  // 20 MiB segment, 17 MiB split off
  DevicePtr b = allocator.allocate(5 * MiB, kStreamA);  // from the 17 MiB remainder
  EXPECT_EQ(device.allocate_calls, 1);
  EXPECT_EQ(b, a + 3 * MiB);
  // 19.5 MiB in a fresh 20 MiB segment leaves 0.5 MiB, too small to split off a large block.
  allocator.allocate(19 * MiB + 512 * KiB, kStreamA);
  EXPECT_EQ(device.allocate_calls, 2);
  EXPECT_EQ(allocator.stats().allocated_bytes, 3 * MiB + 5 * MiB + 20 * MiB);
  // Small requests never come from the large pool, even though 12 MiB are free there.
  allocator.allocate(4 * KiB, kStreamA);
  EXPECT_EQ(device.allocate_calls, 3);
}

TEST(CachingAllocator, HugeRequestsGetTheirOwnSegmentAndAreReused) {
  FakeDeviceBackend device;
  CachingAllocator allocator(device);
  DevicePtr a = allocator.allocate(30 * MiB + 7, kStreamA);
  EXPECT_EQ(allocator.stats().reserved_bytes, 32 * MiB);
  allocator.free(a);
  EXPECT_EQ(allocator.allocate(31 * MiB, kStreamA), a);
  AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.driver_allocations, 1);
  EXPECT_EQ(s.cache_hits, 1);
}

TEST(CachingAllocator, FreeBlocksAreReusedOnlyByTheirOwnStream) {
  FakeDeviceBackend device;
  CachingAllocator allocator(device);
  DevicePtr a = allocator.allocate(4 * KiB, kStreamA);
  allocator.free(a);
  DevicePtr b = allocator.allocate(4 * KiB, kStreamB);
  EXPECT_NE(b, a);
  EXPECT_EQ(device.allocate_calls, 2);
  EXPECT_EQ(allocator.allocate(4 * KiB, kStreamA), a);
  EXPECT_EQ(device.allocate_calls, 2);
}

TEST(CachingAllocator, BlockUsedByAnotherStreamWaitsForItsEvent) {
  FakeDeviceBackend device;
  CachingAllocator allocator(device);
  DevicePtr a = allocator.allocate(64 * KiB, kStreamA);
  allocator.record_stream(a, kStreamB);
  allocator.record_stream(a, kStreamA);  // its own stream: nothing to wait for
  allocator.free(a);
  EXPECT_EQ(device.live_events(), 1u);
  EXPECT_EQ(allocator.stats().awaiting_event_bytes, 64 * KiB);
  // Stream B has not caught up: the block must not come back, even on its own stream.
  DevicePtr b = allocator.allocate(64 * KiB, kStreamA);
  EXPECT_NE(b, a);
  allocator.free(b);
  device.finish_stream(kStreamB);
  DevicePtr c = allocator.allocate(64 * KiB, kStreamA);  // events are polled here
  EXPECT_EQ(c, a);
  EXPECT_EQ(device.live_events(), 0u);
  EXPECT_EQ(allocator.stats().awaiting_event_bytes, 0u);
}

TEST(CachingAllocator, TracksPeaksAndResetsThem) {
  FakeDeviceBackend device;
  CachingAllocator allocator(device);
  DevicePtr a = allocator.allocate(3 * MiB, kStreamA);
  DevicePtr b = allocator.allocate(3 * MiB, kStreamA);
  allocator.free(a);
  allocator.free(b);
  AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.peak_allocated_bytes, 6 * MiB);
  EXPECT_EQ(s.peak_reserved_bytes, 20 * MiB);
  EXPECT_EQ(s.allocations, 2);
  allocator.reset_peak_stats();
  EXPECT_EQ(allocator.stats().peak_allocated_bytes, 0u);
  EXPECT_EQ(allocator.stats().peak_reserved_bytes, 20 * MiB);
}

TEST(CachingAllocator, FragmentationMeasuresHowScatteredTheFreeCacheIs) {
  FakeDeviceBackend device;
  CachingAllocator allocator(device);
  std::vector<DevicePtr> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(allocator.allocate(256 * KiB, kStreamA));
  EXPECT_EQ(device.allocate_calls, 1);  // 8 x 256 KiB fill one 2 MiB segment exactly
  for (int i = 0; i < 8; i += 2) allocator.free(blocks[i]);
  AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.cached_free_bytes, 1 * MiB);
  EXPECT_EQ(s.largest_free_block, 256 * KiB);
  EXPECT_DOUBLE_EQ(s.fragmentation, 0.75);
}

TEST(CachingAllocator, EmptyCacheReleasesOnlyWhollyFreeSegments) {
  FakeDeviceBackend device;
  CachingAllocator allocator(device);
  DevicePtr kept = allocator.allocate(4 * KiB, kStreamA);           // small segment, stays
  DevicePtr large = allocator.allocate(40 * MiB, kStreamA);         // own segment, freed
  DevicePtr shared = allocator.allocate(3 * MiB, kStreamA);         // 20 MiB segment
  allocator.record_stream(shared, kStreamB);
  allocator.free(large);
  allocator.free(shared);  // waits on stream B's event
  allocator.empty_cache();
  EXPECT_EQ(device.waits, 1);
  EXPECT_EQ(device.release_calls, 2);
  EXPECT_EQ(device.live_allocations(), 1u);
  AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.reserved_bytes, 2 * MiB);
  EXPECT_EQ(s.driver_frees, 2);
  EXPECT_EQ(s.segments, 1);
  allocator.free(kept);
}

TEST(CachingAllocator, OutOfMemoryReturnsTheCacheThenReportsClearly) {
  FakeDeviceBackend device(/*capacity_bytes=*/30 * MiB);
  CachingAllocator allocator(device);
  allocator.free(allocator.allocate(3 * MiB, kStreamA));  // caches a 20 MiB segment
  DevicePtr big = allocator.allocate(25 * MiB, kStreamA);  // fits only once the cache is released
  EXPECT_NE(big, 0u);
  EXPECT_EQ(device.release_calls, 1);
  try {
    allocator.allocate(25 * MiB, kStreamA);
    FAIL() << "expected an out-of-memory error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of device memory"), std::string::npos) << e.what();
  }
}

TEST(CachingAllocator, FreeingAPointerItDidNotHandOutThrows) {
  FakeDeviceBackend device;
  CachingAllocator allocator(device);
  DevicePtr a = allocator.allocate(100, kStreamA);
  EXPECT_THROW(allocator.free(a + 512), Error);
  allocator.free(a);
  EXPECT_THROW(allocator.free(a), Error);
  EXPECT_THROW(allocator.record_stream(a, kStreamB), Error);
}

TEST(CachingAllocator, SnapshotListsSegmentsBlocksAndStats) {
  FakeDeviceBackend device;
  CachingAllocator allocator(device);
  DevicePtr a = allocator.allocate(1000, kStreamA);
  DevicePtr b = allocator.allocate(2000, kStreamA);
  allocator.record_stream(b, kStreamB);
  allocator.free(b);
  nlohmann::json snapshot = nlohmann::json::parse(allocator.snapshot_json());
  ASSERT_EQ(snapshot["segments"].size(), 1u);
  const nlohmann::json& segment = snapshot["segments"][0];
  EXPECT_EQ(segment["pool"], "small");
  EXPECT_EQ(segment["size"], 2 * MiB);
  EXPECT_EQ(segment["stream"], kStreamA);
  ASSERT_EQ(segment["blocks"].size(), 3u);
  EXPECT_EQ(segment["blocks"][0]["state"], "allocated");
  EXPECT_EQ(segment["blocks"][0]["requested"], 1000);
  EXPECT_EQ(segment["blocks"][1]["state"], "awaiting_events");
  EXPECT_EQ(segment["blocks"][1]["offset"], 1024);
  EXPECT_EQ(segment["blocks"][2]["state"], "free");
  EXPECT_EQ(snapshot["stats"]["allocated_bytes"], 1024);
  EXPECT_EQ(snapshot["stats"]["awaiting_event_bytes"], 2048);
  EXPECT_EQ(snapshot["stats"]["driver_allocations"], 1);
  allocator.free(a);
}

// What an eager executor does: per op, allocate the result, then free the consumed input.
void eager_chain_and_scratch(CachingAllocator& allocator, StreamId stream) {
  const std::size_t tensor = 134 * MiB;
  DevicePtr current = allocator.allocate(tensor, stream);
  for (int op = 0; op < 8; ++op) {
    DevicePtr next = allocator.allocate(tensor, stream);
    DevicePtr scratch = allocator.allocate(3 * MiB + 100, stream);
    DevicePtr small = allocator.allocate(700 + op * 300, stream);
    allocator.free(scratch);
    allocator.free(current);
    allocator.free(small);
    current = next;
  }
  std::vector<DevicePtr> mixed;
  for (std::size_t bytes : {100ul, 70 * KiB, 1 * MiB, 2 * MiB + 1, 12 * MiB, 48 * MiB}) {
    mixed.push_back(allocator.allocate(bytes, stream));
  }
  for (DevicePtr p : mixed) allocator.free(p);
  allocator.free(current);
}

TEST(CachingAllocator, SteadyStateMakesNoDriverAllocations) {
  FakeDeviceBackend device;
  CachingAllocator allocator(device);
  eager_chain_and_scratch(allocator, kStreamA);
  const int64_t after_first = allocator.stats().driver_allocations;
  EXPECT_GT(after_first, 0);
  for (int repeat = 0; repeat < 20; ++repeat) eager_chain_and_scratch(allocator, kStreamA);
  AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.driver_allocations, after_first);
  EXPECT_EQ(s.driver_frees, 0);
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_GT(s.cache_hits, 20 * 20);
}

}  // namespace
}  // namespace kiln::cuda
