// The C++ tensor API: kiln::Tensor and a function for every op in the op table. Why: it is how
// users write models by hand. The same code runs eagerly (one instrumented CPU kernel per op, the
// baseline every compiled path is measured against) or, inside kiln::trace, records a Graph.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/attrs.h"
#include "kiln/host_tensor.h"
#include "kiln/ops.h"
#include "kiln/scoreboard.h"
#include "kiln/types.h"

namespace kiln {

struct Value;

// The data of an eager tensor that lives on a device (the CUDA backend defines it; opaque here).
// Immutable, like a Tensor's host data: ops make new tensors.
class DeviceData {
 public:
  virtual ~DeviceData() = default;
  virtual Device device() const = 0;
  virtual DType dtype() const = 0;
  virtual const std::vector<int64_t>& sizes() const = 0;
  // The values, copied to the host on first use (waits for the device) and kept.
  virtual const HostTensor& host() const = 0;
};
struct TracedValue;  // the graph value a traced Tensor stands for (src/frontend/trace)

// A handle to a tensor: either a concrete HostTensor (eager mode) or a value of the graph being
// traced on this thread. Copies share the data (like HostTensor); ops never mutate their inputs.
class Tensor {
 public:
  Tensor() = default;  // undefined: used for absent optional operands (bias, mask...)
  // Wraps concrete data (shared, not copied). Always eager, also while tracing: an eager tensor
  // used by a traced op becomes a constant node of the graph.
  static Tensor from_host(HostTensor t);
  // Wraps device data (see DeviceData); ops on such tensors run on that device, one launch each.
  static Tensor from_device(std::shared_ptr<const DeviceData> data);
  // The same values on `device`: to(Device::CUDA) uploads (needs a build with the CUDA backend and
  // a GPU; kiln/cuda.h), to(Device::CPU) downloads; a tensor already there is returned as is.
  Tensor to(Device device) const;
  Device device() const;  // CPU for host and traced tensors
  // Internal: the device data; null for host and traced tensors.
  const std::shared_ptr<const DeviceData>& device_data() const { return device_; }
  // Internal: a traced tensor for a graph value of the active trace.
  static Tensor from_traced(std::shared_ptr<const TracedValue> traced);

  bool defined() const { return traced_ != nullptr || has_host_ || device_ != nullptr; }
  bool is_traced() const { return traced_ != nullptr; }

  DType dtype() const;
  Shape shape() const;  // SymInt dims: symbolic ones (B, T) appear when traced
  SymInt dim(int axis) const;  // negative axes count from the end
  int rank() const;
  SymInt numel() const;
  TensorType type() const;
  // Concrete dims; throws kiln::Error when a dim is symbolic.
  std::vector<int64_t> sizes() const;

  // The concrete data; throws kiln::Error for traced tensors (they have no data until run).
  // For a device tensor: its values copied to the host (waits for the device).
  const HostTensor& host() const;
  // The single element of a one-element eager tensor, as a double.
  double item() const;
  // Internal: the traced value; throws kiln::Error when eager or when the trace has ended.
  const std::shared_ptr<const TracedValue>& traced() const { return traced_; }

  std::string to_string(int max_elems = 8) const;  // "f32[2, 3] {...}" or "traced f32[B, 3] %4"

 private:
  HostTensor host_;
  bool has_host_ = false;
  std::shared_ptr<const DeviceData> device_;
  std::shared_ptr<const TracedValue> traced_;
};

// ---- dispatch: every named function below goes through these ----

// Runs `op` on `inputs`: records a node when any operand is traced (eager operands become
// constants), otherwise runs the eager CPU kernel and records it on the current scoreboard.
// Absent optional operands are passed as undefined Tensors at the end. Ill-typed calls throw
// kiln::Error naming the op and the operand types.
std::vector<Tensor> apply_multi(Op op, const std::vector<Tensor>& inputs, Attrs attrs = {});
// Same for ops with exactly one result.
Tensor apply(Op op, const std::vector<Tensor>& inputs, Attrs attrs = {});

// ---- device backends ----
// How eager ops reach a device: a backend (the CUDA runtime registers one at start-up when it is
// built in) uploads host data and runs one op on device operands. `timed`: the caller redirected
// the scoreboard (ScoreboardScope), so per-kernel device times are wanted even though measuring
// them waits for the device after every op.
struct DeviceBackend {
  std::shared_ptr<const DeviceData> (*upload)(const HostTensor& host) = nullptr;
  std::vector<Tensor> (*run)(Op op, const std::vector<Tensor>& operands, const Attrs& attrs, Scoreboard* sb,
                             bool timed) = nullptr;
};
// Registers the backend of `device` (replacing any earlier one); used by the CUDA runtime.
void register_device_backend(Device device, DeviceBackend backend);

// ---- eager instrumentation ----

// The scoreboard eager ops on this thread record into (a thread-local default one, unless a
// ScoreboardScope redirects it). Never null.
Scoreboard& eager_scoreboard();
// Redirects eager recording on this thread to `sb` while alive (null: record nothing).
class ScoreboardScope {
 public:
  explicit ScoreboardScope(Scoreboard* sb);
  ~ScoreboardScope();
  ScoreboardScope(const ScoreboardScope&) = delete;
  ScoreboardScope& operator=(const ScoreboardScope&) = delete;

