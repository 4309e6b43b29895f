// Loads libcublasLt, builds the matmul and layout descriptors, picks an algorithm by heuristic.
#include "runtime/cuda/cublaslt_matmul.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include "kiln/error.h"
#include "runtime/cuda/driver_api.h"

namespace kiln::cuda {
namespace {

#define KILN_CUBLASLT_FUNCTIONS(X)                                                        \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtGetStatusName)    \
  X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) \
  X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) X(cublasLtMatrixLayoutSetAttribute)                         \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)                    \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

struct CublasLtApi {
#define KILN_LT_MEMBER(name) decltype(&::name) name = nullptr;
  KILN_CUBLASLT_FUNCTIONS(KILN_LT_MEMBER)
#undef KILN_LT_MEMBER
  CublasLtStatus status;
};

CublasLtApi load_cublaslt() {
  CublasLtApi api;
  std::string tried;
  void* handle = open_first_library(
      "KILN_LIBCUBLASLT",
      {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so",
       "/usr/local/cuda/lib64/libcublasLt.so.13", "/usr/local/cuda/lib64/libcublasLt.so.12",
       "/usr/local/cuda/lib/libcublasLt.so.13"},
      &tried);
  if (!handle) {
    api.status.message = "no cuBLASLt (libcublasLt.so) found; tried " + tried;
    return api;
  }
  std::string missing;
#define KILN_LT_RESOLVE(name) KILN_RESOLVE_SYMBOL(api, handle, name, missing)
  KILN_CUBLASLT_FUNCTIONS(KILN_LT_RESOLVE)
#undef KILN_LT_RESOLVE
  if (!missing.empty()) {
    api.status.message = "the cuBLASLt library found lacks " + missing;
    return api;
  }
  api.status.loaded = true;
  api.status.version = api.cublasLtGetVersion();
  api.status.message = str("cuBLASLt ", api.status.version);
  return api;
}

const CublasLtApi& loaded_cublaslt() {
  static const CublasLtApi api = load_cublaslt();
  return api;
}

const CublasLtApi& lt() {
  const CublasLtApi& api = loaded_cublaslt();
  KILN_CHECK(api.status.loaded, api.status.message);
  return api;
}

void check_lt(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(str("cuBLASLt call failed: ", what, " -> ", lt().cublasLtGetStatusName(status)));
}
#define KILN_LT(call) check_lt((call), #call)

cudaDataType_t cuda_data_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F64: return CUDA_R_64F;
    default: break;
  }
  throw Error(str("cuBLASLt matmul: dtype ", dtype_name(dtype),
                  " is not supported (f32, f64, f16 and bf16 are)"));
}

