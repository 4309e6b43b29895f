// kiln::Tensor, the dispatch every API op goes through (trace or run eagerly), the eager
// scoreboard redirection and the per-thread tracing context.
#include <algorithm>
#include <atomic>
#include <chrono>

#include "frontend/trace/trace_context.h"
#include "kernels/cpu/eager.h"
#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln {

// ---------------------------------------------------------------------------------------------
// Tracing context

namespace {
thread_local TraceContext* tls_active_trace = nullptr;
std::atomic<uint64_t> next_trace_id{1};
}  // namespace

TraceContext::TraceContext(Graph& graph) : graph_(graph), id_(next_trace_id.fetch_add(1)) {}

Tensor TraceContext::wrap(Value* v) const {
  auto traced = std::make_shared<TracedValue>();
  traced->value = v;
  traced->trace_id = id_;
  traced->type = v->type;
  traced->value_id = v->id;
  return Tensor::from_traced(std::move(traced));
}

Value* TraceContext::value_of(const Tensor& t, const std::string& what) {
  if (t.is_traced()) {
    KILN_CHECK(t.traced()->trace_id == id_, what, " (", t.type().to_string(),
               ") was traced by another kiln::trace call; traced tensors cannot cross traces");
    return t.traced()->value;
  }
  KILN_CHECK(t.defined(), what, " is an undefined Tensor");
  const HostTensor& h = t.host();
  auto& same_storage = constants_[h.raw()];
  for (const auto& [held, value] : same_storage)
    if (held.dtype() == h.dtype() && held.shape() == h.shape()) return value;
  Value* v = graph_.constant(h);
  same_storage.emplace_back(h, v);
  return v;
}

TraceContext* active_trace() { return tls_active_trace; }

ActiveTraceScope::ActiveTraceScope(TraceContext& ctx) {
  KILN_CHECK(tls_active_trace == nullptr,
             "kiln::trace was called while another trace is running on this thread; nested "
             "tracing is not supported (call the inner function directly instead)");
  tls_active_trace = &ctx;
}

ActiveTraceScope::~ActiveTraceScope() { tls_active_trace = nullptr; }

// ---------------------------------------------------------------------------------------------
// Tensor

Tensor Tensor::from_host(HostTensor t) {
  Tensor out;
  out.host_ = std::move(t);
  out.has_host_ = true;
  return out;
}

Tensor Tensor::from_device(std::shared_ptr<const DeviceData> data) {
  KILN_ASSERT(data != nullptr);
  Tensor out;
  out.device_ = std::move(data);
  return out;
}

namespace {
DeviceBackend& backend_slot(Device d) {
  static DeviceBackend backends[2];
  return backends[size_t(d)];
}
}  // namespace

void register_device_backend(Device device, DeviceBackend backend) { backend_slot(device) = backend; }

Device Tensor::device() const { return device_ ? device_->device() : Device::CPU; }

Tensor Tensor::to(Device d) const {
  KILN_CHECK(defined(), "to(", device_name(d), ") on an undefined Tensor");
  KILN_CHECK(!traced_, "to(", device_name(d), ") on a traced tensor: a traced function runs where it is compiled ",
             "for (kiln::compile / kiln::compile_cuda)");
  if (device() == d) return *this;
  if (d == Device::CPU) return from_host(device_->host());
  const DeviceBackend& b = backend_slot(d);
  KILN_CHECK(b.upload != nullptr, "to(", device_name(d), "): this Kiln has no ", device_name(d),
             " backend (built without it, or no device: see kiln::cuda_unavailable_reason())");
  return from_device(b.upload(host()));
}

Tensor Tensor::from_traced(std::shared_ptr<const TracedValue> traced) {
  KILN_ASSERT(traced != nullptr);
  Tensor out;
  out.traced_ = std::move(traced);
  return out;
}

TensorType Tensor::type() const {
  KILN_CHECK(defined(), "this Tensor is undefined (default-constructed)");
  if (traced_) return traced_->type;
  if (device_) return TensorType{device_->dtype(), to_shape(device_->sizes()), device_->device()};
  return TensorType{host_.dtype(), to_shape(host_.shape()), Device::CPU};
}

