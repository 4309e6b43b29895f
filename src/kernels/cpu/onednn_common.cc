// The shared pieces of the oneDNN wrappers (see onednn_common.h and onednn_post_ops.h).
#include "kernels/cpu/onednn_common.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "kiln/error.h"

namespace kiln::eager::onednn {

namespace {

dnnl::algorithm eltwise_algorithm(PostOp::Kind k) {
  switch (k) {
    case PostOp::kRelu: return dnnl::algorithm::eltwise_relu;
    case PostOp::kClip: return dnnl::algorithm::eltwise_clip_v2;
    case PostOp::kLinear: return dnnl::algorithm::eltwise_linear;
    case PostOp::kLogistic: return dnnl::algorithm::eltwise_logistic;
    case PostOp::kTanh: return dnnl::algorithm::eltwise_tanh;
    case PostOp::kExp: return dnnl::algorithm::eltwise_exp;
    case PostOp::kAbs: return dnnl::algorithm::eltwise_abs;
    case PostOp::kSqrt: return dnnl::algorithm::eltwise_sqrt;
    case PostOp::kGeluErf: return dnnl::algorithm::eltwise_gelu_erf;
    case PostOp::kGeluTanh: return dnnl::algorithm::eltwise_gelu_tanh;
    case PostOp::kSwish: return dnnl::algorithm::eltwise_swish;
    case PostOp::kHardSwish: return dnnl::algorithm::eltwise_hardswish;
    default: return dnnl::algorithm::undef;
  }
}

dnnl::algorithm binary_algorithm(PostOp::Kind k) {
  switch (k) {
    case PostOp::kBinaryAdd: return dnnl::algorithm::binary_add;
    case PostOp::kBinarySub: return dnnl::algorithm::binary_sub;
    case PostOp::kBinaryMul: return dnnl::algorithm::binary_mul;
    case PostOp::kBinaryDiv: return dnnl::algorithm::binary_div;
    case PostOp::kBinaryMax: return dnnl::algorithm::binary_max;
    case PostOp::kBinaryMin: return dnnl::algorithm::binary_min;
    default: return dnnl::algorithm::undef;
  }
}

}  // namespace

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

bool supports_dtype(DType d) {
  if (d == DType::F32) return true;
  return d == DType::BF16 && dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
}

int64_t channel_block() {
  static const int64_t block = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core ? 16 : 8;
  return block;
}

bool channel_blocks_wanted(bool planned) {
  static const std::string forced = [] {
    const char* v = std::getenv("KILN_ONEDNN_CONV_LAYOUT");
    return std::string(v ? v : "");
  }();
  if (forced == "any") return false;
  if (forced == "blocked") return true;
  return planned;
}

dnnl::post_ops make_post_ops(const std::vector<PostOp>& ops, const dnnl::memory::desc& binary_md) {
  dnnl::post_ops chain;
  for (const PostOp& p : ops) {
    if (p.kind == PostOp::kSum) chain.append_sum(p.alpha);
    else if (p.is_binary()) chain.append_binary(binary_algorithm(p.kind), binary_md);
    else chain.append_eltwise(1.0f, eltwise_algorithm(p.kind), p.alpha, p.beta);
  }
  return chain;
}

void bind_binary_operands(const std::vector<PostOp>& ops, std::vector<dnnl::memory>& mems,
                          const std::vector<const void*>& operands, std::unordered_map<int, dnnl::memory>& args) {
  KILN_CHECK(operands.size() == mems.size(), "oneDNN: ", mems.size(), " broadcast post-op operands expected, got ",
             operands.size());
  for (size_t i = 0, k = 0; i < ops.size(); ++i) {
    if (!ops[i].is_binary()) continue;
    mems[k].set_data_handle(const_cast<void*>(operands[k]));
    args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(int(i)) | DNNL_ARG_SRC_1] = mems[k];
    ++k;
  }
}

void Io::init(const dnnl::memory::desc& xp, const dnnl::memory::desc& yp, const dnnl::memory::desc& x_desc,
              const dnnl::memory::desc& y_desc) {
  const dnnl::engine& eng = cpu_engine();
  x_plain = xp;
  y_plain = yp;
  x_user = dnnl::memory(x_plain, eng, DNNL_MEMORY_NONE);
  y_user = dnnl::memory(y_plain, eng, DNNL_MEMORY_NONE);
  residual_user = dnnl::memory(y_plain, eng, DNNL_MEMORY_NONE);
  x_mem = x_desc == x_plain ? x_user : dnnl::memory(x_desc, eng);
  y_mem = y_desc == y_plain ? y_user : dnnl::memory(y_desc, eng);
  if (!(x_mem == x_user)) x_in = dnnl::reorder(x_user, x_mem);
  if (!(y_mem == y_user)) {
    y_out = dnnl::reorder(y_mem, y_user);
    residual_in = dnnl::reorder(residual_user, y_mem);
  }
}

void Io::begin(dnnl::stream& s, const void* x, void* y) {
  x_user.set_data_handle(const_cast<void*>(x));
  y_user.set_data_handle(y);
  if (!x_fed && !(x_mem == x_user)) x_in.execute(s, x_user, x_mem);
}

void Io::start_from_residual(dnnl::stream& s, const void* residual, void* y) {
  if (residual_fed) {  // the same blocked layout as our destination: a copy, not a reorder
    std::memcpy(y_mem.get_data_handle(), residual_fed.get_data_handle(), y_mem.get_desc().get_size());
  } else if (residual) {
    residual_user.set_data_handle(const_cast<void*>(residual));
    if (!(y_mem == y_user)) residual_in.execute(s, residual_user, y_mem);
    else if (residual != y) std::memcpy(y, residual, y_plain.get_size());
  }
}

