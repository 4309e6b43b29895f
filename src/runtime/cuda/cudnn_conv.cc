// Loads libcudnn (cuDNN 9's legacy convolution API), builds the descriptors of one convolution,
// picks the fastest algorithm cuDNN's heuristics offer within a workspace cap (see cudnn_conv.h).
#include "runtime/cuda/cudnn_conv.h"

#include <cudnn.h>
#include <dlfcn.h>
#include <glob.h>

#include <mutex>
#include <vector>

#include "kiln/error.h"
#include "runtime/cuda/driver_api.h"

namespace kiln::cuda {
namespace {

#define KILN_CUDNN_FUNCTIONS(X)                                                                         \
  X(cudnnCreate) X(cudnnSetStream) X(cudnnGetVersion) X(cudnnGetErrorString)                           \
  X(cudnnCreateTensorDescriptor) X(cudnnDestroyTensorDescriptor) X(cudnnSetTensor4dDescriptor)         \
  X(cudnnCreateFilterDescriptor) X(cudnnDestroyFilterDescriptor) X(cudnnSetFilter4dDescriptor)         \
  X(cudnnCreateConvolutionDescriptor) X(cudnnDestroyConvolutionDescriptor)                             \
  X(cudnnSetConvolution2dDescriptor) X(cudnnSetConvolutionGroupCount) X(cudnnSetConvolutionMathType)   \
  X(cudnnGetConvolution2dForwardOutputDim) X(cudnnGetConvolutionForwardAlgorithm_v7)                    \
  X(cudnnGetConvolutionForwardWorkspaceSize) X(cudnnConvolutionForward) X(cudnnAddTensor)

struct CudnnApi {
#define KILN_DNN_MEMBER(name) decltype(&::name) name = nullptr;
  KILN_CUDNN_FUNCTIONS(KILN_DNN_MEMBER)
#undef KILN_DNN_MEMBER
  CudnnStatus status;
  cudnnHandle_t handle = nullptr;
};

// cuDNN lives in PyTorch's wheel (nvidia/cudnn/lib) on the GPU machine, or in the toolkit.
std::vector<std::string> cudnn_candidates() {
  std::vector<std::string> out = {"libcudnn.so.9"};
  for (const char* pattern : {"/opt/*/.venv/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
                              "/usr/local/lib/python3*/dist-packages/nvidia/cudnn/lib/libcudnn.so.9",
                              "/usr/local/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
                              "/usr/lib/python3/dist-packages/nvidia/cudnn/lib/libcudnn.so.9",
                              "/usr/local/cuda/lib64/libcudnn.so.9", "/usr/local/cuda/lib/libcudnn.so.9"}) {
    glob_t g{};
    if (glob(pattern, 0, nullptr, &g) == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
    globfree(&g);
  }
  return out;
}

CudnnApi load_cudnn() {
  CudnnApi api;
  std::string tried;
  // RTLD_GLOBAL: cuDNN's shim loads its engine libraries (libcudnn_cnn...) from beside itself.
  void* handle = open_first_library("KILN_LIBCUDNN", cudnn_candidates(), &tried, /*global=*/true);
  if (!handle) {
    api.status.message = "no cuDNN (libcudnn.so.9) found; tried " + tried;
    return api;
  }
  std::string missing;
#define KILN_DNN_RESOLVE(name) KILN_RESOLVE_SYMBOL(api, handle, name, missing)
  KILN_CUDNN_FUNCTIONS(KILN_DNN_RESOLVE)
#undef KILN_DNN_RESOLVE
  if (!missing.empty()) {
    api.status.message = "the cuDNN library found lacks " + missing;
    return api;
  }
  api.status.version = api.cudnnGetVersion();
  api.status.loaded = true;
  api.status.message = str("cuDNN ", api.status.version);
  return api;
}

CudnnApi& loaded_cudnn() {
  static CudnnApi api = load_cudnn();
  return api;
}

void check_dnn(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  throw Error(str("cuDNN call failed: ", what, " -> ", loaded_cudnn().cudnnGetErrorString(status)));
}
#define KILN_DNN(call) check_dnn((call), #call)

// The one handle (created on first use, in the current context).
CudnnApi& dnn() {
  CudnnApi& api = loaded_cudnn();
  KILN_CHECK(api.status.loaded, api.status.message);
  static std::once_flag once;
  std::call_once(once, [&] { KILN_DNN(api.cudnnCreate(&api.handle)); });
  return api;
}

bool cudnn_dtype(DType d, cudnnDataType_t* out) {
  switch (d) {
    case DType::F32: *out = CUDNN_DATA_FLOAT; return true;
    case DType::F64: *out = CUDNN_DATA_DOUBLE; return true;
    case DType::F16: *out = CUDNN_DATA_HALF; return true;
    case DType::BF16: *out = CUDNN_DATA_BFLOAT16; return true;
    default: return false;
  }
}

constexpr std::size_t kMaxWorkspace = std::size_t(256) << 20;

const char* algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "implicit_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "implicit_precomp_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "direct";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "fft";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "fft_tiling";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "winograd";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "winograd_nonfused";
    default: return "unknown";
  }
}

}  // namespace

