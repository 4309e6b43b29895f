// The probe's correctness checks: chains vs float64, graph replay with new inputs, allocator
// steady state on the device, and cuBLASLt matmuls with epilogues.
#include <cmath>
#include <cstdio>
#include <functional>

#include "kiln/error.h"
#include "kiln/host_tensor.h"
#include "probe.h"
#include "runtime/cuda/chain_kernels.h"
#include "runtime/cuda/cublaslt_matmul.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/reference_compare.h"

namespace kiln::gpu_probe {
namespace {

using cuda::ChainStep;
using cuda::DeviceTensor;
using cuda::ReferenceComparison;
using cuda::Stream;

// A chain with every kind of step whose values stay bounded, so errors are relative to O(1).
const char* kCheckChain = "mul(1.25),add(-0.5),gelu,max(-0.2),sigmoid,sub(0.3),tanh,abs";

struct CheckRecorder {
  nlohmann::json& checks;
  int failures = 0;
  void record(const std::string& name, bool passed, double error, double tolerance,
              const std::string& detail = "") {
    std::printf("  %-4s %-46s error %.3g (tolerance %.3g) %s\n", passed ? "PASS" : "FAIL",
                name.c_str(), error, tolerance, detail.c_str());
    checks.push_back({{"name", name}, {"passed", passed}, {"relative_error", error},
                      {"tolerance", tolerance}, {"detail", detail}});
    if (!passed) ++failures;
  }
  // Runs `check`; an exception counts as a failure with its message.
  void guarded(const std::string& name, const std::function<void()>& check) {
    try {
      check();
    } catch (const std::exception& e) {
      record(name, false, NAN, 0, std::string("threw: ") + e.what());
    }
  }
};

std::vector<double> chain_reference(const std::vector<ChainStep>& steps, const HostTensor& x) {
  std::vector<double> out(size_t(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) out[size_t(i)] = cuda::apply_chain_reference(steps, x.get_f64(i));
  return out;
}

std::string describe(const ReferenceComparison& c) {
  return c.non_finite ? std::to_string(c.non_finite) + " unwritten/non-finite outputs" : "";
}

void check_chains(CheckRecorder& recorder, const ProbeOptions& options) {
  const std::vector<ChainStep> steps = cuda::parse_chain(kCheckChain);
  std::vector<int64_t> sizes = {1, 7, 4099, 1'000'003};
  if (!options.quick) sizes.push_back(3 * (1 << 22) + 5);
  cuda::ChainKernels kernels;
  Stream stream;
  uint64_t seed = 100;
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t n : sizes) {
      const std::string label = std::string(dtype_name(dtype)) + "[" + std::to_string(n) + "]";
      recorder.guarded("chain " + label, [&] {
        HostTensor x = HostTensor::random(dtype, {n}, ++seed, -3, 3);
        std::vector<double> reference = chain_reference(steps, x);
        DeviceTensor input = DeviceTensor::upload(x, stream);
        DeviceTensor out = DeviceTensor::empty(dtype, {n}, stream);
        DeviceTensor scratch = DeviceTensor::empty(dtype, {n}, stream);
        out.fill_bytes(0xFF, stream);  // NaN in every float dtype: unwritten elements fail
        kernels.launch_fused(steps, dtype, input.data(), out.data(), n, stream);
        ReferenceComparison fused = cuda::compare_with_reference(out.download(stream), reference);
        const double fused_tolerance = cuda::chain_tolerance(dtype, 1);
        recorder.record("fused chain " + label, fused.passes(fused_tolerance), fused.relative_error,
                        fused_tolerance, describe(fused));
        out.fill_bytes(0xFF, stream);
        kernels.launch_unfused(steps, dtype, input.data(), out.data(), scratch.data(), n, stream);
        ReferenceComparison eager = cuda::compare_with_reference(out.download(stream), reference);
        const double eager_tolerance = cuda::chain_tolerance(dtype, int(steps.size()));
        recorder.record("unfused chain " + label, eager.passes(eager_tolerance),
                        eager.relative_error, eager_tolerance, describe(eager));
      });
    }
  }
}

void check_graph_replay(CheckRecorder& recorder) {
  recorder.guarded("graph replay", [&] {
    const std::vector<ChainStep> steps = cuda::parse_chain(kCheckChain);
    const DType dtype = DType::BF16;
    const int64_t n = 1'000'003;
    Stream stream;
    cuda::ChainKernels kernels;
    DeviceTensor input = DeviceTensor::empty(dtype, {n}, stream);
    DeviceTensor out = DeviceTensor::empty(dtype, {n}, stream);
    DeviceTensor scratch = DeviceTensor::empty(dtype, {n}, stream);
    // Compile outside the capture: module loading is not a stream operation.
    input.copy_from_host(HostTensor::random(dtype, {n}, 1), stream);
    kernels.launch_unfused(steps, dtype, input.data(), out.data(), scratch.data(), n, stream);
    stream.synchronize();
    cuda::CapturedGraph::begin_capture(stream);
    kernels.launch_unfused(steps, dtype, input.data(), out.data(), scratch.data(), n, stream);
    cuda::CapturedGraph graph = cuda::CapturedGraph::end_capture(stream);
    for (int replay = 0; replay < 3; ++replay) {
      HostTensor x = HostTensor::random(dtype, {n}, 500 + replay, -3, 3);
      input.copy_from_host(x, stream);
      out.fill_bytes(0xFF, stream);
      graph.launch(stream);
      ReferenceComparison c =
          cuda::compare_with_reference(out.download(stream), chain_reference(steps, x));
      const double tolerance = cuda::chain_tolerance(dtype, int(steps.size()));
      recorder.record("graph replay " + std::to_string(replay + 1) + " (new input)",
                      c.passes(tolerance), c.relative_error, tolerance, describe(c));
    }
  });
}

void check_allocator_steady_state(CheckRecorder& recorder) {
  recorder.guarded("allocator steady state", [&] {
    cuda::CachingAllocator& allocator = cuda::CudaDevice::get().allocator();
    Stream stream;
    cuda::ChainKernels kernels;
    const std::vector<ChainStep> steps = gap_chain(8);
    DeviceTensor x = DeviceTensor::upload(HostTensor::random(DType::BF16, {4, 1 << 20}, 9), stream);
    kernels.run_eager(x, steps, stream);
    const int64_t before = allocator.stats().driver_allocations;
    for (int i = 0; i < 50; ++i) kernels.run_eager(x, steps, stream);
    stream.synchronize();
    const int64_t made = allocator.stats().driver_allocations - before;
    recorder.record("allocator: 50 eager chains, driver allocations", made == 0, double(made), 0,
                    std::to_string(made) + " cuMemAlloc calls");
  });
}

double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

void check_matmuls(CheckRecorder& recorder) {
  const int64_t m = 136, n = 264, k = 520;
  Stream stream;
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    for (cuda::MatmulEpilogue epilogue :
         {cuda::MatmulEpilogue::None, cuda::MatmulEpilogue::Bias, cuda::MatmulEpilogue::ReluBias,
          cuda::MatmulEpilogue::GeluBias}) {
      const std::string name = std::string("cublasLt ") + std::string(dtype_name(dtype)) + " " +
                               cuda::matmul_epilogue_name(epilogue);
      recorder.guarded(name, [&] {
        HostTensor a = HostTensor::random(dtype, {m, k}, 21, -1, 1);
        HostTensor b = HostTensor::random(dtype, {k, n}, 22, -1, 1);
        HostTensor bias = HostTensor::random(dtype, {n}, 23, -1, 1);
        const std::vector<double> av = a.to_doubles(), bv = b.to_doubles(), biasv = bias.to_doubles();
        std::vector<double> reference(size_t(m * n));
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double sum = 0;
            for (int64_t p = 0; p < k; ++p) sum += av[size_t(i * k + p)] * bv[size_t(p * n + j)];
            if (cuda::epilogue_has_bias(epilogue)) sum += biasv[size_t(j)];
            if (epilogue == cuda::MatmulEpilogue::ReluBias) sum = std::max(sum, 0.0);
            if (epilogue == cuda::MatmulEpilogue::GeluBias) sum = gelu_tanh(sum);
            reference[size_t(i * n + j)] = sum;
          }
        }
        DeviceTensor da = DeviceTensor::upload(a, stream), db = DeviceTensor::upload(b, stream);
        DeviceTensor dbias = DeviceTensor::upload(bias, stream);
        DeviceTensor out = DeviceTensor::empty(dtype, {m, n}, stream);
        DeviceTensor workspace =
            DeviceTensor::empty(DType::U8, {int64_t(cuda::LtMatmul::kWorkspaceBytes)}, stream);
        out.fill_bytes(0xFF, stream);
        cuda::LtMatmul matmul(m, n, k, dtype, epilogue);
        matmul.run(da.data(), db.data(), dbias.data(), out.data(), workspace.data(), stream);
        ReferenceComparison c = cuda::compare_with_reference(out.download(stream), reference);
        const double tolerance = dtype == DType::F32 ? 1e-4 : dtype == DType::F16 ? 2e-3 : 1e-2;
        recorder.record(name, c.passes(tolerance), c.relative_error, tolerance, describe(c));
      });
    }
  }
}

}  // namespace

int run_checks(const ProbeOptions& options, nlohmann::json& report) {
  report["checks"] = nlohmann::json::array();
  CheckRecorder recorder{report["checks"]};
  std::printf("checks (random inputs, float64 references, outputs poisoned with NaN first):\n");
  check_chains(recorder, options);
  check_graph_replay(recorder);
  check_allocator_steady_state(recorder);
  check_matmuls(recorder);
  return recorder.failures;
}

}  // namespace kiln::gpu_probe
