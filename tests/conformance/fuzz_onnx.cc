// libFuzzer target for the ONNX importer: any byte string must import or throw kiln::Error, never
// crash or hang. Built by scripts/fuzz-onnx with clang++ -fsanitize=fuzzer,address,undefined.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kiln/onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::ImportOptions opts;
  opts.max_tensor_bytes = int64_t(1) << 24;  // keep allocations small under the fuzzer
  try {
    kiln::import_onnx_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.onnx", opts);
  } catch (const kiln::Error&) {
  }
  return 0;
}