DType Tensor::dtype() const {
  KILN_CHECK(defined(), "this Tensor is undefined (default-constructed)");
  if (device_) return device_->dtype();
  return traced_ ? traced_->type.dtype : host_.dtype();
}

Shape Tensor::shape() const { return type().shape; }

int Tensor::rank() const {
  KILN_CHECK(defined(), "this Tensor is undefined (default-constructed)");
  if (device_) return int(device_->sizes().size());
  return traced_ ? traced_->type.rank() : host_.rank();
}

SymInt Tensor::dim(int axis) const {
  int r = rank();
  KILN_CHECK(axis >= -r && axis < r, "dim ", axis, " is out of range for a tensor of rank ", r);
  if (axis < 0) axis += r;
  if (traced_) return traced_->type.shape[size_t(axis)];
  if (device_) return SymInt(device_->sizes()[size_t(axis)]);
  return SymInt(host_.shape()[size_t(axis)]);
}

SymInt Tensor::numel() const { return type().numel(); }

std::vector<int64_t> Tensor::sizes() const {
  if (!traced_ && has_host_) return host_.shape();
  if (device_) return device_->sizes();
  return type().static_shape();
}

const HostTensor& Tensor::host() const {
  KILN_CHECK(!traced_, "host() called on a traced tensor ", traced_ ? traced_->type.to_string() : "",
             ": traced tensors have no data until the traced function runs");
  if (device_) return device_->host();
  KILN_CHECK(has_host_, "host() called on an undefined Tensor");
  return host_;
}

double Tensor::item() const {
  const HostTensor& h = host();
  KILN_CHECK(h.numel() == 1, "item() needs a one-element tensor, got ", dtype_name(h.dtype()),
             dims_to_string(h.shape()));
  return h.get_f64(0);
}

std::string Tensor::to_string(int max_elems) const {
  if (!defined()) return "undefined";
  if (traced_) return str("traced ", traced_->type.to_string(), " (%", traced_->value_id, ")");
  if (device_) return str(device_->host().to_string(max_elems), " @", device_name(device_->device()));
  return host_.to_string(max_elems);
}

// ---------------------------------------------------------------------------------------------
// Eager scoreboard

namespace {
thread_local Scoreboard tls_default_scoreboard;
thread_local Scoreboard* tls_redirect = nullptr;
thread_local bool tls_redirected = false;

Scoreboard* recording_scoreboard() {
  return tls_redirected ? tls_redirect : &tls_default_scoreboard;
}
}  // namespace

Scoreboard& eager_scoreboard() {
  Scoreboard* sb = recording_scoreboard();
  return sb != nullptr ? *sb : tls_default_scoreboard;
}

ScoreboardScope::ScoreboardScope(Scoreboard* sb)
    : previous_(tls_redirect), previous_set_(tls_redirected) {
  tls_redirect = sb;
  tls_redirected = true;
}

ScoreboardScope::~ScoreboardScope() {
  tls_redirect = previous_;
  tls_redirected = previous_set_;
}

// ---------------------------------------------------------------------------------------------
// Dispatch

