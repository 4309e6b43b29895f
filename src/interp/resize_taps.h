// ONNX Resize's coordinate transformations and interpolation taps, per axis. Why: the reference
// kernel (ref_onnx_ops.cc) and the CUDA library kernel's tap tables (codegen/cuda/library_kernels.cc)
// must sample the same neighbours with the same weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::interp {

struct ResizeParams {
  std::string mode, coord, nearest;
  double cubic_a, extrapolation;
  bool exclude_outside;
};

// Source coordinate of output position `xo` along one axis (ONNX's coordinate transformations).
double source_coord(const ResizeParams& p, double xo, int64_t in_len, int64_t out_len, double scale,
                    double roi_start, double roi_end);

// Interpolation weights for the neighbours of a source coordinate: 1 (nearest), 2 (linear) or 4
// (cubic) indices into the axis, clamped to it, and their weights.
void resize_taps(const ResizeParams& p, double xs, int64_t in_len, std::vector<int64_t>& idx, std::vector<double>& wts);

}  // namespace kiln::interp
