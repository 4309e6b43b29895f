// Fast f32 max pooling (NCHW): each output row's window rows and columns clipped to the input once,
// rows of planes spread over the OpenMP team. Why: ResNet's stem max_pool2d ran as the reference
// kernel (a double-precision loop with per-tap bounds checks), a visible share of the whole model.
// Semantics are the reference kernel's (src/interp/ref_nn.cc): padding is never a candidate, and a
// NaN anywhere in the window makes the result NaN.
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_common.h"

namespace kiln::eager::detail {
namespace {

Ran run_pool(const KernelArgs& args) {
  if (args.op != Op::MaxPool2d || args.in[0].dtype() != DType::F32) return Ran::kNotHandled;
  const HostTensor& x = args.in[0];
  HostTensor& out = args.out[0];
  const auto& k = args.attrs.get_ints("kernel");
  const auto& s = args.attrs.get_ints("strides");
  const auto& p = args.attrs.get_ints("pads");
  const auto& d = args.attrs.get_ints("dilations");
  const int64_t kh = k[0], kw = k[1], sh = s[0], sw = s[1], top = p[0], left = p[1], dh = d[0], dw = d[1];
  const int64_t NC = x.shape()[0] * x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t OH = out.shape()[2], OW = out.shape()[3];
  const float* in = x.data<float>();
  float* y = out.data<float>();
  parallel_ranges(NC * OH, OW * kh * kw, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t nc = row / OH, oy = row % OH;
      const float* plane = in + nc * H * W;
      // The window's rows inside the input: ky in [ky0, ky1).
      int64_t ky0 = 0, ky1 = kh;
      const int64_t y0 = oy * sh - top;
      while (ky0 < kh && y0 + ky0 * dh < 0) ++ky0;
      while (ky1 > ky0 && y0 + (ky1 - 1) * dh >= H) --ky1;
      float* yrow = y + row * OW;
      for (int64_t ox = 0; ox < OW; ++ox) {
        const int64_t x0 = ox * sw - left;
        int64_t kx0 = 0, kx1 = kw;
        while (kx0 < kw && x0 + kx0 * dw < 0) ++kx0;
        while (kx1 > kx0 && x0 + (kx1 - 1) * dw >= W) --kx1;
        float best = -std::numeric_limits<float>::infinity();
        bool nan = false;
        for (int64_t ky = ky0; ky < ky1; ++ky) {
          const float* r = plane + (y0 + ky * dh) * W + x0;
          for (int64_t kx = kx0; kx < kx1; ++kx) {
            const float v = r[kx * dw];
            nan |= v != v;
            best = v > best ? v : best;
          }
        }
        yrow[ox] = nan ? std::numeric_limits<float>::quiet_NaN() : best;
      }
    }
  });
  return Ran::kNative;
}

bool pool_supports(Op op, DType dtype) { return op == Op::MaxPool2d && dtype == DType::F32; }

}  // namespace

const KernelFamily kPoolFamily{pool_supports, run_pool};

}  // namespace kiln::eager::detail
