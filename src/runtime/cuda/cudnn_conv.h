// 2-D convolution through cuDNN, loaded with dlopen from where PyTorch's wheel or the toolkit keeps
// it. Why: cuDNN's convolutions reach the tensor cores' rate that a direct one-thread-per-output
// kernel (library_kernels.h) does not; when cuDNN is absent or refuses a shape (asymmetric
// padding), compile_cuda keeps the library kernel, so a model runs either way.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kiln/dtype.h"
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/cuda_stream.h"

namespace kiln::cuda {

// Whether libcudnn could be loaded; the message names what was tried when it could not.
struct CudnnStatus {
  bool loaded = false;
  std::size_t version = 0;
  std::string message;
};
const CudnnStatus& cudnn_status();

// NCHW y[n, o, oh, ow] = conv(x, w) (+ bias[o]) with symmetric padding, in f32 (FMA math: no TF32),
// f64, f16 or bf16 (f32 accumulation, tensor cores).
struct CudnnConvShape {
  int64_t n, c, h, w;        // x
  int64_t o, kh, kw;         // w: [o, c / groups, kh, kw]
  int64_t oh, ow;            // y
  int64_t pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups;
  bool bias = false;
};

class CudnnConv {
 public:
  // Empty when cuDNN runs this convolution; else why not (not loaded, asymmetric pads, dtype).
  static std::string refusal(DType dtype, int64_t pad_top, int64_t pad_left, int64_t pad_bottom, int64_t pad_right);
  CudnnConv(const CudnnConvShape& shape, DType dtype);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  std::size_t workspace_bytes() const { return workspace_bytes_; }
  const std::string& algorithm() const { return algorithm_; }
  // `workspace` holds workspace_bytes(); `bias` is ignored without shape.bias.
  void run(DevicePtr x, DevicePtr w, DevicePtr bias, DevicePtr y, DevicePtr workspace, const Stream& stream);
  double flops() const;

 private:
  struct Descriptors;
  CudnnConvShape shape_;
  DType dtype_;
  std::size_t workspace_bytes_ = 0;
  std::string algorithm_;
  Descriptors* d_ = nullptr;
};

}  // namespace kiln::cuda