namespace {
std::vector<Tensor> record_traced(TraceContext* ctx, Op op, const std::vector<Tensor>& inputs,
                                  size_t num_operands, Attrs attrs) {
  KILN_CHECK(ctx != nullptr, "op '", op_name(op),
             "': an operand is a traced tensor but no trace is active; traced tensors cannot be "
             "used after kiln::trace returns");
  std::vector<Value*> operands;
  operands.reserve(num_operands);
  for (size_t i = 0; i < num_operands; ++i)
    operands.push_back(ctx->value_of(inputs[i], str("op '", op_name(op), "' operand ", i)));
  std::vector<Value*> outs = ctx->graph().add_node(op, operands, std::move(attrs));
  std::vector<Tensor> result;
  result.reserve(outs.size());
  for (Value* v : outs) result.push_back(ctx->wrap(v));
  return result;
}

std::vector<Tensor> run_eagerly(Op op, const std::vector<Tensor>& inputs, size_t num_operands,
                                const Attrs& attrs) {
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  std::vector<HostTensor> hosts;
  hosts.reserve(num_operands);
  for (size_t i = 0; i < num_operands; ++i) hosts.push_back(inputs[i].host());
  Scoreboard* sb = recording_scoreboard();
  size_t kernels_before = sb ? sb->kernels().size() : 0;
  std::vector<HostTensor> outs = eager::run_op(op, attrs, hosts, sb);
  std::vector<Tensor> result;
  result.reserve(outs.size());
  for (HostTensor& h : outs) result.push_back(Tensor::from_host(std::move(h)));
  if (sb != nullptr) {
    double total_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    double kernel_us = sb->kernels().size() > kernels_before ? sb->kernels().back().time_us : 0;
    sb->add_dispatch_us(std::max(0.0, total_us - kernel_us));
  }
  return result;
}
// An op with an operand on a device runs there (one launch per op, the device's eager baseline).
// Rank-0 host operands (the scalars of `x + 1.0`) go along; other host operands are an error, as
// silently copying a tensor on every op would hide the cost the scoreboard is there to show.
std::vector<Tensor> run_on_device(Device device, Op op, const std::vector<Tensor>& inputs, size_t num_operands,
                                  const Attrs& attrs) {
  const DeviceBackend& b = backend_slot(device);
  KILN_CHECK(b.run != nullptr, "op '", op_name(op), "': no ", device_name(device), " backend in this Kiln");
  for (size_t i = 0; i < num_operands; ++i) {
    const Tensor& t = inputs[i];
    if (t.device() == device) continue;
    KILN_CHECK(t.device() == Device::CPU && t.rank() == 0, "op '", op_name(op), "': operand ", i, " is on ",
               device_name(t.device()), " (", dtype_name(t.dtype()), dims_to_string(t.sizes()), ") and another on ",
               device_name(device), "; move it with .to(Device::", device == Device::CUDA ? "CUDA" : "CPU",
               ") first");
  }
  const bool timed = tls_redirected && tls_redirect != nullptr;
  if (num_operands == inputs.size()) return b.run(op, inputs, attrs, recording_scoreboard(), timed);
  // Trailing absent optional operands are not passed on (one copy per op only in that case).
  std::vector<Tensor> operands(inputs.begin(), inputs.begin() + std::ptrdiff_t(num_operands));
  return b.run(op, operands, attrs, recording_scoreboard(), timed);
}
}  // namespace

std::vector<Tensor> apply_multi(Op op, const std::vector<Tensor>& inputs, Attrs attrs) {
  // Trailing undefined tensors are absent optional operands (bias, mask...).
  size_t num_operands = inputs.size();
  while (num_operands > 0 && !inputs[num_operands - 1].defined()) --num_operands;
  bool any_traced = false;
  for (size_t i = 0; i < num_operands; ++i) {
    KILN_CHECK(inputs[i].defined(), "op '", op_name(op), "': operand ", i,
               " is an undefined Tensor (only trailing optional operands may be left out)");
    any_traced = any_traced || inputs[i].is_traced();
  }
  TraceContext* ctx = active_trace();
  // Sources (full, arange, random) are recorded while tracing so that symbolic shapes work.
  bool record = any_traced || (ctx != nullptr && num_operands == 0 && has_trait(op, kSource));
  if (record) return record_traced(ctx, op, inputs, num_operands, std::move(attrs));
  for (size_t i = 0; i < num_operands; ++i)
    if (inputs[i].device() != Device::CPU) return run_on_device(inputs[i].device(), op, inputs, num_operands, attrs);
  return run_eagerly(op, inputs, num_operands, attrs);
}

Tensor apply(Op op, const std::vector<Tensor>& inputs, Attrs attrs) {
  std::vector<Tensor> outs = apply_multi(op, inputs, std::move(attrs));
  KILN_CHECK(outs.size() == 1, "op '", op_name(op), "' has ", outs.size(),
             " results; use apply_multi");
  return outs[0];
}

}  // namespace kiln