 private:
  Scoreboard* previous_;
  bool previous_set_;
};

// ---- factories (record Full / Arange / Random nodes while a trace is active, else run) ----

Tensor scalar(double value, DType dtype = DType::F32);  // rank 0, always eager (a constant)
Tensor full(const Shape& shape, double value, DType dtype = DType::F32);
Tensor zeros(const Shape& shape, DType dtype = DType::F32);
Tensor ones(const Shape& shape, DType dtype = DType::F32);
// start + i*step for i < size.
Tensor arange(const SymInt& size, double start = 0, double step = 1, DType dtype = DType::I64);
// Seeded uniform [low, high) / normal(mean, std): same seed, same values, in every mode.
Tensor rand(const Shape& shape, uint64_t seed, double low = 0, double high = 1,
            DType dtype = DType::F32);
Tensor randn(const Shape& shape, uint64_t seed, double mean = 0, double std = 1,
             DType dtype = DType::F32);
// A literal tensor via the Constant op (eager: a copy; traced: a constant node).
Tensor constant(HostTensor value);

// ---- elementwise unary ----

Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, const std::string& approximate = "none");  // or "tanh"
Tensor silu(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);  // half to even
Tensor sign(const Tensor& x);
Tensor logical_not(const Tensor& x);  // bool
Tensor isnan(const Tensor& x);
Tensor cast(const Tensor& x, DType dtype);
Tensor clamp(const Tensor& x, double min, double max);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor asinh(const Tensor& x);
Tensor acosh(const Tensor& x);
Tensor atanh(const Tensor& x);
Tensor bit_not(const Tensor& x);  // integers
Tensor bit_and(const Tensor& a, const Tensor& b);
Tensor bit_or(const Tensor& a, const Tensor& b);
Tensor bit_xor(const Tensor& a, const Tensor& b);
Tensor bit_shift(const Tensor& a, const Tensor& b, bool left);  // logical for unsigned
Tensor det(const Tensor& x);  // [..., n, n] -> [...]

// ---- elementwise binary (numpy broadcasting; operands share a dtype). A double operand becomes
// a rank-0 constant of the tensor operand's dtype. ----

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, double b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, double b);
// Remainder with the divisor's sign (Python %); c_fmod = true: C fmod (dividend's sign).
Tensor mod(const Tensor& a, const Tensor& b, bool c_fmod = false);
// Comparisons return bool tensors. eq/ne are named functions only: operator== on Tensor is
// deliberately not overloaded, so that `a == b` never silently means "elementwise" in generic
// code (gtest, std::find). The ordering operators below are overloaded.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
// cond ? a : b, three-way broadcasting.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor where(const Tensor& cond, double a, const Tensor& b);

Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, double b);
Tensor operator<=(const Tensor& a, double b);
Tensor operator>(const Tensor& a, double b);
Tensor operator>=(const Tensor& a, double b);
// Logical ops on bool tensors (both sides are always evaluated: these are tensor ops).
Tensor operator&&(const Tensor& a, const Tensor& b);
Tensor operator||(const Tensor& a, const Tensor& b);
Tensor operator!(const Tensor& x);

// ---- reductions (empty axes = all axes; negative axes count from the end) ----

