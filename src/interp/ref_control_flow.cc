// Reference kernels of if, loop and scan: they run their sub-graphs with the interpreter itself.
// Why: the oracle for control flow is the plain definition, one sub-graph run per branch or
// iteration, with every result checked against the type the node was given.
#include <cstring>

#include "interp/ref_kernels.h"
#include "kiln/error.h"
#include "kiln/graph.h"

namespace kiln::interp {

namespace {

bool flag(const HostTensor& t) { return t.get_i64(0) != 0; }

// Puts a sub-graph result into a pre-allocated output, checking it has the type's shape.
void store_result(HostTensor& out, HostTensor result, const std::string& what) {
  if (out.is_tensor())
    KILN_CHECK(result.is_tensor() && result.shape() == out.shape() && result.dtype() == out.dtype(), what, " is ",
               result.to_string(2), ", but the node's type gives ", dtype_name(out.dtype()),
               dims_to_string(out.shape()));
  out = std::move(result);
}

struct AxisView {  // a tensor seen as [outer, length, inner] around one axis
  int64_t outer = 1, length = 1, inner = 1;
  AxisView(const std::vector<int64_t>& shape, int axis) {
    for (int d = 0; d < int(shape.size()); ++d) {
      if (d < axis) outer *= shape[size_t(d)];
      else if (d > axis) inner *= shape[size_t(d)];
    }
    length = shape[size_t(axis)];
  }
};

// x[..., index, ...] along `axis`, the axis removed.
HostTensor take_along(const HostTensor& x, int axis, int64_t index) {
  std::vector<int64_t> shape = x.shape();
  AxisView v(shape, axis);
  shape.erase(shape.begin() + axis);
  HostTensor out = HostTensor::empty(x.dtype(), shape);
  size_t block = size_t(v.inner) * size_t(dtype_size(x.dtype()));
  for (int64_t o = 0; o < v.outer; ++o)
    if (block)
      std::memcpy(static_cast<uint8_t*>(out.raw()) + size_t(o) * block,
                  static_cast<const uint8_t*>(x.raw()) + size_t(o * v.length + index) * block, block);
  return out;
}

// dst[..., index, ...] = src along `axis` (src lacks that axis).
void put_along(HostTensor& dst, int axis, int64_t index, const HostTensor& src, const std::string& what) {
  std::vector<int64_t> expect = dst.shape();
  expect.erase(expect.begin() + axis);
  KILN_CHECK(src.is_tensor() && src.shape() == expect && src.dtype() == dst.dtype(), what, " is ", src.to_string(2),
             ", expected ", dtype_name(dst.dtype()), dims_to_string(expect));
  AxisView v(dst.shape(), axis);
  size_t block = size_t(v.inner) * size_t(dtype_size(dst.dtype()));
  for (int64_t o = 0; o < v.outer; ++o)
    if (block)
      std::memcpy(static_cast<uint8_t*>(dst.raw()) + size_t(o * v.length + index) * block,
                  static_cast<const uint8_t*>(src.raw()) + size_t(o) * block, block);
}

int axis_of(const Attrs& attrs, const std::string& name, size_t k, int rank) {
  const auto& v = attrs.get_ints(name);
  return normalize_axis(v.empty() ? 0 : v[k], rank, name.c_str());
}
bool reversed(const Attrs& attrs, const std::string& name, size_t k) {
  const auto& v = attrs.get_ints(name);
  return !v.empty() && v[k] != 0;
}

}  // namespace

void ref_If(const KernelArgs& a) {
  bool take_then = flag(a.in[0]);
  const Graph& branch = a.attrs.get_graph(take_then ? "then_branch" : "else_branch");
  std::vector<HostTensor> captures(a.in.begin() + 1, a.in.end());
  std::vector<HostTensor> results = run(branch, captures);
  for (size_t i = 0; i < a.out.size(); ++i)
    store_result(a.out[i], results[i], str(take_then ? "then_branch" : "else_branch", " output ", i));
}

void ref_Loop(const KernelArgs& a) {
  const Graph& body = a.attrs.get_graph("body");
  size_t carried_count = size_t(a.attrs.get_int("num_carried"));
  size_t scans = a.out.size() - carried_count;
  int64_t trip_count = a.in[0].get_i64(0);
  bool cond = flag(a.in[1]);
  std::vector<HostTensor> carried(a.in.begin() + 2, a.in.begin() + 2 + long(carried_count));
  std::vector<HostTensor> captures(a.in.begin() + 2 + long(carried_count), a.in.end());
  int64_t scan_length = scans ? a.out[carried_count].shape()[0] : -1;
  int64_t i = 0;
  for (; i < trip_count && cond; ++i) {
    KILN_CHECK(scans == 0 || i < scan_length, "the loop runs more than ", scan_length,
               " iterations, the length its scan outputs were typed for (scan_length)");
    std::vector<HostTensor> body_in = {HostTensor::scalar(DType::I64, 0), HostTensor::scalar(DType::Bool, cond)};
    body_in[0].set_i64(0, i);
    body_in.insert(body_in.end(), carried.begin(), carried.end());
    body_in.insert(body_in.end(), captures.begin(), captures.end());
    std::vector<HostTensor> res = run(body, body_in);
    cond = flag(res[0]);
    for (size_t k = 0; k < carried_count; ++k) carried[k] = res[1 + k];
    for (size_t k = 0; k < scans; ++k)
      put_along(a.out[carried_count + k], 0, i, res[1 + carried_count + k], str("iteration ", i, " scan output ", k));
  }
  KILN_CHECK(scans == 0 || i == scan_length, "the loop stopped after ", i, " iterations, but its scan outputs were ",
             "typed for ", scan_length, " (scan_length); a loop whose condition ends it early cannot have scan ",
             "outputs of a fixed length");
  for (size_t k = 0; k < carried_count; ++k) store_result(a.out[k], carried[k], str("carried value ", k));
}

void ref_Scan(const KernelArgs& a) {
  const Graph& body = a.attrs.get_graph("body");
  size_t carried_count = size_t(a.attrs.get_int("num_carried"));
  size_t scanned = size_t(a.attrs.get_int("num_scan_inputs"));
  size_t scans = a.out.size() - carried_count;
  std::vector<HostTensor> carried(a.in.begin(), a.in.begin() + long(carried_count));
  std::vector<HostTensor> captures(a.in.begin() + long(carried_count + scanned), a.in.end());
  std::vector<int> in_axes;
  for (size_t k = 0; k < scanned; ++k)
    in_axes.push_back(axis_of(a.attrs, "scan_input_axes", k, a.in[carried_count + k].rank()));
  int64_t length = a.in[carried_count].shape()[size_t(in_axes[0])];
  for (int64_t t = 0; t < length; ++t) {
    std::vector<HostTensor> body_in = carried;
    for (size_t k = 0; k < scanned; ++k) {
      int64_t at = reversed(a.attrs, "scan_input_directions", k) ? length - 1 - t : t;
      body_in.push_back(take_along(a.in[carried_count + k], in_axes[k], at));
    }
    body_in.insert(body_in.end(), captures.begin(), captures.end());
    std::vector<HostTensor> res = run(body, body_in);
    for (size_t k = 0; k < carried_count; ++k) carried[k] = res[k];
    for (size_t k = 0; k < scans; ++k) {
      HostTensor& out = a.out[carried_count + k];
      int axis = axis_of(a.attrs, "scan_output_axes", k, out.rank());
      int64_t at = reversed(a.attrs, "scan_output_directions", k) ? length - 1 - t : t;
      put_along(out, axis, at, res[carried_count + k], str("iteration ", t, " scan output ", k));
    }
  }
  for (size_t k = 0; k < carried_count; ++k) store_result(a.out[k], carried[k], str("carried value ", k));
}

}  // namespace kiln::interp
