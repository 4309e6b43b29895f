// The device hook (see device.h).
#include "device.h"

#include <optional>

#include "kiln/error.h"

namespace kiln::cli {

namespace {
std::optional<DeviceBackend>& cuda_slot() {
  static std::optional<DeviceBackend> slot;
  return slot;
}
}  // namespace

DeviceKind parse_device(const std::string& name) {
  if (name == "cpu") return DeviceKind::Cpu;
  if (name == "cuda") return DeviceKind::Cuda;
  throw Error(str("--device: unknown device '", name, "' (expected cpu or cuda)"));
}

void register_cuda_backend(DeviceBackend backend) { cuda_slot() = std::move(backend); }

const DeviceBackend* backend_for(DeviceKind kind) {
  if (kind == DeviceKind::Cpu) return nullptr;
  KILN_CHECK(cuda_slot().has_value(),
             "--device cuda: the CUDA backend is not available in this build of kiln (it registers "
             "through kiln::cli::register_cuda_backend when built with CUDA); use --device cpu");
  return &*cuda_slot();
}

}  // namespace kiln::cli