void Io::end(dnnl::stream& s) {
  if (!y_kept && !(y_mem == y_user)) y_out.execute(s, y_mem, y_user);
}

namespace {
// OR over the buffer of "exponent all ones", branch-free so that it vectorises.
template <typename Bits> bool no_all_ones_exponent(const void* data, int64_t count, Bits mask) {
  const Bits* p = static_cast<const Bits*>(data);
  uint32_t bad = 0;
#pragma omp parallel for reduction(| : bad) schedule(static) if (count > (1 << 16))
  for (int64_t i = 0; i < count; ++i) bad |= uint32_t((p[i] & mask) == mask);
  return bad == 0;
}
}  // namespace

bool all_finite(const void* data, int64_t count, DType dt) {
  switch (dt) {
    case DType::F32: return no_all_ones_exponent<uint32_t>(data, count, 0x7f800000u);
    case DType::BF16: return no_all_ones_exponent<uint16_t>(data, count, 0x7f80u);
    case DType::F16: return no_all_ones_exponent<uint16_t>(data, count, 0x7c00u);
    case DType::F64: return no_all_ones_exponent<uint64_t>(data, count, 0x7ff0000000000000ull);
    default: return true;
  }
}

namespace {
int64_t elements_of(const dnnl::memory& m, DType dt) {
  return int64_t(m.get_desc().get_size() / (dt == DType::F32 ? 4 : 2));
}
}  // namespace

bool Io::sources_finite(const void* x, const void* residual, DType dt) const {
  if (!all_finite(x_fed ? x_mem.get_data_handle() : x, x_fed ? elements_of(x_mem, dt) : elements_of(x_user, dt), dt))
    return false;
  if (residual_fed) return all_finite(residual_fed.get_data_handle(), elements_of(residual_fed, dt), dt);
  return !residual || all_finite(residual, elements_of(y_user, dt), dt);
}

void Io::materialize_plain_sources(dnnl::stream& s, const void* x, const void* residual) {
  if (x_fed) {
    dnnl::memory plain(x_plain, cpu_engine(), const_cast<void*>(x));
    dnnl::reorder(x_mem, plain).execute(s, x_mem, plain);
  }
  if (residual_fed && residual) {
    dnnl::memory plain(y_plain, cpu_engine(), const_cast<void*>(residual));
    dnnl::reorder(residual_fed, plain).execute(s, residual_fed, plain);
  }
  s.wait();
}

void Io::adopt_plain_output(dnnl::stream& s, const void* y) {
  if (!y_kept || y_mem == y_user) return;
  residual_user.set_data_handle(const_cast<void*>(y));
  residual_in.execute(s, residual_user, y_mem);
  s.wait();
}

std::optional<Geometry> geometry_of(const dnnl::memory::desc& d) {
  const dnnl_memory_desc_t& m = d.data;
  if (m.format_kind != dnnl_blocked || m.ndims != 4 || m.offset0 != 0) return std::nullopt;
  const dnnl_blocking_desc_t& b = m.format_desc.blocking;
  Geometry g;
  for (int i = 0; i < 4; ++i) g.stride[i] = b.strides[i];
  if (b.inner_nblks == 1 && b.inner_idxs[0] == 1) g.block = b.inner_blks[0];
  else if (b.inner_nblks != 0) return std::nullopt;
  return g;
}

BlockedIo::BlockedIo() : io_(std::make_unique<Io>()) {}
BlockedIo::~BlockedIo() = default;

bool BlockedIo::can_feed_source(const BlockedIo& consumer) const {
  const dnnl::memory::desc d = io_->y_mem.get_desc();
  return !(d == io_->y_plain) && d == consumer.io_->x_mem.get_desc();
}

bool BlockedIo::can_feed_residual(const BlockedIo& consumer) const {
  const dnnl::memory::desc d = io_->y_mem.get_desc();
  return !(d == io_->y_plain) && d == consumer.io_->y_mem.get_desc();
}

void BlockedIo::feed_source(BlockedIo& consumer) const {
  KILN_CHECK(can_feed_source(consumer), "oneDNN: blocked layouts differ");
  consumer.io_->x_mem = io_->y_mem;  // a shared handle to our result's memory
  consumer.io_->x_fed = true;
}

void BlockedIo::feed_residual(BlockedIo& consumer) const {
  KILN_CHECK(can_feed_residual(consumer), "oneDNN: blocked layouts differ");
  consumer.io_->residual_fed = io_->y_mem;
}

void BlockedIo::keep_output_blocked() { io_->y_kept = true; }

std::string post_op_name(const PostOp& p) {
  switch (p.kind) {
    case PostOp::kRelu: return "relu";
    case PostOp::kClip: return str("clip(", p.alpha, ", ", p.beta, ")");
    case PostOp::kLinear: return str("linear(", p.alpha, "x + ", p.beta, ")");
    case PostOp::kLogistic: return "sigmoid";
    case PostOp::kTanh: return "tanh";
    case PostOp::kExp: return "exp";
    case PostOp::kAbs: return "abs";
    case PostOp::kSqrt: return "sqrt";
    case PostOp::kGeluErf: return "gelu";
    case PostOp::kGeluTanh: return "gelu(tanh)";
    case PostOp::kSwish: return "silu";
    case PostOp::kHardSwish: return "hardswish";
    case PostOp::kBinaryAdd: return "add per channel";
    case PostOp::kBinarySub: return "sub per channel";
    case PostOp::kBinaryMul: return "mul per channel";
    case PostOp::kBinaryDiv: return "div per channel";
    case PostOp::kBinaryMax: return "max per channel";
    case PostOp::kBinaryMin: return "min per channel";
    case PostOp::kSum: return p.alpha == 1 ? "residual add" : str("residual add x", p.alpha);
  }
  return "?";
}

}  // namespace kiln::eager::onednn
