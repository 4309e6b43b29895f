// Streams, events and captured graphs as owning C++ objects. Why: the driver hands out raw
// handles; wrapping them keeps every create paired with its destroy, also when a check throws.
#pragma once

#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/driver_api.h"

namespace kiln::cuda {

class Stream {
 public:
  Stream();  // a non-blocking stream on the current context
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream handle() const { return stream_; }
  StreamId id() const { return reinterpret_cast<StreamId>(stream_); }
  void synchronize() const;

 private:
  CUstream stream_ = nullptr;
};

class Event {
 public:
  explicit Event(bool timing = true);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  CUevent handle() const { return event_; }
  void record(const Stream& stream);
  bool completed() const;
  void synchronize() const;
  // Milliseconds from `start` to this event; both must have completed.
  float elapsed_ms_since(const Event& start) const;

 private:
  CUevent event_ = nullptr;
};

// Work captured from a stream once and replayed with one launch. Why: n small launches cost n
// launch gaps; a replayed graph pays the launch cost once.
class CapturedGraph {
 public:
  // Everything queued on `stream` between begin_capture and end_capture is recorded, not run.
  static void begin_capture(const Stream& stream);
  static CapturedGraph end_capture(const Stream& stream);
  CapturedGraph(CapturedGraph&& other) noexcept;
  CapturedGraph& operator=(CapturedGraph&&) = delete;
  CapturedGraph(const CapturedGraph&) = delete;
  ~CapturedGraph();
  void launch(const Stream& stream) const;

 private:
  CapturedGraph(CUgraph graph, CUgraphExec exec) : graph_(graph), exec_(exec) {}
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

}  // namespace kiln::cuda