cublasLtEpilogue_t lt_epilogue(MatmulEpilogue epilogue) {
  switch (epilogue) {
    case MatmulEpilogue::None: return CUBLASLT_EPILOGUE_DEFAULT;
    case MatmulEpilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case MatmulEpilogue::Relu: return CUBLASLT_EPILOGUE_RELU;
    case MatmulEpilogue::ReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case MatmulEpilogue::Gelu: return CUBLASLT_EPILOGUE_GELU;
    case MatmulEpilogue::GeluBias: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

}  // namespace

const char* matmul_epilogue_name(MatmulEpilogue epilogue) {
  switch (epilogue) {
    case MatmulEpilogue::None: return "none";
    case MatmulEpilogue::Bias: return "bias";
    case MatmulEpilogue::Relu: return "relu";
    case MatmulEpilogue::ReluBias: return "relu_bias";
    case MatmulEpilogue::Gelu: return "gelu";
    case MatmulEpilogue::GeluBias: return "gelu_bias";
  }
  return "?";
}

bool epilogue_has_bias(MatmulEpilogue epilogue) {
  return epilogue == MatmulEpilogue::Bias || epilogue == MatmulEpilogue::ReluBias ||
         epilogue == MatmulEpilogue::GeluBias;
}

const CublasLtStatus& cublaslt_status() { return loaded_cublaslt().status; }

struct LtMatmul::Descriptors {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic = {};
};

LtMatmul::LtMatmul(int64_t m, int64_t n, int64_t k, DType dtype, MatmulEpilogue epilogue)
    : LtMatmul(m, n, k, dtype, epilogue, Batch{}) {}

LtMatmul::LtMatmul(int64_t m, int64_t n, int64_t k, DType dtype, MatmulEpilogue epilogue, Batch batch,
                   bool accumulate)
    : m_(m), n_(n), k_(k), epilogue_(epilogue), batch_(batch), accumulate_(accumulate) {
  KILN_CHECK(batch.count >= 1, "cuBLASLt matmul needs a positive batch count, got ", batch.count);
  KILN_CHECK(m > 0 && n > 0 && k > 0, "cuBLASLt matmul needs positive sizes, got m=", m,
             " n=", n, " k=", k);
  const CublasLtApi& api = lt();
  const cudaDataType_t type = cuda_data_type(dtype);
  descriptors_ = new Descriptors;
  Descriptors& d = *descriptors_;
  KILN_LT(api.cublasLtCreate(&d.handle));
  // f64 multiplies and accumulates in double (alpha and beta then are doubles too); the rest
  // accumulate in f32.
  f64_ = dtype == DType::F64;
  KILN_LT(api.cublasLtMatmulDescCreate(&d.matmul, f64_ ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
                                       f64_ ? CUDA_R_64F : CUDA_R_32F));
  const cublasLtEpilogue_t lt_epi = lt_epilogue(epilogue);
  KILN_LT(api.cublasLtMatmulDescSetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt_epi,
                                             sizeof lt_epi));
  // cuBLASLt is column-major: row-major out = a @ b is column-major out^T = b^T @ a^T, so b
  // goes first and the bias runs along out^T's rows, i.e. out's columns (n).
  KILN_LT(api.cublasLtMatrixLayoutCreate(&d.a, type, uint64_t(n), uint64_t(k), n));
  KILN_LT(api.cublasLtMatrixLayoutCreate(&d.b, type, uint64_t(k), uint64_t(m), k));
  KILN_LT(api.cublasLtMatrixLayoutCreate(&d.d, type, uint64_t(n), uint64_t(m), n));
  if (batch.count > 1) {
    const int32_t count = int32_t(batch.count);
    // The column-major view swaps the operands: layout a holds our b, layout b our a.
    const std::pair<cublasLtMatrixLayout_t, int64_t> strides[] = {
        {d.a, batch.stride_b}, {d.b, batch.stride_a}, {d.d, batch.stride_out}};
    for (const auto& [layout, stride] : strides) {
      KILN_LT(api.cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
      KILN_LT(api.cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                   sizeof stride));
    }
  }
  KILN_LT(api.cublasLtMatmulPreferenceCreate(&d.preference));
  const std::size_t workspace = kWorkspaceBytes;
  KILN_LT(api.cublasLtMatmulPreferenceSetAttribute(
      d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));
  int found = 0;
  KILN_LT(api.cublasLtMatmulAlgoGetHeuristic(d.handle, d.matmul, d.a, d.b, d.d, d.d, d.preference,
                                             1, &d.heuristic, &found));
  KILN_CHECK(found > 0, "cuBLASLt has no algorithm for ", dtype_name(dtype), " matmul m=", m,
             " n=", n, " k=", k, " with epilogue ", matmul_epilogue_name(epilogue));
}

LtMatmul::~LtMatmul() {
  if (!descriptors_) return;
  const CublasLtApi& api = lt();
  Descriptors& d = *descriptors_;
  if (d.preference) api.cublasLtMatmulPreferenceDestroy(d.preference);
  for (cublasLtMatrixLayout_t layout : {d.a, d.b, d.d}) {
    if (layout) api.cublasLtMatrixLayoutDestroy(layout);
  }
  if (d.matmul) api.cublasLtMatmulDescDestroy(d.matmul);
  if (d.handle) api.cublasLtDestroy(d.handle);
  delete descriptors_;
}

void LtMatmul::run(DevicePtr a, DevicePtr b, DevicePtr bias, DevicePtr out, DevicePtr workspace,
                   const Stream& stream, DevicePtr c) {
  const CublasLtApi& api = lt();
  Descriptors& d = *descriptors_;
  if (epilogue_has_bias(epilogue_)) {
    KILN_CHECK(bias != 0, "cuBLASLt matmul with epilogue ", matmul_epilogue_name(epilogue_),
               " needs a bias vector");
    const void* bias_pointer = reinterpret_cast<const void*>(bias);
    KILN_LT(api.cublasLtMatmulDescSetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                               &bias_pointer, sizeof bias_pointer));
  }
  KILN_CHECK(!accumulate_ || c != 0, "cuBLASLt matmul built to accumulate needs a c matrix");
  // The epilogue (bias, activation) applies to alpha*a@b + beta*c as a whole; Kiln only folds c
  // when there is no activation, so the sum is the graph's (a@b + bias) + c.
  const float alpha = 1.0f, beta = accumulate_ ? 1.0f : 0.0f;
  const double alpha64 = 1.0, beta64 = accumulate_ ? 1.0 : 0.0;
  const void* alpha_p = f64_ ? static_cast<const void*>(&alpha64) : static_cast<const void*>(&alpha);
  const void* beta_p = f64_ ? static_cast<const void*>(&beta64) : static_cast<const void*>(&beta);
  KILN_LT(api.cublasLtMatmul(d.handle, d.matmul, alpha_p, reinterpret_cast<const void*>(b), d.a,
                             reinterpret_cast<const void*>(a), d.b, beta_p,
                             reinterpret_cast<const void*>(accumulate_ ? c : out), d.d,
                             reinterpret_cast<void*>(out), d.d, &d.heuristic.algo,
                             reinterpret_cast<void*>(workspace), kWorkspaceBytes,
                             reinterpret_cast<cudaStream_t>(stream.handle())));
}

}  // namespace kiln::cuda
