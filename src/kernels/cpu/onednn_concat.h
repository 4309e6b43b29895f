// A channel concat (axis 1 of NCHW) prepared once on oneDNN, able to read its sources in the
// blocked layouts of the convs that produce them and to hand its result blocked to the convs and
// pools that read it (onednn_handoff.h). Why: SqueezeNet's Fire modules and Inception-style blocks
// join two conv results and feed a conv or a pool; as an eager NCHW copy, every such concat forced
// both convs to reorder out of oneDNN's layout and the next primitive to reorder back in.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/onednn_handoff.h"
#include "kiln/dtype.h"

namespace kiln::eager::onednn {

struct ConcatSpec {
  DType dtype = DType::F32;                 // f32 or bf16
  std::vector<std::vector<int64_t>> x;      // each source's NCHW dims (N, H, W equal)
  int64_t y[4];                             // NCHW; y[1] is the sum of the sources' channels
};

// True when the spec is a channel concat oneDNN can run (dtype, matching N/H/W, positive sizes).
bool supports(const ConcatSpec& spec);

class PreparedConcat : public BlockedIo {
 public:
  // Source i is laid out like `sources_like[i]`'s destination when that is given and blocked
  // (a producer that may hand its result over), NCHW otherwise. Throws kiln::Error when oneDNN
  // has no concat for the layouts.
  PreparedConcat(const ConcatSpec& spec, const std::vector<const BlockedIo*>& sources_like);
  ~PreparedConcat() override;
  // y = the sources joined along channels; a handed-over source ignores its plain pointer.
  void run(const std::vector<const void*>& xs, void* y);
  std::string implementation() const;

  bool can_take_source(size_t i, const BlockedIo& producer) const;  // its blocked result is our source i's layout
  void take_source(size_t i, const BlockedIo& producer);            // source i is read from its blocked result
  bool writes_in_place(size_t i) const;  // source i's producer writes straight into our destination

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace kiln::eager::onednn
