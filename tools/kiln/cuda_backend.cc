// Registers the CUDA backend with the CLI (see device.h): `--device cuda` on run and gap compiles
// with kiln::compile_cuda, runs the eager baseline as one unfused launch per op, and measures the
// device's copy bandwidth. Why: the commands stay device-agnostic; this file is the only glue.
#include "device.h"

#include <map>

#include "kiln/cuda.h"
#include "kiln/error.h"

#ifdef KILN_HAVE_CUDA
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/device_tensor.h"
#endif

namespace kiln::cli {
namespace {

void require_cuda() {
  std::string why = cuda_unavailable_reason();
  KILN_CHECK(why.empty(), "--device cuda: ", why);
}

double device_copy_gbps(int64_t bytes) {
  require_cuda();
#ifdef KILN_HAVE_CUDA
  using namespace kiln::cuda;
  CudaDevice::get().make_current();
  Stream stream;
  DeviceTensor a = DeviceTensor::empty(DType::U8, {bytes}, stream), b = DeviceTensor::empty(DType::U8, {bytes}, stream);
  a.fill_bytes(1, stream);
  double best_ms = 1e30;
  for (int i = 0; i < 7; ++i) {
    Event start, stop;
    start.record(stream);
    KILN_CU(driver().cuMemcpyDtoDAsync(b.data(), a.data(), size_t(bytes), stream.handle()));
    stop.record(stream);
    stop.synchronize();
    if (i > 0) best_ms = std::min(best_ms, double(stop.elapsed_ms_since(start)));
  }
  return 2.0 * double(bytes) / (best_ms * 1e6);
#else
  (void)bytes;
  return 0;
#endif
}

const bool registered = [] {
  DeviceBackend b;
  b.name = "cuda";
  b.compile = [](const Graph& g, const CompileOptions& options) {
    require_cuda();
    CudaCompileOptions o;
    o.base = options;
    return compile_cuda(g, o);
  };
  b.run_eager = [](const Graph& g, const std::vector<HostTensor>& inputs, Scoreboard* sb) {
    require_cuda();
    // The per-op kernels of a graph are built once (keyed by the graph's text, so a different
    // graph at the same address never reuses them) and launched one per op on every call.
    static std::map<std::string, std::shared_ptr<Executable>> per_op_kernels;
    std::string key = print_graph(g);
    auto it = per_op_kernels.find(key);
    if (it == per_op_kernels.end()) {
      CudaCompileOptions o;
      o.base.fuse = false;  // one kernel per op: the GPU eager baseline
      o.use_graphs = false;
      o.fuse_epilogues = false;
      it = per_op_kernels.emplace(key, compile_cuda(g, o)).first;
    }
    return it->second->run(inputs, sb);
  };
  b.copy_gbps = device_copy_gbps;
  b.native_ops = cuda_native_ops();
  register_cuda_backend(std::move(b));
  return true;
}();

}  // namespace
}  // namespace kiln::cli
