// Run-time compilation of CUDA C++ to a cubin with NVRTC, loaded with dlopen. Why: Kiln generates
// kernels for the shapes and op chains of each graph, and compiles them for the device's own
// architecture (sm_90 on the H200) without nvcc; the cubin bytes are what a compile cache stores.
#pragma once

#include <string>
#include <vector>

namespace kiln::cuda {

// Whether libnvrtc could be loaded, and if not, which names were tried.
struct NvrtcStatus {
  bool loaded = false;
  int major = 0;
  int minor = 0;
  std::string message;
};
const NvrtcStatus& nvrtc_status();

// Compiles `source` (program `name`, used in messages) for `arch` ("sm_90") into a cubin. Throws
// kiln::Error with NVRTC's log when the source does not compile or NVRTC is missing.
std::vector<char> nvrtc_compile(const std::string& source, const std::string& name,
                                const std::string& arch,
                                const std::vector<std::string>& options = {});

}  // namespace kiln::cuda
