// Channels-last depthwise convs for the CUDA target, with the layout changes around them cancelled
// or moved to the graph's edges. Why: CNNs that mix depthwise convs with channel-wise ops written
// channels-last (ConvNeXt: conv -> permute -> layer_norm -> linear -> permute back -> residual add)
// otherwise transpose every activation twice a block, and their layer norms read across planes.
#pragma once

#include "kiln/graph.h"

namespace kiln::codegen::cuda {

// Rewrites each depthwise conv2d x -> y as permute(conv2d{layout "NHWC"}(permute(x, to NHWC)),
// back to NCHW), then, to a fixpoint: cancels a permute of a permute that composes to the
// identity, and moves a permute below an elementwise op when every non-constant operand arrives
// through the same permute (constants are permuted instead), so permutes meet their inverses.
// Keeps the result only where it leaves fewer elements to permute than the graph had (a CNN that
// is NCHW everywhere else keeps its depthwise convs NCHW). Returns whether the graph changed.
bool channels_last_depthwise(Graph& g);

}  // namespace kiln::codegen::cuda
