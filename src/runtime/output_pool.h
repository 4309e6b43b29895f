// Output buffers that come back when the caller drops a run's results, for the next run to reuse.
// Why: every run used to return freshly allocated outputs, and for large ones glibc maps new pages
// that fault in on first touch: that cost more than the kernels of a 134 MB elementwise chain
// (README's gap meter) unless MALLOC_MMAP_THRESHOLD_ was raised, which the benchmarks did and users
// do not. A caller that keeps its results gets new buffers (results never alias); one that drops
// them (a serving loop, a benchmark, Python rebinding `y = sess.run(...)`) gets the same pages back.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "kiln/host_tensor.h"

namespace kiln::runtime {

class OutputPool {
 public:
  OutputPool();
  ~OutputPool();
  OutputPool(const OutputPool&) = delete;
  OutputPool& operator=(const OutputPool&) = delete;

  // A tensor of this dtype and shape (uninitialised), on a returned buffer of the same byte size
  // when there is one. Strings and containers are not pooled (HostTensor::empty).
  HostTensor take(DType dtype, std::vector<int64_t> shape);
  // Buffers waiting to be reused; for tests.
  size_t idle_buffers() const;

  // How many returned buffers of one size are kept; more are freed.
  static constexpr size_t kKeptPerSize = 4;

 private:
  struct Shelf;  // the free lists, alive while the pool or any of its buffers is
  std::shared_ptr<Shelf> shelf_;
};

}  // namespace kiln::runtime
