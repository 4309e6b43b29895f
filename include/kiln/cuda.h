// Compiling a graph for an NVIDIA GPU: the same scheduler and Loop IR as kiln::compile, printed as
// CUDA C++, compiled by NVRTC for the device's own architecture, with matmuls as cuBLASLt calls
// and every launch of a run captured once into a CUDA graph and replayed. Why: on a GPU the
// memory round trips and the host's launch overhead that fusion and graphs remove are largest.
// Everything is loaded with dlopen at run time, so this header is usable in every build.
#pragma once

#include <memory>
#include <set>
#include <string>

#include "kiln/compile.h"

namespace kiln {

struct CudaCompileOptions {
  CompileOptions base;     // fuse, decompose, cache_dir, use_cache
  int device = 0;          // CUDA device ordinal
  bool use_graphs = true;  // capture a run's launches into a CUDA graph and replay it
  int block_threads = 256; // threads per block of pointwise kernels
  // Folds act(x @ w + bias) (act: relu, or gelu's tanh form) into the cuBLASLt call's epilogue.
  bool fuse_epilogues = true;
  // Row kernels (softmax, norms, reductions) take the form the selector picks by shape and device:
  // rows in registers, split over a thread-block cluster where long (sm_90), through a bulk-copy
  // ring, or staged in shared memory (docs/cuda.md, "Row forms"). For experiments, the name of one
  // form ("bulk_rows", "cluster_mail", "register_rows", "staged_rows") forces it wherever it applies
  // (staged rows elsewhere); an unknown name is an error.
  std::string row_form;
  // Pointwise kernels take up to 16 bytes of consecutive points per thread, moving contiguous
  // buffers as vectors.
  bool vector_points = true;
  // Attention on f16/bf16 (no mask operand, head dim a multiple of 16 up to 128) as one fused
  // kernel instead of matmul, softmax and matmul over the materialised scores (sm_80 and newer).
  bool fused_attention = true;
  // conv2d through cuDNN (dlopened; symmetric padding) where it loads; else, and with this off,
  // the direct library kernel (codegen/cuda/library_kernels.h).
  bool use_cudnn = true;
  // With cuDNN: at a binding's first run, time cuDNN and the direct kernel on each conv's shapes
  // and keep the faster (runtime/cuda/conv_forms.cc). Off by default: the timing runs each form
  // directly on the stream, where cuDNN's host overhead (tens of us a call) counts and a graph
  // replay does not pay it, so it picked the direct kernel where cuDNN is faster (MobileNetV3:
  // 2.68 ms timed vs 1.47 ms cuDNN-only on the H200). Timing captured graphs is the fix.
  bool time_conv_forms = false;
  // Depthwise convs (one filter per channel) on Kiln's own register-tiled kernels (library_kernels.h:
  // dwconv2d, and dwconv2d_nhwc with the cuda-channels-last pass, which this turns on) rather than
  // cuDNN, whose NCHW depthwise kernels are slow in 16-bit (ConvNeXt-T's 7x7: 360-520 us each at
  // batch 32 in bf16 on an H100). Off by default: written in session 19, which got no GPU, so they
  // have compiled (NVRTC) and their planning and graph rewrites are tested, but they have not yet run
  // on a GPU. Off, cuDNN takes depthwise convs, and without cuDNN the untiled dwconv2d form does.
  bool depthwise_kernel = false;
};

// Empty when this build has the CUDA backend and a CUDA device is usable here; otherwise why not
// ("built without the CUDA backend", "no CUDA driver (libcuda.so.1) found", "no CUDA device").
std::string cuda_unavailable_reason();

// Compiles `g` for the GPU. The returned Executable's run() copies inputs to the device, replays
// the captured launches and copies outputs back; Executable::stats() reports the NVRTC compile.
// Throws kiln::Error naming the node for ops the GPU backend has no kernel for.
std::shared_ptr<Executable> compile_cuda(const Graph& g, const CudaCompileOptions& options = {});

// High-level ops compile_cuda runs whole where a kernel of its own can (it decomposes the other
// instances itself): give them to kiln::optimize as OptimizeOptions::target.native_ops, or the
// optimizer turns them into primitives first. gelu and silu are one prelude call each in the
// generated kernels (computed in f32, 1/sqrt(2) not rounded to the input's dtype, a faster erf
// where results are 16-bit), and a tanh-form gelu after a matmul goes into cuBLASLt's epilogue.
// Derived from the CUDA op table (src/runtime/op_support_cuda.def): kiln::native_ops(Cuda).
std::set<Op> cuda_native_ops();

// "cuda: NVIDIA H200 (sm_90)", or "cuda: unavailable".
std::string cuda_device_description(int device = 0);
// The device's copy bandwidth over a `bytes`-sized buffer, GB/s (read + write, best of 6 timed
// cuMemcpyDtoD); throws kiln::Error with cuda_unavailable_reason() where there is no GPU.
double cuda_copy_gbps(int64_t bytes, int device = 0);

}  // namespace kiln