Tensor sum(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor max(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor min(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor prod(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t axis = 0, bool keepdim = false);  // i64 indices
Tensor argmin(const Tensor& x, int64_t axis = 0, bool keepdim = false);
// Running sum along axis; exclusive starts at 0, reverse runs from the end.
Tensor cumsum(const Tensor& x, int64_t axis, bool exclusive = false, bool reverse = false);
// The k largest (or smallest) along axis: {values, i64 indices}, ties by lower index.
std::vector<Tensor> topk(const Tensor& x, int64_t k, int64_t axis = -1, bool largest = true,
                         bool sorted = true);
// Stable sort along axis: {values, i64 indices}; ties keep index order, NaN sorts as the largest.
std::vector<Tensor> sort(const Tensor& x, int64_t axis = -1, bool descending = false);
Tensor argsort(const Tensor& x, int64_t axis = -1, bool descending = false);  // sort's indices

// What `sample` does to each row of logits (docs/sampling.md); the defaults leave the distribution
// as it is. temperature 0 is greedy; top_k 0, top_p 1 and min_p 0 are off.
struct SampleOptions {
  double temperature = 1;
  int64_t top_k = 0;
  double top_p = 1, min_p = 0;
  double repetition_penalty = 1, frequency_penalty = 0, presence_penalty = 0;
};
// One i64 token per row of [B, V] logits, drawn reproducibly from (seeds[b], steps[b]) ([B] i64).
// `per_row` optionally overrides options per row, in the op's operand order: temperature [B] f32,
// top_k [B] i64, top_p [B] f32, min_p [B] f32, penalty_ids [B, L] i64 (a prefix of them).
Tensor sample(const Tensor& logits, const Tensor& seeds, const Tensor& steps, const SampleOptions& options = {},
              const std::vector<Tensor>& per_row = {});

// ---- movement ----

// One dim may be -1; symbolic dims (from x.shape()) keep a traced reshape valid for every size.
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor permute(const Tensor& x, std::vector<int64_t> perm);
Tensor transpose(const Tensor& x, int64_t dim_a, int64_t dim_b);  // swaps two axes
Tensor expand(const Tensor& x, const Shape& shape);
// Python-style slices per axis (axes empty: 0, 1, ...; steps empty: all 1).
Tensor slice(const Tensor& x, std::vector<int64_t> starts, std::vector<int64_t> ends,
             std::vector<int64_t> axes = {}, std::vector<int64_t> steps = {});
// x[..., start:end:step, ...] on one axis.
Tensor slice_axis(const Tensor& x, int64_t axis, int64_t start, int64_t end, int64_t step = 1);
Tensor concat(const std::vector<Tensor>& xs, int64_t axis);
// pads = [begin_0, begin_1, ..., end_0, end_1, ...]; mode "constant", "reflect" or "edge".
Tensor pad(const Tensor& x, std::vector<int64_t> pads, const std::string& mode = "constant",
           double value = 0);
Tensor squeeze(const Tensor& x, std::vector<int64_t> axes = {});  // empty: every size-1 dim
Tensor unsqueeze(const Tensor& x, std::vector<int64_t> axes);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
// Cuts x along axis into pieces of the given sizes (the one multi-result op).
std::vector<Tensor> split(const Tensor& x, int64_t axis, std::vector<int64_t> sizes);
Tensor gather(const Tensor& x, const Tensor& indices, int64_t axis = 0);
Tensor gather_elements(const Tensor& x, const Tensor& indices, int64_t axis = 0);
Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index);
// Interpolates to `sizes` (mode "nearest", "linear" or "cubic"; coord_mode as in ONNX Resize).
// The per-axis scale is sizes/input dim, so a resized dim must be static unless it is unchanged.
Tensor resize(const Tensor& x, const Shape& sizes, const std::string& mode = "nearest",
              const std::string& coord_mode = "half_pixel",
              const std::string& nearest_mode = "round_prefer_floor");
Tensor tril(const Tensor& x, int64_t k = 0);
Tensor triu(const Tensor& x, int64_t k = 0);
Tensor shape_of(const Tensor& x);  // the dims as an i64 vector

// ---- contractions and neural-network ops ----

Tensor matmul(const Tensor& a, const Tensor& b);
// NCHW. padding: 2 values (symmetric [h, w]) or 4 ([top, left, bottom, right]). bias optional.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> padding = {0, 0},
              std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1);
// Transposed convolution (the gradient of conv2d); weight is [C, O/groups, kH, kW].
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        std::vector<int64_t> stride = {1, 1},
                        std::vector<int64_t> padding = {0, 0},
                        std::vector<int64_t> output_padding = {0, 0},
                        std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1);
// [N, C, H, W] -> [N, C*kH*kW, OH*OW]: each window element over the output positions, zeros over
// padding (torch.nn.functional.unfold); conv2d(x, w) = matmul(w reshaped [O, C*kH*kW], this).
Tensor im2col(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {1, 1},
              std::vector<int64_t> padding = {0, 0}, std::vector<int64_t> dilation = {1, 1});
// stride empty means stride = kernel (as in PyTorch). padding: 2 or 4 values as for conv2d.
Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0}, std::vector<int64_t> dilation = {1, 1},
                  bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0}, bool ceil_mode = false,
                  bool count_include_pad = false);
Tensor global_avg_pool(const Tensor& x);  // [N, C, H, W] -> [N, C, 1, 1]
Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor log_softmax(const Tensor& x, int64_t axis = -1);
// Normalises over dims axis..end; weight and bias optional (undefined Tensor).
Tensor layer_norm(const Tensor& x, const Tensor& weight = {}, const Tensor& bias = {},
                  int64_t axis = -1, double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const Tensor& weight = {}, int64_t axis = -1, double eps = 1e-6);
// Inference batch norm over channel dim 1.
Tensor batch_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, const Tensor& mean,
                  const Tensor& var, double eps = 1e-5);
// softmax(q k^T * scale + mask) v over [..., T, D]; scale 0 means 1/sqrt(D); mask optional
// (bool: true = keep, or additive of q's dtype); causal masks keys after the query position.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask = {},
                 bool causal = false, double scale = 0);

}  // namespace kiln
