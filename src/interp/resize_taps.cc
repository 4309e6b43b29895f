// ONNX Resize's coordinates and taps (see resize_taps.h).
#include "interp/resize_taps.h"

#include <algorithm>
#include <cmath>

namespace kiln::interp {

double source_coord(const ResizeParams& p, double xo, int64_t in_len, int64_t out_len, double scale,
                    double roi_start, double roi_end) {
  const std::string& m = p.coord;
  // ONNX measures the resized length as scale * input length (not rounded) in these formulas.
  double out_f = scale * double(in_len);
  if (m == "half_pixel") return (xo + 0.5) / scale - 0.5;
  if (m == "half_pixel_symmetric") {
    double adjustment = double(out_len) / out_f;
    double center = double(in_len) / 2;
    return center * (1 - adjustment) + (xo + 0.5) / scale - 0.5;
  }
  if (m == "pytorch_half_pixel") return out_f > 1 ? (xo + 0.5) / scale - 0.5 : 0.0;
  if (m == "align_corners") return out_f == 1 ? 0.0 : xo * double(in_len - 1) / (out_f - 1);
  if (m == "asymmetric") return xo / scale;
  // tf_crop_and_resize
  if (out_len > 1) return roi_start * double(in_len - 1) + xo * (roi_end - roi_start) * double(in_len - 1) / double(out_len - 1);
  return 0.5 * (roi_start + roi_end) * double(in_len - 1);
}

void resize_taps(const ResizeParams& p, double xs, int64_t in_len, std::vector<int64_t>& idx, std::vector<double>& wts) {
  idx.clear();
  wts.clear();
  double fl = std::floor(xs);
  double r = xs - fl;
  int64_t base = int64_t(fl);
  if (p.mode == "nearest") {
    bool up;
    if (r == 0) up = false;
    else if (p.nearest == "round_prefer_ceil") up = r >= 0.5;
    else if (p.nearest == "floor") up = false;
    else if (p.nearest == "ceil") up = true;
    else up = r > 0.5;  // round_prefer_floor
    idx.push_back(std::clamp<int64_t>(base + (up ? 1 : 0), 0, in_len - 1));
    wts.push_back(1.0);
    return;
  }
  std::vector<int64_t> raw;
  if (p.mode == "linear") {
    raw = {base, base + 1};
    wts = {1 - r, r};
  } else {  // cubic, Keys kernel with coefficient A
    double A = p.cubic_a;
    raw = {base - 1, base, base + 1, base + 2};
    double t0 = r + 1, t1 = r, t2 = 1 - r, t3 = 2 - r;
    wts = {((A * t0 - 5 * A) * t0 + 8 * A) * t0 - 4 * A, ((A + 2) * t1 - (A + 3)) * t1 * t1 + 1,
           ((A + 2) * t2 - (A + 3)) * t2 * t2 + 1, ((A * t3 - 5 * A) * t3 + 8 * A) * t3 - 4 * A};
  }
  if (p.exclude_outside) {
    double sum = 0;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] < 0 || raw[i] >= in_len) wts[i] = 0;
      sum += wts[i];
    }
    if (sum != 0)
      for (double& w : wts) w /= sum;
  }
  for (int64_t i : raw) idx.push_back(std::clamp<int64_t>(i, 0, in_len - 1));
}

}  // namespace kiln::interp
