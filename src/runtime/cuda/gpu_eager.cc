// The GPU eager backend of kiln::Tensor: `x.to(Device::CUDA)` uploads, and every op on CUDA
// tensors runs as its own launch — the op compiled alone by the CUDA target (its decomposition fused
// into one kernel where the scheduler can, matmuls through cuBLASLt, no CUDA graph), cached per op,
// attributes, dtypes and shapes — on one stream shared by all eager ops, filling the scoreboard.
// Why: the GPU baseline that compiled graphs are measured against, with the host cost of
// dispatching one op (a cache lookup and a launch) kept small.
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "kiln/cuda.h"
#include "kiln/error.h"
#include "kiln/target.h"
#include "kiln/tensor.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_executable.h"

namespace kiln::cuda {
namespace {

// One stream for every eager op: results flow from op to op in stream order, and the caching
// allocator can hand a freed block to the next op without waiting.
std::shared_ptr<Stream> eager_stream() {
  static std::shared_ptr<Stream> stream = [] {
    CudaDevice::get(0).make_current();
    return std::make_shared<Stream>();
  }();
  return stream;
}

class CudaData final : public DeviceData {
 public:
  explicit CudaData(DeviceTensor t) : tensor_(std::move(t)) {}
  Device device() const override { return Device::CUDA; }
  DType dtype() const override { return tensor_.dtype(); }
  const std::vector<int64_t>& sizes() const override { return tensor_.shape(); }
  const HostTensor& host() const override {
    std::call_once(downloaded_, [&] { host_ = tensor_.download(*eager_stream()); });
    return host_;
  }
  const DeviceTensor& tensor() const { return tensor_; }

 private:
  DeviceTensor tensor_;
  mutable std::once_flag downloaded_;
  mutable HostTensor host_;
};

std::shared_ptr<const DeviceData> upload(const HostTensor& host) {
  KILN_CHECK(cuda_unavailable_reason().empty(), "to(cuda): ", cuda_unavailable_reason());
  return std::make_shared<CudaData>(DeviceTensor::upload(host, *eager_stream()));
}

// The key of one compiled op: op, attributes, and each operand's dtype and shape, as raw bytes in
// a per-thread buffer reused from op to op (no allocation once it has grown). Why: the key is built
// on every eager op; a readable string of dtype names and copied dims cost several allocations an
// op (~0.2 us on the development machine; the op as a whole takes ~4 us, ~3 of them the driver's).
const std::string& op_key(Op op, const std::vector<Tensor>& operands, const Attrs& attrs) {
  thread_local std::string key;
  key.clear();
  auto append = [&](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  append(int64_t(op));
  for (const auto& [name, value] : attrs.items()) {  // names and values as text, each ended by a NUL
    key += name;
    key += '\0';
    key += attr_to_string(value);
    key += '\0';
  }
  for (const Tensor& t : operands) {
    const DeviceData* data = t.device_data().get();  // a device tensor's dims by reference, not copied
    append(int64_t(data ? data->dtype() : t.dtype()));
    if (data) {
      append(int64_t(data->sizes().size()));
      for (int64_t d : data->sizes()) append(d);
    } else {  // a host operand (a rank-0 scalar)
      const std::vector<int64_t> dims = t.sizes();
      append(int64_t(dims.size()));
      for (int64_t d : dims) append(d);
    }
  }
  return key;
}

struct OpCache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<CudaExecutable>> executables;
  // Rank-0 host operands (the 1.0 of `x + 1.0`) uploaded once per dtype and value.
  std::map<std::pair<DType, double>, DeviceTensor> scalars;
};
OpCache& cache() {
  static OpCache c;
  return c;
}

std::shared_ptr<CudaExecutable> compiled_op(Op op, const std::vector<Tensor>& operands, const Attrs& attrs) {
  OpCache& c = cache();
  {
    const std::string& key = op_key(op, operands, attrs);
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.executables.find(key);
    if (it != c.executables.end()) return it->second;
  }
  Graph g(str("eager_", op_name(op)));
  std::vector<Value*> ins;
  for (size_t i = 0; i < operands.size(); ++i) {
    Shape shape;
    for (int64_t d : operands[i].sizes()) shape.push_back(SymInt(d));
    ins.push_back(g.add_input(str("x", i), TensorType{operands[i].dtype(), shape, Device::CPU}));
  }
  g.set_outputs(g.add_node(op, ins, attrs));
  // Through the CUDA Target like every other compile (its compile, not compile_for: an eager op runs
  // as it was called, with no optimizer pipeline); an eager op is one launch, queued as it is called.
  static const std::unique_ptr<Target> eager_target = [] {
    CudaCompileOptions options;
    options.use_graphs = false;
    return cuda_target(options);
  }();
  std::shared_ptr<Executable> exe = eager_target->compile(g, CompileOptions{});
  auto cuda_exe = std::dynamic_pointer_cast<CudaExecutable>(exe);
  KILN_ASSERT(cuda_exe != nullptr);
  cuda_exe->stream_ = eager_stream();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.executables.emplace(op_key(op, operands, attrs), cuda_exe).first->second;
}

DeviceTensor device_operand(const Tensor& t) {
  if (t.device() == Device::CUDA) return static_cast<const CudaData&>(*t.device_data()).tensor();
  const HostTensor& h = t.host();  // a rank-0 host scalar (checked by the dispatcher)
  std::pair<DType, double> key{h.dtype(), h.get_f64(0)};
  OpCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.scalars.find(key);
  if (it == c.scalars.end()) it = c.scalars.emplace(key, DeviceTensor::upload(h, *eager_stream())).first;
  return it->second;
}

std::vector<Tensor> run(Op op, const std::vector<Tensor>& operands, const Attrs& attrs, Scoreboard* sb, bool timed) {
  std::shared_ptr<CudaExecutable> exe = compiled_op(op, operands, attrs);
  std::vector<DeviceTensor> ins;
  ins.reserve(operands.size());
  for (const Tensor& t : operands) ins.push_back(device_operand(t));
  Scoreboard local;
  std::vector<DeviceTensor> outs = exe->run_device(ins, sb && timed ? &local : nullptr);
  if (sb) {
    if (timed) {
      for (const KernelRecord& r : local.kernels()) sb->add(r);
    } else {
      // Untimed (the default scoreboard): launches and bytes, no waiting for the device.
      KernelRecord r;
      r.name = str("cuda_", op_name(op));
      r.source_ops = {std::string(op_name(op))};
      for (const DeviceTensor& t : ins) r.bytes_read += int64_t(t.nbytes());
      for (const DeviceTensor& t : outs) r.bytes_written += int64_t(t.nbytes());
      sb->add(std::move(r));
    }
  }
  std::vector<Tensor> result;
  result.reserve(outs.size());
  for (DeviceTensor& t : outs) result.push_back(Tensor::from_device(std::make_shared<CudaData>(std::move(t))));
  return result;
}

// Registered at start-up (this file is linked into every program that links kiln, see
// CMakeLists.txt); nothing touches the GPU until a tensor is moved there.
const bool registered = [] {
  register_device_backend(Device::CUDA, DeviceBackend{&upload, &run});
  return true;
}();

}  // namespace
}  // namespace kiln::cuda
