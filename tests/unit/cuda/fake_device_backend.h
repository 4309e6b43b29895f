// A device that exists only on the CPU, for testing the caching allocator's logic: it hands out
// addresses from a counter, counts driver calls, and completes events only when the test says so.
#pragma once

#include <cstddef>
#include <map>
#include <stdexcept>

#include "runtime/cuda/caching_allocator.h"

namespace kiln::cuda::testing {

class FakeDeviceBackend final : public DeviceMemoryBackend {
 public:
  // capacity_bytes = 0: unlimited.
  explicit FakeDeviceBackend(std::size_t capacity_bytes = 0) : capacity_(capacity_bytes) {}

  DevicePtr allocate(std::size_t bytes) override {
    if (capacity_ && used_ + bytes > capacity_) return 0;
    ++allocate_calls;
    DevicePtr ptr = next_address_;
    // Leave a gap so that neighbouring segments can never look contiguous.
    next_address_ += (bytes / kGap + 2) * kGap;
    live_[ptr] = bytes;
    used_ += bytes;
    return ptr;
  }
  void release(DevicePtr ptr, std::size_t bytes) override {
    auto it = live_.find(ptr);
    if (it == live_.end() || it->second != bytes) throw std::logic_error("bad release");
    used_ -= bytes;
    live_.erase(it);
    ++release_calls;
  }
  EventId record_event(StreamId stream) override {
    EventId id = ++last_event_;
    events_[id] = {stream, false};
    return id;
  }
  bool event_completed(EventId event) override { return events_.at(event).done; }
  void wait_event(EventId event) override {
    events_.at(event).done = true;
    ++waits;
  }
  void release_event(EventId event) override { events_.erase(event); }

  // Marks every event recorded on `stream` so far as completed, as if its work had finished.
  void finish_stream(StreamId stream) {
    for (auto& [id, event] : events_) {
      if (event.stream == stream) event.done = true;
    }
  }
  std::size_t live_allocations() const { return live_.size(); }
  std::size_t live_events() const { return events_.size(); }
  std::size_t used_bytes() const { return used_; }

  int allocate_calls = 0;
  int release_calls = 0;
  int waits = 0;

 private:
  static constexpr std::size_t kGap = std::size_t(2) << 20;
  struct FakeEvent {
    StreamId stream;
    bool done;
  };
  std::size_t capacity_;
  std::size_t used_ = 0;
  DevicePtr next_address_ = DevicePtr(1) << 32;
  std::map<DevicePtr, std::size_t> live_;
  std::map<EventId, FakeEvent> events_;
  EventId last_event_ = 0;
};

}  // namespace kiln::cuda::testing
