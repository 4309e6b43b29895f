// Reference kernels of the sequence and optional ops. Why: containers are lists of HostTensors
// on the host (HostTensor::sequence / optional); these kernels only rearrange the list.
#include "interp/ref_kernels.h"
#include "kiln/error.h"
#include "kiln/graph.h"

namespace kiln::interp {

void ref_SequenceConstruct(const KernelArgs& a) { a.out[0] = HostTensor::sequence(a.in[0].dtype(), a.in); }

void ref_SequenceEmpty(const KernelArgs& a) { a.out[0] = HostTensor::sequence(a.attrs.get_dtype("dtype"), {}); }

void ref_SequenceAt(const KernelArgs& a) {
  int64_t i = a.attrs.get_int("index");
  KILN_CHECK(i >= 0 && i < int64_t(a.in[0].items().size()), "sequence index ", i, " is outside [0, ",
             a.in[0].items().size(), ")");
  a.out[0] = a.in[0].items()[size_t(i)];
}

void ref_SequenceInsert(const KernelArgs& a) {
  std::vector<HostTensor> items = a.in[0].items();
  int64_t p = a.attrs.get_int("position");
  KILN_CHECK(p >= 0 && p <= int64_t(items.size()), "insert position ", p, " is outside [0, ", items.size(), "]");
  items.insert(items.begin() + p, a.in[1]);
  a.out[0] = HostTensor::sequence(a.in[0].dtype(), std::move(items));
}

void ref_SequenceErase(const KernelArgs& a) {
  std::vector<HostTensor> items = a.in[0].items();
  int64_t p = a.attrs.get_int("position");
  KILN_CHECK(p >= 0 && p < int64_t(items.size()), "erase position ", p, " is outside [0, ", items.size(), ")");
  items.erase(items.begin() + p);
  a.out[0] = HostTensor::sequence(a.in[0].dtype(), std::move(items));
}

void ref_OptionalWrap(const KernelArgs& a) { a.out[0] = HostTensor::optional(a.in[0].dtype(), {a.in[0]}); }

void ref_OptionalNone(const KernelArgs& a) {
  a.out[0] = HostTensor::optional(parse_type(a.attrs.get_string("type")).dtype, {});
}

void ref_OptionalHas(const KernelArgs& a) { a.out[0].set_i64(0, a.in[0].items().empty() ? 0 : 1); }

void ref_OptionalGet(const KernelArgs& a) {
  KILN_CHECK(!a.in[0].items().empty(), "optional_get of an empty optional");
  a.out[0] = a.in[0].items()[0];
}

}  // namespace kiln::interp
