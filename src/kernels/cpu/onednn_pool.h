// A max or average pool prepared once on oneDNN, able to read a conv's blocked result and hand its
// own to the next conv (onednn_handoff.h). Why: ResNet's stem max pool took 8% of the model's CPU
// time as the eager kernel, and, sitting between two convs, it forced their results back to NCHW;
// on oneDNN it runs in the convs' layout.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cpu/onednn_handoff.h"
#include "kiln/dtype.h"

namespace kiln::eager::onednn {

struct PoolSpec {
  DType dtype = DType::F32;  // f32 or bf16
  bool max = true;           // else average
  bool count_include_pad = false;
  int64_t x[4], y[4];        // NCHW; y as the graph typed it (ceil_mode included)
  int64_t kernel[2], strides[2], pads[4], dilations[2];  // pads = [top, left, bottom, right]
};

// True when oneDNN computes exactly what the spec means (an average that counts padding must not
// reach into ceil_mode's extra border).
bool supports(const PoolSpec& spec);

class PreparedPool : public BlockedIo {
 public:
  // The source layout is NCHW, or `source_like`'s destination layout when it is given (a producer
  // whose result may be handed over blocked; run() reorders a plain source otherwise).
  PreparedPool(const PoolSpec& spec, const BlockedIo* source_like);
  ~PreparedPool() override;
  void run(const void* x, void* y);
  std::string implementation() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace kiln::eager::onednn
