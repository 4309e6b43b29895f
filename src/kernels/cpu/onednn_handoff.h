// The source and destination of a oneDNN primitive that reads and writes NCHW activations (conv,
// pooling), with the blocked hand-off between two of them. Why: oneDNN's fast kernels want blocked
// layouts (nChw16c...), Kiln's buffers are plain NCHW; reordering in and out around every primitive
// costs two passes over each activation. When a primitive's result is read only by other prepared
// primitives — as their source, or as the residual a conv's sum post-op adds — and their layouts
// agree, it stays blocked: no reorder out there, none in here. runtime/onednn_plan.h wires the
// hand-offs once at compile time; the readers run after the producer in every run.
#pragma once

#include <memory>

namespace kiln::eager::onednn {

struct Io;  // the dnnl memories and reorders (onednn_common.h)

class BlockedIo {
 public:
  virtual ~BlockedIo();
  bool can_feed_source(const BlockedIo& consumer) const;    // our dst layout is its src layout (blocked)
  bool can_feed_residual(const BlockedIo& consumer) const;  // our dst layout is its dst layout (blocked)
  void feed_source(BlockedIo& consumer) const;    // the consumer reads its src from our blocked result
  void feed_residual(BlockedIo& consumer) const;  // the consumer's sum post-op starts from our result
  void keep_output_blocked();                     // run() no longer writes the plain destination

 protected:
  BlockedIo();
  static const Io& io_of(const BlockedIo& b) { return *b.io_; }
  std::unique_ptr<Io> io_;
};

}  // namespace kiln::eager::onednn
