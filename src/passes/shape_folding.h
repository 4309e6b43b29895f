// Shape-arithmetic folding. Why: ONNX graphs compute shapes at run time (Shape -> Gather ->
// Concat -> Reshape...). The importer already turns chains that feed shape operands into (possibly
// symbolic) shape attributes, so what reaches the optimizer are chains whose integers feed
// arithmetic (scaling by a dim, sizes of ranges). This pass
//   - tracks the dims such integer vectors hold (shape_of, gather/slice/concat of them, casts,
//     reshapes, + - * of them, reduce_prod), as SymInts;
//   - replaces every such vector whose dims are all known constants by a constant, even when the
//     tensor it was read from has other, symbolic dims ([B, 128] -> gather 1 -> 128);
//   - makes shape_of read the earliest value that has the same (symbolic) shape, usually a graph
//     input, so the data computation it was attached to can become dead.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

class ShapeFolding : public Pass {
 public:
  explicit ShapeFolding(const OptimizeOptions&) {}
  std::string_view name() const override { return "shape-folding"; }
  bool run(Graph& g) override;
};

}  // namespace kiln::passes