const CudnnStatus& cudnn_status() { return loaded_cudnn().status; }

struct CudnnConv::Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
};

std::string CudnnConv::refusal(DType dtype, int64_t pad_top, int64_t pad_left, int64_t pad_bottom, int64_t pad_right) {
  const CudnnStatus& st = cudnn_status();
  if (!st.loaded) return st.message;
  cudnnDataType_t t;
  if (!cudnn_dtype(dtype, &t)) return str("cuDNN convolution takes f32, f64, f16 or bf16, not ", dtype_name(dtype));
  if (pad_top != pad_bottom || pad_left != pad_right)
    return str("cuDNN pads symmetrically; these pads are [", pad_top, ", ", pad_left, ", ", pad_bottom, ", ", pad_right, "]");
  return "";
}

CudnnConv::CudnnConv(const CudnnConvShape& s, DType dtype) : shape_(s), dtype_(dtype), d_(new Descriptors) {
  CudnnApi& api = dnn();
  cudnnDataType_t t;
  KILN_CHECK(cudnn_dtype(dtype, &t), "cuDNN convolution: dtype ", dtype_name(dtype));
  const cudnnDataType_t compute = dtype == DType::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  KILN_DNN(api.cudnnCreateTensorDescriptor(&d_->x));
  KILN_DNN(api.cudnnCreateTensorDescriptor(&d_->y));
  KILN_DNN(api.cudnnCreateTensorDescriptor(&d_->bias));
  KILN_DNN(api.cudnnCreateFilterDescriptor(&d_->w));
  KILN_DNN(api.cudnnCreateConvolutionDescriptor(&d_->conv));
  KILN_DNN(api.cudnnSetTensor4dDescriptor(d_->x, CUDNN_TENSOR_NCHW, t, int(s.n), int(s.c), int(s.h), int(s.w)));
  KILN_DNN(api.cudnnSetTensor4dDescriptor(d_->y, CUDNN_TENSOR_NCHW, t, int(s.n), int(s.o), int(s.oh), int(s.ow)));
  KILN_DNN(api.cudnnSetTensor4dDescriptor(d_->bias, CUDNN_TENSOR_NCHW, t, 1, int(s.o), 1, 1));
  KILN_DNN(api.cudnnSetFilter4dDescriptor(d_->w, t, CUDNN_TENSOR_NCHW, int(s.o), int(s.c / s.groups), int(s.kh), int(s.kw)));
  KILN_DNN(api.cudnnSetConvolution2dDescriptor(d_->conv, int(s.pad_h), int(s.pad_w), int(s.stride_h), int(s.stride_w),
                                               int(s.dil_h), int(s.dil_w), CUDNN_CROSS_CORRELATION, compute));
  KILN_DNN(api.cudnnSetConvolutionGroupCount(d_->conv, int(s.groups)));
  // f32 in full f32 (FMA only: cuDNN's default math would allow TF32); 16-bit on the tensor cores.
  const bool half = dtype == DType::F16 || dtype == DType::BF16;
  KILN_DNN(api.cudnnSetConvolutionMathType(d_->conv, half ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  int n = 0, c = 0, h = 0, w = 0;
  KILN_DNN(api.cudnnGetConvolution2dForwardOutputDim(d_->conv, d_->x, d_->w, &n, &c, &h, &w));
  KILN_CHECK(n == s.n && c == s.o && h == s.oh && w == s.ow, "cuDNN convolution: output [", n, ", ", c, ", ", h, ", ", w,
             "] differs from the graph's [", s.n, ", ", s.o, ", ", s.oh, ", ", s.ow, "]");
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
  int returned = 0;
  KILN_DNN(api.cudnnGetConvolutionForwardAlgorithm_v7(api.handle, d_->x, d_->w, d_->conv, d_->y, int(perf.size()),
                                                      &returned, perf.data()));
  bool found = false;
  for (int i = 0; i < returned && !found; ++i) {
    if (perf[size_t(i)].status != CUDNN_STATUS_SUCCESS || perf[size_t(i)].memory > kMaxWorkspace) continue;
    if (!half && perf[size_t(i)].mathType != CUDNN_FMA_MATH && perf[size_t(i)].mathType != CUDNN_DEFAULT_MATH) continue;
    d_->algo = perf[size_t(i)].algo;
    found = true;
  }
  KILN_CHECK(found, "cuDNN offers no forward algorithm for this convolution within ", kMaxWorkspace >> 20, " MiB of workspace");
  KILN_DNN(api.cudnnGetConvolutionForwardWorkspaceSize(api.handle, d_->x, d_->w, d_->conv, d_->y, d_->algo, &workspace_bytes_));
  algorithm_ = algo_name(d_->algo);
}

CudnnConv::~CudnnConv() {
  CudnnApi& api = loaded_cudnn();
  if (d_ && api.status.loaded) {
    if (d_->x) api.cudnnDestroyTensorDescriptor(d_->x);
    if (d_->y) api.cudnnDestroyTensorDescriptor(d_->y);
    if (d_->bias) api.cudnnDestroyTensorDescriptor(d_->bias);
    if (d_->w) api.cudnnDestroyFilterDescriptor(d_->w);
    if (d_->conv) api.cudnnDestroyConvolutionDescriptor(d_->conv);
  }
  delete d_;
}

void CudnnConv::run(DevicePtr x, DevicePtr w, DevicePtr bias, DevicePtr y, DevicePtr workspace, const Stream& stream) {
  CudnnApi& api = dnn();
  KILN_DNN(api.cudnnSetStream(api.handle, reinterpret_cast<cudaStream_t>(stream.handle())));
  const double one_d = 1, zero_d = 0;
  const float one_f = 1, zero_f = 0;
  const bool dbl = dtype_ == DType::F64;
  const void* one = dbl ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
  const void* zero = dbl ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
  KILN_DNN(api.cudnnConvolutionForward(api.handle, one, d_->x, reinterpret_cast<const void*>(x), d_->w,
                                       reinterpret_cast<const void*>(w), d_->conv, d_->algo,
                                       reinterpret_cast<void*>(workspace), workspace_bytes_, zero, d_->y,
                                       reinterpret_cast<void*>(y)));
  if (shape_.bias)
    KILN_DNN(api.cudnnAddTensor(api.handle, one, d_->bias, reinterpret_cast<const void*>(bias), one, d_->y,
                                reinterpret_cast<void*>(y)));
}

double CudnnConv::flops() const {
  const CudnnConvShape& s = shape_;
  return 2.0 * double(s.n * s.o * s.oh * s.ow) * double(s.c / s.groups * s.kh * s.kw);
}

}  // namespace kiln::cuda
