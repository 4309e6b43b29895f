// Loads libnvrtc and drives one compilation: create, compile, read the log and the cubin.
#include "runtime/cuda/nvrtc_compiler.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include "kiln/error.h"
#include "runtime/cuda/driver_api.h"

namespace kiln::cuda {
namespace {

#define KILN_NVRTC_FUNCTIONS(X)                                                                   \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcDestroyProgram)            \
  X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize)    \
  X(nvrtcGetCUBIN)

struct NvrtcApi {
#define KILN_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  KILN_NVRTC_FUNCTIONS(KILN_NVRTC_MEMBER)
#undef KILN_NVRTC_MEMBER
  NvrtcStatus status;
};

NvrtcApi load_nvrtc() {
  NvrtcApi api;
  std::string tried;
  void* handle = open_first_library(
      "KILN_LIBNVRTC",
      {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13",
       "/usr/local/cuda/lib64/libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so"},
      &tried);
  if (!handle) {
    api.status.message = "no NVRTC (libnvrtc.so) found; tried " + tried;
    return api;
  }
  std::string missing;
#define KILN_NVRTC_RESOLVE(name) KILN_RESOLVE_SYMBOL(api, handle, name, missing)
  KILN_NVRTC_FUNCTIONS(KILN_NVRTC_RESOLVE)
#undef KILN_NVRTC_RESOLVE
  if (!missing.empty()) {
    api.status.message = "the NVRTC library found lacks " + missing;
    return api;
  }
  api.nvrtcVersion(&api.status.major, &api.status.minor);
  api.status.loaded = true;
  api.status.message = str("NVRTC ", api.status.major, ".", api.status.minor);
  return api;
}

const NvrtcApi& nvrtc() {
  static const NvrtcApi api = load_nvrtc();
  return api;
}

void check_nvrtc(const NvrtcApi& api, nvrtcResult result, const char* what,
                 const std::string& program) {
  if (result == NVRTC_SUCCESS) return;
  throw Error(str("NVRTC ", what, " failed for program ", program, ": ",
                  api.nvrtcGetErrorString(result)));
}

}  // namespace

const NvrtcStatus& nvrtc_status() { return nvrtc().status; }

std::vector<char> nvrtc_compile(const std::string& source, const std::string& name,
                                const std::string& arch, const std::vector<std::string>& options) {
  const NvrtcApi& api = nvrtc();
  KILN_CHECK(api.status.loaded, api.status.message);
  KILN_CHECK(arch.rfind("sm_", 0) == 0, "NVRTC target architecture must look like sm_90, got '",
             arch, "' (program ", name, ")");
  nvrtcProgram program = nullptr;
  check_nvrtc(api, api.nvrtcCreateProgram(&program, source.c_str(), name.c_str(), 0, nullptr,
                                          nullptr),
              "create", name);
  struct Destroy {
    const NvrtcApi& api;
    nvrtcProgram* program;
    ~Destroy() { api.nvrtcDestroyProgram(program); }
  } destroy{api, &program};

  // A real architecture (sm_XX, not compute_XX) makes NVRTC emit a cubin, not PTX.
  std::vector<std::string> all_options = {"--gpu-architecture=" + arch, "--std=c++17"};
  all_options.insert(all_options.end(), options.begin(), options.end());
  std::vector<const char*> option_pointers;
  for (const std::string& option : all_options) option_pointers.push_back(option.c_str());
  nvrtcResult compiled = api.nvrtcCompileProgram(program, int(option_pointers.size()),
                                                 option_pointers.data());
  std::size_t log_size = 0;
  api.nvrtcGetProgramLogSize(program, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 1) api.nvrtcGetProgramLog(program, log.data());
  KILN_CHECK(compiled == NVRTC_SUCCESS, "NVRTC could not compile program ", name, " for ", arch,
             ": ", api.nvrtcGetErrorString(compiled), "\n", log);
  std::size_t cubin_size = 0;
  check_nvrtc(api, api.nvrtcGetCUBINSize(program, &cubin_size), "GetCUBINSize", name);
  KILN_CHECK(cubin_size > 0, "NVRTC produced no cubin for program ", name, " (arch ", arch,
             " must be a real architecture such as sm_90)");
  std::vector<char> cubin(cubin_size);
  check_nvrtc(api, api.nvrtcGetCUBIN(program, cubin.data()), "GetCUBIN", name);
  return cubin;
}

}  // namespace kiln::cuda
