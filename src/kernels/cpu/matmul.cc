// Eager matmul through OpenBLAS (sgemm/dgemm, split over the OpenMP team by gemm.h) with numpy
// semantics: 1-D promotion and batch broadcasting; f16/bf16 convert to f32 around sgemm. Why: a tuned GEMM is the honest eager
// baseline for contractions, and what generated kernels must beat.
#include <climits>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/gemm.h"

namespace kiln::eager::detail {

namespace {

// a: [..., M, K], b: [..., K, N] after 1-D promotion; batch dims broadcast.
struct MatmulShape {
  int64_t m = 1, k = 1, n = 1;
  std::vector<int64_t> a_batch, b_batch, out_batch;
};

MatmulShape describe(const HostTensor& a, const HostTensor& b) {
  MatmulShape s;
  std::vector<int64_t> as = a.shape(), bs = b.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  s.m = as[as.size() - 2];
  s.k = as.back();
  s.n = bs.back();
  s.a_batch.assign(as.begin(), as.end() - 2);
  s.b_batch.assign(bs.begin(), bs.end() - 2);
  size_t rank = std::max(s.a_batch.size(), s.b_batch.size());
  s.out_batch.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < s.a_batch.size() ? s.a_batch[s.a_batch.size() - 1 - i] : 1;
    int64_t db = i < s.b_batch.size() ? s.b_batch[s.b_batch.size() - 1 - i] : 1;
    s.out_batch[rank - 1 - i] = da == 1 ? db : da;
  }
  return s;
}

// Runs the batched product on float or double buffers, on the OpenMP team (gemm.h).
template <typename T> void batched_gemm(const MatmulShape& s, const T* a, const T* b, T* c) {
  const int64_t batches = numel_of(s.out_batch);
  // b shared by every batch and a's batches laid out contiguously: one tall GEMM.
  if (numel_of(s.b_batch) == 1 && numel_of(s.a_batch) == batches) {
    gemm_parallel<T>(batches * s.m, s.n, s.k, a, s.k, b, s.n, T(0), c, s.n);
    return;
  }
  // Element offsets (in batches) of a and b for every output batch, from the broadcast plan.
  BroadcastPlan plan = make_broadcast_plan({s.a_batch, s.b_batch}, s.out_batch);
  std::vector<int64_t> a_index(static_cast<size_t>(batches)), b_index(static_cast<size_t>(batches));
  for_each_row<2>(plan, 0, plan.rows, [&](int64_t row, const int64_t* off) {
    for (int64_t j = 0; j < plan.inner; ++j) {
      a_index[size_t(row * plan.inner + j)] = off[0] + j * plan.inner_stride[0];
      b_index[size_t(row * plan.inner + j)] = off[1] + j * plan.inner_stride[1];
    }
  });
  gemm_batched<T>(batches, s.m, s.n, s.k, [&](int64_t i, const T*& pa, const T*& pb, T*& pc) {
    pa = a + a_index[size_t(i)] * s.m * s.k;
    pb = b + b_index[size_t(i)] * s.k * s.n;
    pc = c + i * s.m * s.n;
  });
}

template <typename T> void to_float_buffer(const HostTensor& t, std::vector<float>& buf) {
  buf.resize(size_t(t.numel()));
  const T* p = t.data<T>();
  parallel_ranges(t.numel(), 1, [&](int64_t begin, int64_t end) {
    load_as_float(p + begin, end - begin, buf.data() + begin);
  });
}

Ran run_matmul(const KernelArgs& args) {
  const HostTensor &a = args.in[0], &b = args.in[1];
  HostTensor& out = args.out[0];
  MatmulShape s = describe(a, b);
  if (out.numel() == 0) return Ran::kNative;
  if (s.m * s.n > INT_MAX || numel_of(s.out_batch) * s.m > INT_MAX || s.k > INT_MAX ||
      s.m * s.k > INT_MAX || s.k * s.n > INT_MAX)
    return Ran::kNotHandled;  // beyond BLAS's 32-bit dims
  switch (a.dtype()) {
    case DType::F32: batched_gemm(s, a.data<float>(), b.data<float>(), out.data<float>()); break;
    case DType::F64: batched_gemm(s, a.data<double>(), b.data<double>(), out.data<double>()); break;
    case DType::F16:
    case DType::BF16: {
      std::vector<float> fa, fb, fc(size_t(out.numel()));
      bool half = a.dtype() == DType::F16;
      if (half) { to_float_buffer<Half>(a, fa); to_float_buffer<Half>(b, fb); }
      else { to_float_buffer<BFloat16>(a, fa); to_float_buffer<BFloat16>(b, fb); }
      batched_gemm(s, fa.data(), fb.data(), fc.data());
      parallel_ranges(out.numel(), 1, [&](int64_t begin, int64_t end) {
        if (half) store_from_float(fc.data() + begin, end - begin, out.data<Half>() + begin);
        else store_from_float(fc.data() + begin, end - begin, out.data<BFloat16>() + begin);
      });
      break;
    }
    default: return Ran::kNotHandled;
  }
  return Ran::kOpenBlas;
}

bool matmul_supports(Op op, DType dtype) { return op == Op::MatMul && is_float(dtype); }

}  // namespace

const KernelFamily kMatmulFamily{matmul_supports, run_matmul};

}  // namespace kiln::eager::detail
