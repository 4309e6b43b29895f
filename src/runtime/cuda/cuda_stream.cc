// Stream, event and graph wrappers over the driver API.
#include "runtime/cuda/cuda_stream.h"

#include <utility>

namespace kiln::cuda {

Stream::Stream() { KILN_CU(driver().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING)); }
Stream::~Stream() {
  if (stream_) driver().cuStreamDestroy(stream_);
}
void Stream::synchronize() const { KILN_CU(driver().cuStreamSynchronize(stream_)); }

Event::Event(bool timing) {
  KILN_CU(driver().cuEventCreate(&event_, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING));
}
Event::~Event() {
  if (event_) driver().cuEventDestroy(event_);
}
void Event::record(const Stream& stream) { KILN_CU(driver().cuEventRecord(event_, stream.handle())); }
bool Event::completed() const {
  CUresult result = driver().cuEventQuery(event_);
  if (result == CUDA_ERROR_NOT_READY) return false;
  check_cu(result, "cuEventQuery");
  return true;
}
void Event::synchronize() const { KILN_CU(driver().cuEventSynchronize(event_)); }
float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0;
  KILN_CU(driver().cuEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

void CapturedGraph::begin_capture(const Stream& stream) {
  // Thread-local mode: other threads may keep allocating and querying while this one captures.
  KILN_CU(driver().cuStreamBeginCapture(stream.handle(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
}

CapturedGraph CapturedGraph::end_capture(const Stream& stream) {
  CUgraph graph = nullptr;
  KILN_CU(driver().cuStreamEndCapture(stream.handle(), &graph));
  CUgraphExec exec = nullptr;
  CUresult result = driver().cuGraphInstantiate(&exec, graph, 0);
  if (result != CUDA_SUCCESS) driver().cuGraphDestroy(graph);
  check_cu(result, "cuGraphInstantiate");
  return CapturedGraph(graph, exec);
}

CapturedGraph::CapturedGraph(CapturedGraph&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)), exec_(std::exchange(other.exec_, nullptr)) {}

CapturedGraph::~CapturedGraph() {
  if (exec_) driver().cuGraphExecDestroy(exec_);
  if (graph_) driver().cuGraphDestroy(graph_);
}

void CapturedGraph::launch(const Stream& stream) const {
  KILN_CU(driver().cuGraphLaunch(exec_, stream.handle()));
}

}  // namespace kiln::cuda
