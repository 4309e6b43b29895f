// Finds libcuda.so.1 with dlopen, resolves the driver entry points and initialises the driver.
#include "runtime/cuda/driver_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "kiln/error.h"

namespace kiln::cuda {
namespace {

#define KILN_CU_STRINGIZE_EXPANDED(x) #x
#define KILN_CU_SYMBOL(x) KILN_CU_STRINGIZE_EXPANDED(x)

struct LoadedDriver {
  DriverApi api;
  DriverStatus status;
};

LoadedDriver load_driver() {
  LoadedDriver loaded;
  std::string tried;
  void* handle = open_first_library("KILN_LIBCUDA", {"libcuda.so.1", "libcuda.so"}, &tried);
  if (!handle) {
    loaded.status.message = "no CUDA driver (libcuda.so.1) found; tried " + tried;
    return loaded;
  }
  std::string missing;
#define KILN_CU_RESOLVE(name)                                                           \
  loaded.api.name = reinterpret_cast<decltype(&::name)>(dlsym(handle, KILN_CU_SYMBOL(name))); \
  if (!loaded.api.name) missing += std::string(missing.empty() ? "" : ", ") + KILN_CU_SYMBOL(name);
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_CU_RESOLVE)
#undef KILN_CU_RESOLVE
  loaded.api.cuOccupancyMaxActiveClusters = reinterpret_cast<decltype(&::cuOccupancyMaxActiveClusters)>(
      dlsym(handle, "cuOccupancyMaxActiveClusters"));
  if (!missing.empty()) {
    loaded.status.message = "the CUDA driver found is too old: it lacks " + missing;
    return loaded;
  }
  loaded.status.driver_loaded = true;
  CUresult init = loaded.api.cuInit(0);
  loaded.api.cuDriverGetVersion(&loaded.status.driver_version);
  if (init == CUDA_SUCCESS) loaded.api.cuDeviceGetCount(&loaded.status.device_count);
  if (loaded.status.device_count == 0) {
    const char* name = nullptr;
    loaded.api.cuGetErrorName(init, &name);
    loaded.status.message = str("no CUDA device (cuInit: ", name ? name : "unknown error", ")");
  } else {
    loaded.status.message = str(loaded.status.device_count, " CUDA device(s), driver ",
                                loaded.status.driver_version / 1000, ".",
                                (loaded.status.driver_version % 1000) / 10);
  }
  return loaded;
}

const LoadedDriver& loaded_driver() {
  static const LoadedDriver loaded = load_driver();
  return loaded;
}

}  // namespace

void* open_first_library(const char* env_override, const std::vector<std::string>& names, std::string* tried,
                         bool global) {
  const int flags = RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL);
  if (const char* path = env_override ? std::getenv(env_override) : nullptr; path && *path) {
    if (void* handle = dlopen(path, flags)) return handle;
    *tried += str(path, " ($", env_override, ": ", dlerror(), ")");
  }
  for (const std::string& name : names) {
    if (void* handle = dlopen(name.c_str(), flags)) return handle;
    *tried += str(tried->empty() ? "" : ", ", name);
  }
  return nullptr;
}

const DriverStatus& driver_status() { return loaded_driver().status; }

const DriverApi& driver() {
  const LoadedDriver& loaded = loaded_driver();
  KILN_CHECK(loaded.status.has_device(), loaded.status.message);
  return loaded.api;
}

void check_cu(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* description = nullptr;
  const DriverApi& api = loaded_driver().api;
  if (api.cuGetErrorName) api.cuGetErrorName(result, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(result, &description);
  std::string reason = name ? name : "CUresult " + std::to_string(int(result));
  if (description) reason += str(" (", description, ")");
  throw Error(str("CUDA call failed: ", what, " -> ", reason));
}

}  // namespace kiln::cuda
