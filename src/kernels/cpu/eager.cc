// Eager execution of one op: type inference with the op's shape rule, allocation, the fast kernel
// (or the reference one), and one scoreboard record with dispatch time kept apart from kernel
// time. Why: this is the one-kernel-per-op baseline every Kiln executor is measured against.
#include "kernels/cpu/eager.h"

#include <cblas.h>

#include <chrono>

#include "kernels/cpu/cost.h"
#include "kernels/cpu/cpu_common.h"
#include "kiln/graph.h"

namespace kiln::eager {

namespace {

using Clock = std::chrono::steady_clock;
double micros(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

const detail::KernelFamily* const kFamilies[] = {
    &detail::kElementwiseUnaryFamily, &detail::kElementwiseBinaryFamily, &detail::kReduceFamily,
    &detail::kMatmulFamily,           &detail::kSoftmaxNormFamily,       &detail::kMovementFamily,
    &detail::kConvFamily,             &detail::kAttentionFamily,         &detail::kPoolFamily,
    &detail::kTopKFamily,            &detail::kSortFamily,              &detail::kSampleFamily,
};

// The dtype that selects a kernel: the data operand's (where's branches, not its condition), or
// the output's for sources.
DType kernel_dtype(Op op, const std::vector<HostTensor>& inputs, const std::vector<TensorType>& outs) {
  if (op == Op::Where && inputs.size() > 1) return inputs[1].dtype();
  if (!inputs.empty()) return inputs[0].dtype();
  return outs.empty() ? DType::F32 : outs[0].dtype;
}

const detail::KernelFamily* find_family(Op op, DType dtype) {
  for (const detail::KernelFamily* family : kFamilies)
    if (family->supports(op, dtype)) return family;
  return nullptr;
}

void check_operand_count(const OpInfo& info, size_t n, const std::string& where) {
  int count = int(n);
  bool ok = count >= info.min_operands && (info.max_operands < 0 || count <= info.max_operands);
  KILN_CHECK(ok, where, ": expects ",
             info.max_operands < 0 ? str("at least ", info.min_operands)
             : info.min_operands == info.max_operands
                 ? str(info.min_operands)
                 : str(info.min_operands, " to ", info.max_operands),
             " operands, got ", n);
}

const int kDefaultThreads = omp_get_max_threads();

}  // namespace

bool has_fast_kernel(Op op, DType dtype) { return find_family(op, dtype) != nullptr; }

std::vector<HostTensor> run_op(Op op, const Attrs& attrs, const std::vector<HostTensor>& inputs,
                               Scoreboard* sb, KernelUsed* used) {
  const Clock::time_point start = Clock::now();
  const OpInfo& info = op_info(op);
  const std::string where = str("eager op '", info.name, "'");
  check_operand_count(info, inputs.size(), where);
  for (size_t i = 0; i < inputs.size(); ++i)
    KILN_CHECK(inputs[i].defined(), where, ": input ", i, " (", info.operands[std::min(i, info.operands.size() - 1)].name,
               ") is an undefined tensor");
  Attrs full = Graph::complete_attrs(op, attrs, where);
  std::vector<TensorType> in_types;
  in_types.reserve(inputs.size());
  for (const HostTensor& t : inputs) in_types.push_back(TensorType{t.dtype(), to_shape(t.shape()), Device::CPU});
  InferCtx ctx{op, in_types, full, nullptr, where};
  std::vector<TensorType> out_types = info.shape_fn(ctx);

  const DType dtype = kernel_dtype(op, inputs, out_types);
  const detail::KernelFamily* family = find_family(op, dtype);
  std::vector<HostTensor> outs;
  outs.reserve(out_types.size());
  // Views return the input's storage under the new shape: nothing to allocate or copy.
  const bool view = family && detail::is_storage_view(op);
  if (!view)
    for (const TensorType& t : out_types) outs.push_back(HostTensor::empty(t.dtype, t.static_shape()));

  interp::KernelArgs args{op, full, inputs, outs};
  const Clock::time_point kernel_start = Clock::now();
  detail::Ran ran = detail::Ran::kNotHandled;
  try {
    if (view) {
      outs.push_back(inputs[0].reshaped(out_types[0].static_shape()));
      ran = detail::Ran::kView;
    } else {
      if (family) ran = family->run(args);
      if (ran == detail::Ran::kNotHandled) interp::run_reference_kernel(args);
    }
  } catch (const Error& e) {
    throw Error(str(where, ": ", e.what()));
  }
  const Clock::time_point kernel_end = Clock::now();
  if (used)
    *used = ran == detail::Ran::kNotHandled ? KernelUsed::kReference
            : ran == detail::Ran::kView     ? KernelUsed::kView
                                            : KernelUsed::kFast;

  if (sb) {
    KernelRecord r;
    r.name = std::string(info.name);
    switch (ran) {
      case detail::Ran::kNotHandled: r.name += "(reference)"; break;
      case detail::Ran::kOpenBlas: r.name += "(openblas)"; break;
      case detail::Ran::kView: r.name += "(view)"; break;
      case detail::Ran::kNative: break;
    }
    r.source_ops = {std::string(info.name)};
    if (ran != detail::Ran::kView) {
      for (const HostTensor& t : inputs) r.bytes_read += int64_t(t.nbytes());
      for (const HostTensor& t : outs) r.bytes_written += int64_t(t.nbytes());
    }
    r.flops = detail::estimate_flops(op, full, inputs, outs);
    r.time_us = micros(kernel_start, kernel_end);
    sb->add(std::move(r));
    sb->add_dispatch_us(micros(start, Clock::now()) - micros(kernel_start, kernel_end));
  }
  return outs;
}

void set_num_threads(int n) {
  int threads = n > 0 ? n : kDefaultThreads;
  omp_set_num_threads(threads);
  // GEMMs are split over the OpenMP team (gemm.h); OpenBLAS's own pool stays idle.
  openblas_set_num_threads(1);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace kiln::eager
