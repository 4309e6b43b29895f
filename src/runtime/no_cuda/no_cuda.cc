// kiln::compile_cuda in builds without the CUDA backend (no /usr/local/cuda/include at configure
// time, or -DKILN_CUDA=OFF). Why: callers such as `kiln run --device cuda` link in every build and
// get a clear message instead of a link error.
#include "kiln/cuda.h"
#include "kiln/error.h"

namespace kiln {

std::string cuda_unavailable_reason() {
  return "this Kiln was built without the CUDA backend (configure with the CUDA headers in "
         "/usr/local/cuda/include, or -DKILN_CUDA=ON)";
}

std::shared_ptr<Executable> compile_cuda(const Graph& g, const CudaCompileOptions&) {
  throw Error(str("cannot compile graph '", g.name(), "' for CUDA: ", cuda_unavailable_reason()));
}

}  // namespace kiln

namespace kiln {

std::string cuda_device_description(int) { return "cuda: unavailable"; }

double cuda_copy_gbps(int64_t, int) { throw Error(str("cuda: ", cuda_unavailable_reason())); }

}  // namespace kiln
