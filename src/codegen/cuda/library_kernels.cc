// Which ops run as CUDA library kernels, in which dtypes, and each launch's parameters once the
// dims are bound (see library_kernels.h). The kernels' source is library_kernel_source.cc; the
// parameter layout of each kernel (p[0], p[1]...) is written beside both.
#include "codegen/cuda/library_kernels.h"

#include <algorithm>
#include <cstring>

#include "interp/resize_taps.h"
#include "kiln/error.h"
#include "kiln/host_tensor.h"

namespace kiln::codegen::cuda {

namespace {

enum class Family { kMovement, kOrdered, kFloat };

struct LibOp {
  Op op;
  const char* base;  // kernel name: kiln_lib_<base>_<dtype or bytes>[_<index dtype>]
  Family family;
};

// The ops with a library kernel. Movement kernels copy elements by their size (any dtype of
// 1, 2, 4 or 8 bytes); ordered ones compare or add values (floats and integers); float ones
// compute in float (f32, f16, bf16) or double (f64).
const LibOp kLibOps[] = {
    {Op::Gather, "gather", Family::kMovement},
    {Op::GatherElements, "gather_elements", Family::kMovement},
    {Op::Concat, "concat", Family::kMovement},
    {Op::Pad, "pad", Family::kMovement},
    {Op::Tril, "triangle", Family::kMovement},
    {Op::Triu, "triangle", Family::kMovement},
    {Op::ArgMax, "argreduce", Family::kOrdered},
    {Op::ArgMin, "argreduce", Family::kOrdered},
    {Op::CumSum, "cumsum", Family::kOrdered},
    {Op::TopK, "topk", Family::kOrdered},
    {Op::MaxPool2d, "maxpool", Family::kOrdered},
    {Op::AvgPool2d, "avgpool", Family::kFloat},
    {Op::GlobalAvgPool, "global_avgpool", Family::kFloat},
    {Op::Conv2d, "conv2d", Family::kFloat},
    {Op::Conv2d, "dwconv2d", Family::kFloat},       // depthwise: is_depthwise_conv
    {Op::Conv2d, "dwconv2d_nhwc", Family::kFloat},  // depthwise, layout "NHWC"
    {Op::ConvTranspose2d, "conv_transpose2d", Family::kFloat},
    {Op::Im2Col, "im2col", Family::kMovement},
    {Op::Det, "det", Family::kFloat},
    {Op::Resize, "resize", Family::kOrdered},
};

const LibOp* lib_op(Op op) {
  for (const LibOp& l : kLibOps)
    if (l.op == op) return &l;
  return nullptr;
}

bool is_gpu_float(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16; }

bool family_takes(Family f, DType t) {
  if (t == DType::Str || is_narrow(t)) return false;
  switch (f) {
    case Family::kMovement: return true;
    case Family::kOrdered: return is_gpu_float(t) || is_integer(t);
    case Family::kFloat: return is_gpu_float(t);
  }
  return false;
}

std::string family_dtypes(Family f) {
  switch (f) {
    case Family::kMovement: return "any dtype of 1, 2, 4 or 8 bytes";
    case Family::kOrdered: return "f32, f64, f16, bf16 and the integer types";
    case Family::kFloat: return "f32, f64, f16 and bf16";
  }
  return "";
}

// The dtype a node's kernel is chosen by: its data operand's.
DType data_dtype(const Node& n) { return n.inputs[0]->type.dtype; }

std::string type_token(const LibOp& l, DType t) {
  return l.family == Family::kMovement ? str("b", dtype_size(t)) : std::string(dtype_name(t));
}

std::string kernel_name(const Node& n) {
  const LibOp& l = *lib_op(n.op);
  const char* base = !is_depthwise_conv(n) ? l.base : is_channels_last(n) ? "dwconv2d_nhwc" : "dwconv2d";
  std::string name = str("kiln_lib_", base, "_", type_token(l, data_dtype(n)));
  if (n.op == Op::Gather || n.op == Op::GatherElements) name += str("_", dtype_name(n.inputs[1]->type.dtype));
  return name;
}

std::vector<int64_t> dims_of(const Value* v, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> out;
  for (const SymInt& d : v->type.shape) out.push_back(d.evaluate(dims));
  return out;
}

int64_t prod(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < v.size(); ++i) p *= v[i];
  return p;
}

int axis_of(const Node& n, int rank) {
  int64_t a = n.attrs.get_int("axis");
  if (a < 0) a += rank;
  KILN_CHECK(a >= 0 && a < std::max(rank, 1), n.describe(), ": axis ", n.attrs.get_int("axis"), " out of range for rank ", rank);
  return int(a);
}

LibraryLaunch launch_for(const Node& n, int64_t points, std::vector<int64_t> params) {
  LibraryLaunch l;
  l.kernel = kernel_name(n);
  l.inputs.assign(n.inputs.begin(), n.inputs.end());
  l.outputs.assign(n.outputs.begin(), n.outputs.end());
  l.params = std::move(params);
  l.points = points;
  KILN_ASSERT(l.params.size() <= size_t(kLibMaxParams));
  return l;
}

// p: outer, n (the axis), count of indices, inner; points cover the output and every index (each
// index is checked even where the output is empty, as the reference does).
std::vector<LibraryLaunch> plan_gather(const Node& n, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> x = dims_of(n.inputs[0], dims);
  const int64_t nidx = n.inputs[1]->type.numel().evaluate(dims);
  const int axis = axis_of(n, int(x.size()));
  const int64_t outer = prod(x, 0, size_t(axis)), inner = prod(x, size_t(axis) + 1, x.size());
  return {launch_for(n, std::max(outer * nidx * inner, nidx), {outer, x[size_t(axis)], nidx, inner})};
}

// p: rank, axis, numel; out dims at p[3..10], x strides at p[11..18].
std::vector<LibraryLaunch> plan_gather_elements(const Node& n, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> x = dims_of(n.inputs[0], dims), idx = dims_of(n.inputs[1], dims);
  const int rank = int(x.size()), axis = axis_of(n, rank);
  for (int d = 0; d < rank; ++d)
    KILN_CHECK(d == axis || idx[size_t(d)] <= x[size_t(d)], n.describe(), ": gather_elements indices dim ", d, " (",
               idx[size_t(d)], ") exceeds the data's dim (", x[size_t(d)], ")");
  std::vector<int64_t> p(19, 1);
  p[0] = rank, p[1] = axis, p[2] = prod(idx, 0, idx.size());
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    p[size_t(3 + d)] = idx[size_t(d)];
    p[size_t(11 + d)] = stride;
    stride *= x[size_t(d)];
  }
  p.push_back(x.empty() ? 1 : x[size_t(axis)]);  // p[19]: the axis' length
  return {launch_for(n, p[2], p)};
}

// One launch per up to kLibMaxInputs operands. p: outer, out_row (the output's axis * inner),
// operands, chunk_offset (where this launch's columns start), chunk_row (its columns), then each
// operand's row length at p[5..12] and its offset inside the chunk at p[13..20].
std::vector<LibraryLaunch> plan_concat(const Node& n, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> out = dims_of(n.outputs[0], dims);
  const int axis = axis_of(n, int(out.size()));
  const int64_t outer = prod(out, 0, size_t(axis)), inner = prod(out, size_t(axis) + 1, out.size());
  const int64_t out_row = out[size_t(axis)] * inner;
  std::vector<LibraryLaunch> launches;
  int64_t offset = 0;
  for (size_t first = 0; first < n.inputs.size(); first += kLibMaxInputs) {
    const size_t count = std::min(n.inputs.size() - first, size_t(kLibMaxInputs));
    std::vector<int64_t> p(21, 0);
    p[0] = outer, p[1] = out_row, p[2] = int64_t(count), p[3] = offset;
    int64_t chunk = 0;
    for (size_t j = 0; j < count; ++j) {
      const int64_t row = n.inputs[first + j]->type.shape[size_t(axis)].evaluate(dims) * inner;
      p[5 + j] = row;
      p[13 + j] = chunk;
      chunk += row;
    }
    p[4] = chunk;
    LibraryLaunch l = launch_for(n, outer * chunk, p);
    l.inputs.assign(n.inputs.begin() + long(first), n.inputs.begin() + long(first + count));
    launches.push_back(std::move(l));
    offset += chunk;
  }
  return launches;
}

// The bits of `value` in dtype t (the fill of constant padding), as the reference converts it.
int64_t value_bits(double value, DType t) {
  HostTensor one = HostTensor::zeros(t, {1});
  one.set_f64(0, value);
  int64_t bits = 0;
  std::memcpy(&bits, one.raw(), dtype_size(t));
  return bits;
}

// p: rank, numel, out dims p[2..9], x dims p[10..17], begin pads p[18..25], mode (0 constant,
// 1 edge, 2 reflect), the fill's bits.
std::vector<LibraryLaunch> plan_pad(const Node& n, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> x = dims_of(n.inputs[0], dims), out = dims_of(n.outputs[0], dims);
  const std::vector<int64_t>& pads = n.attrs.get_ints("pads");
  const std::string& mode = n.attrs.get_string("mode");
  const int rank = int(x.size());
  std::vector<int64_t> p(28, 1);
  p[0] = rank, p[1] = prod(out, 0, out.size());
  p[26] = mode == "edge" ? 1 : mode == "reflect" ? 2 : 0;
  p[27] = value_bits(n.attrs.get_float("value"), data_dtype(n));
  for (int d = 0; d < rank; ++d) {
    const int64_t dim = x[size_t(d)], before = pads[size_t(d)], after = pads[size_t(d + rank)];
    if (p[1] > 0 && (before > 0 || after > 0)) {
      if (p[26] == 1) KILN_CHECK(dim > 0, n.describe(), ": edge padding of empty dim ", d);
      if (p[26] == 2)
        KILN_CHECK(before < dim && after < dim, n.describe(), ": reflect padding of dim ", d, " (size ", dim,
                   ") must be smaller than the dim");
    }
    p[size_t(2 + d)] = out[size_t(d)];
    p[size_t(10 + d)] = dim;
    p[size_t(18 + d)] = before;
  }
  return {launch_for(n, p[1], p)};
}

// p: numel, rows, cols, k, keep_lower.
std::vector<LibraryLaunch> plan_triangle(const Node& n, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> x = dims_of(n.inputs[0], dims);
  const int64_t numel = prod(x, 0, x.size());
  return {launch_for(n, numel, {numel, x[x.size() - 2], x.back(), n.attrs.get_int("k"), n.op == Op::Tril ? 1 : 0})};
}

// outer, length and inner of x around `axis`.
std::vector<int64_t> around_axis(const std::vector<int64_t>& x, int axis) {
  return {prod(x, 0, size_t(axis)), x.empty() ? 1 : x[size_t(axis)], prod(x, size_t(axis) + 1, x.size())};
}

// p: outer, len, inner, want_max.
std::vector<LibraryLaunch> plan_argreduce(const Node& n, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> x = dims_of(n.inputs[0], dims);
  std::vector<int64_t> p = around_axis(x, axis_of(n, int(x.size())));
  KILN_CHECK(p[1] > 0 || p[0] * p[2] == 0, n.describe(), ": ", op_name(n.op), " over an empty axis");
  p.push_back(n.op == Op::ArgMax ? 1 : 0);
  return {launch_for(n, p[0] * p[2], p)};
}

// p: outer, len, inner, exclusive, reverse.
std::vector<LibraryLaunch> plan_cumsum(const Node& n, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> x = dims_of(n.inputs[0], dims);
  std::vector<int64_t> p = around_axis(x, axis_of(n, int(x.size())));
  p.push_back(n.attrs.get_int("exclusive") != 0);
  p.push_back(n.attrs.get_int("reverse") != 0);
  return {launch_for(n, p[0] * p[2], p)};
}

// p: outer, len, inner, k, largest.
std::vector<LibraryLaunch> plan_topk(const Node& n, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> x = dims_of(n.inputs[0], dims);
  std::vector<int64_t> p = around_axis(x, axis_of(n, int(x.size())));
  const int64_t k = n.attrs.get_int("k");
  KILN_CHECK(k <= p[1], n.describe(), ": topk k = ", k, " is larger than the dim (", p[1], ")");
  p.push_back(k);
  p.push_back(n.attrs.get_int("largest") != 0);
  return {launch_for(n, k > 0 ? p[0] * p[2] : 0, p)};
}

// p: NC, H, W, OH, OW, kh, kw, sh, sw, pad top, left, bottom, right, dh, dw, count_include_pad.
std::vector<LibraryLaunch> plan_pool(const Node& n, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> x = dims_of(n.inputs[0], dims), out = dims_of(n.outputs[0], dims);
  const auto& k = n.attrs.get_ints("kernel");
  const auto& s = n.attrs.get_ints("strides");
  const auto& pad = n.attrs.get_ints("pads");
  std::vector<int64_t> d = n.op == Op::MaxPool2d ? n.attrs.get_ints("dilations") : std::vector<int64_t>{1, 1};
  const int64_t count_include_pad = n.op == Op::AvgPool2d ? n.attrs.get_int("count_include_pad") : 0;
  std::vector<int64_t> p = {x[0] * x[1], x[2], x[3], out[2], out[3], k[0], k[1], s[0], s[1],
                            pad[0], pad[1], pad[2], pad[3], d[0], d[1], count_include_pad};
  return {launch_for(n, p[0] * p[3] * p[4], p)};
}

// p: NC, spatial (the product of the dims after the first two).
std::vector<LibraryLaunch> plan_global_avgpool(const Node& n, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> x = dims_of(n.inputs[0], dims);
  const int64_t nc = prod(x, 0, 2);
  return {launch_for(n, nc, {nc, prod(x, 2, x.size())})};
}

}  // namespace

DepthwiseTile plan_depthwise_tile(int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh,
                                  int64_t dw, int64_t element_bytes) {
  DepthwiseTile t;
  if (oh <= 0 || ow <= 0) return t;
  const int64_t budget = kDepthwiseSharedBytes / element_bytes;  // staged elements a block holds
  const int64_t width = (ow - 1) * sw + (kw - 1) * dw + 1;
  auto staged_rows = [&](int64_t rows) { return (rows - 1) * sh + (kh - 1) * dh + 1; };
  // About a column strip per thread: as many strips of kDepthwiseRows rows as fit 256 threads
  // across the output width, no more than the plane has.
  int64_t strips = std::clamp<int64_t>(kDepthwiseThreads / ow, 1, (oh + kDepthwiseRows - 1) / kDepthwiseRows);
  while (strips > 1 && staged_rows(strips * kDepthwiseRows) * width + kh * kw > budget) --strips;
  const int64_t per_plane = staged_rows(strips * kDepthwiseRows) * width + kh * kw;
  if (per_plane > budget) return t;  // too wide to stage: the untiled form
  t.rows_per_band = strips * kDepthwiseRows;
  t.staged_width = width;
  t.staged_rows = staged_rows(t.rows_per_band);
  // Small planes (7x7): several per block, so the block's threads have work.
  t.planes = std::clamp<int64_t>(kDepthwiseThreads / (strips * ow), 1, budget / per_plane);
  t.bands = (oh + t.rows_per_band - 1) / t.rows_per_band;
  return t;
}

namespace {

// p: N, C, H, W, O, Cg (w's dim 1), KH, KW, OH, OW, sh, sw, pad top, pad left, dh, dw, groups,
// has_bias. Transposed: Og (w's dim 1) in place of Cg.
std::vector<LibraryLaunch> plan_conv(const Node& n, const std::map<std::string, int64_t>& dims, bool tiled_depthwise) {
  std::vector<int64_t> x = dims_of(n.inputs[0], dims), w = dims_of(n.inputs[1], dims), out = dims_of(n.outputs[0], dims);
  if (is_channels_last(n)) {  // the same parameters, read from [N, H, W, C]
    x = {x[0], x[3], x[1], x[2]};
    out = {out[0], out[3], out[1], out[2]};
  }
  const auto& s = n.attrs.get_ints("strides");
  const auto& pad = n.attrs.get_ints("pads");
  const auto& d = n.attrs.get_ints("dilations");
  const int64_t groups = n.attrs.get_int("groups");
  KILN_CHECK(groups > 0 && x[1] % groups == 0 && out[1] % groups == 0, n.describe(), ": channels do not divide into ",
             groups, " groups");
  if (n.op == Op::Conv2d)
    KILN_CHECK(x[1] == w[1] * groups, n.describe(), ": conv2d channels do not divide into ", groups, " groups");
  std::vector<int64_t> p = {x[0], x[1], x[2], x[3], out[1], w[1], w[2], w[3], out[2], out[3],
                            s[0], s[1], pad[0], pad[1], d[0], d[1], groups, n.inputs.size() > 2 ? 1 : 0};
  if (!is_depthwise_conv(n)) return {launch_for(n, prod(out, 0, out.size()), p)};
  if (is_channels_last(n)) {  // dwconv2d_nhwc: a block per (32 channels, image, strip of output rows)
    KILN_CHECK(x[2] * x[3] * x[1] <= INT32_MAX && w[2] * w[3] <= kDepthwiseNhwcMaxTaps, n.describe(),
               ": a channels-last depthwise image over 2^31 elements or a filter over ", kDepthwiseNhwcMaxTaps, " taps");
    const int64_t tiles = (x[1] + 31) / 32 * ((out[2] + kDepthwiseRows - 1) / kDepthwiseRows) * x[0];
    return {launch_for(n, tiles * kDepthwiseThreads, p)};
  }
  // dwconv2d: 32-bit offsets within a plane (and a 32-bit loop over it that steps past its end by
  // up to a block); a tile of planes and output rows per block.
  KILN_CHECK(x[2] * x[3] <= INT32_MAX - kDepthwiseThreads && out[2] * out[3] <= INT32_MAX - kDepthwiseThreads,
             n.describe(), ": a depthwise plane over 2^31 - 256 elements");
  const DepthwiseTile tile = tiled_depthwise ? plan_depthwise_tile(out[2], out[3], w[2], w[3], s[0], s[1], d[0], d[1],
                                                                   data_dtype(n) == DType::F64 ? 8 : 4)
                                             : DepthwiseTile{};
  p.insert(p.end(), {tile.rows_per_band, tile.planes, tile.staged_width, tile.staged_rows, tile.bands});
  if (tile.rows_per_band == 0) return {launch_for(n, prod(out, 0, out.size()), p)};
  const int64_t tiles = (x[0] * x[1] + tile.planes - 1) / tile.planes * tile.bands;
  return {launch_for(n, tiles * kDepthwiseThreads, p)};  // a block (256 threads) per tile
}

// p: N, C, H, W, KH, KW, OH, OW, sh, sw, pad top, pad left, dh, dw.
std::vector<LibraryLaunch> plan_im2col(const Node& n, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> x = dims_of(n.inputs[0], dims), out = dims_of(n.outputs[0], dims);
  const auto& k = n.attrs.get_ints("kernel");
  const auto& s = n.attrs.get_ints("strides");
  const auto& pad = n.attrs.get_ints("pads");
  const auto& d = n.attrs.get_ints("dilations");
  const int64_t ow = out[2] == 0 ? 0 : (x[3] + pad[1] + pad[3] - d[1] * (k[1] - 1) - 1) / s[1] + 1;
  const int64_t oh = ow == 0 ? 0 : out[2] / ow;
  KILN_CHECK(x[2] * x[3] <= INT32_MAX && out[2] <= INT32_MAX, n.describe(), ": im2col over planes of 2^31 elements");
  return {launch_for(n, prod(out, 0, out.size()),
                     {x[0], x[1], x[2], x[3], k[0], k[1], oh, ow, s[0], s[1], pad[0], pad[1], d[0], d[1]})};
}

// p: batch, n. Scratch: an f64 copy of every matrix for its LU factorisation.
std::vector<LibraryLaunch> plan_det(const Node& n, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> x = dims_of(n.inputs[0], dims);
  const int64_t size = x.back(), batch = prod(x, 0, x.size() - 2);
  LibraryLaunch l = launch_for(n, batch, {batch, size});
  l.scratch_bytes = std::max<int64_t>(8, batch * size * size * 8);
  return {l};
}

// p: rank, numel, taps per axis, out dims p[3..10], x dims p[11..18], each axis' offset into the
// tap table p[19..26] (-1: the axis is not resized); f[0]: the extrapolation value. The table holds,
// per resized axis and output position, [outside, index_0, weight_0, index_1, weight_1, ...]: the
// reference's own taps (interp/resize_taps.h), so both sample the same neighbours.
std::vector<LibraryLaunch> plan_resize(const Node& n, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> x = dims_of(n.inputs[0], dims), out = dims_of(n.outputs[0], dims);
  interp::ResizeParams rp{n.attrs.get_string("mode"), n.attrs.get_string("coord_mode"), n.attrs.get_string("nearest_mode"),
                          n.attrs.get_float("cubic_coeff_a"), n.attrs.get_float("extrapolation_value"),
                          n.attrs.get_int("exclude_outside") != 0};
  const std::vector<double> scales = n.attrs.get_floats("scales");
  const std::vector<double> roi = n.attrs.get_floats("roi");
  const int rank = int(x.size());
  const int64_t numel = prod(out, 0, out.size());
  for (int d = 0; d < rank && numel > 0; ++d)
    KILN_CHECK(x[size_t(d)] > 0, n.describe(), ": resize input of shape ", dims_to_string(x), " has no elements on dim ", d,
               " but the output ", dims_to_string(out), " does: nothing to sample");
  KILN_CHECK(int(scales.size()) >= rank, n.describe(), ": resize has ", scales.size(), " scales for ", rank, " dims");
  const int64_t taps = rp.mode == "nearest" ? 1 : rp.mode == "linear" ? 2 : 4;
  const bool crop = rp.coord == "tf_crop_and_resize";
  std::vector<int64_t> p(28, -1);
  p[0] = rank, p[1] = numel, p[2] = taps;
  std::vector<double> table;
  std::vector<int64_t> idx;
  std::vector<double> wts;
  for (int d = 0; d < rank; ++d) {
    p[size_t(3 + d)] = out[size_t(d)];
    p[size_t(11 + d)] = x[size_t(d)];
    const int64_t in_len = x[size_t(d)], out_len = out[size_t(d)];
    if ((in_len == out_len && scales[size_t(d)] == 1.0 && !crop) || numel == 0) continue;
    p[size_t(19 + d)] = int64_t(table.size());
    const double rs = crop ? roi.at(size_t(d)) : 0, re = crop ? roi.at(size_t(d + rank)) : 1;
    for (int64_t xo = 0; xo < out_len; ++xo) {
      const double xs = interp::source_coord(rp, double(xo), in_len, out_len, scales[size_t(d)], rs, re);
      const bool outside = crop && (xs < 0 || xs > double(in_len - 1));
      table.push_back(outside ? 1 : 0);
      if (!outside) interp::resize_taps(rp, xs, in_len, idx, wts);
      for (int64_t t = 0; t < taps; ++t) {
        table.push_back(outside ? 0 : double(idx[size_t(t)]));
        table.push_back(outside ? 0 : wts[size_t(t)]);
      }
    }
  }
  LibraryLaunch l = launch_for(n, numel, p);
  l.value = rp.extrapolation;
  l.table = std::move(table);
  l.scratch_bytes = std::max<int64_t>(8, int64_t(l.table.size()) * 8);
  return {l};
}

}  // namespace

bool has_library_kernel(Op op) { return lib_op(op) != nullptr; }

const std::vector<std::string>& library_kernel_bases() {
  static const std::vector<std::string> bases = [] {
    std::vector<std::string> v;
    for (const LibOp& l : kLibOps)
      if (std::find(v.begin(), v.end(), l.base) == v.end()) v.push_back(l.base);
    // "gather" is a prefix of "gather_elements": match the longer name first.
    std::stable_sort(v.begin(), v.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    return v;
  }();
  return bases;
}

std::string library_kernel_refusal(const Node& n) {
  const LibOp* l = lib_op(n.op);
  if (!l) return str(n.describe(), ": the CUDA backend has no kernel for op '", op_name(n.op), "'");
  if (n.inputs.empty()) return str(n.describe(), ": op '", op_name(n.op), "' without operands has no CUDA library kernel");
  const DType t = data_dtype(n);
  if (!family_takes(l->family, t))
    return str(n.describe(), ": the CUDA ", op_name(n.op), " kernel takes ", family_dtypes(l->family), ", not ",
               dtype_name(t));
  if (n.op == Op::Gather || n.op == Op::GatherElements) {
    const DType i = n.inputs[1]->type.dtype;
    if (i != DType::I32 && i != DType::I64)
      return str(n.describe(), ": CUDA ", op_name(n.op), " takes i32 or i64 indices, not ", dtype_name(i));
  }
  if (n.op == Op::GatherElements || n.op == Op::Pad || n.op == Op::Resize) {
    const size_t rank = n.inputs[0]->type.shape.size();
    if (rank > size_t(kLibMaxRank))
      return str(n.describe(), ": CUDA ", op_name(n.op), " supports up to ", kLibMaxRank, " dims, not ", rank);
  }
  if (n.op == Op::Concat)
    for (const Value* v : n.inputs)
      if (v->type.dtype != t) return str(n.describe(), ": concat operands of different dtypes");
  if (n.op == Op::Conv2d && is_channels_last(n)) {
    if (!is_depthwise_conv(n))
      return str(n.describe(), ": CUDA runs channels-last (layout \"NHWC\") conv2d only for depthwise convs");
    const Shape& w = n.inputs[1]->type.shape;
    if (!w[2].is_constant() || !w[3].is_constant() || w[2].constant() * w[3].constant() > kDepthwiseNhwcMaxTaps)
      return str(n.describe(), ": the CUDA channels-last depthwise kernel takes up to ", kDepthwiseNhwcMaxTaps,
                 " taps a filter");
  }
  return "";
}

bool is_channels_last(const Node& n) { return n.op == Op::Conv2d && n.attrs.get_string("layout") == "NHWC"; }

std::vector<std::string> library_kernel_names(const Node& n) { return {kernel_name(n)}; }

bool is_depthwise_conv(const Node& n) {
  if (n.op != Op::Conv2d || n.inputs.size() < 2 || n.inputs[1]->type.rank() != 4) return false;
  const int64_t groups = n.attrs.get_int("groups");
  const Shape& w = n.inputs[1]->type.shape;
  return groups > 1 && w[0].maybe_constant() == groups && w[1].maybe_constant() == 1;
}

std::set<std::string> all_library_kernel_names() {
  std::set<std::string> names;
  for (const LibOp& l : kLibOps)
    for (int i = 0; i < kNumDTypes; ++i) {
      const DType t = DType(i);
      if (!family_takes(l.family, t)) continue;
      const std::string name = str("kiln_lib_", l.base, "_", type_token(l, t));
      if (l.op == Op::Gather || l.op == Op::GatherElements) names.insert({name + "_i32", name + "_i64"});
      else names.insert(name);
    }
  return names;
}

std::vector<LibraryLaunch> plan_library_kernel(const Node& n, const std::map<std::string, int64_t>& dims,
                                               bool tiled_depthwise) {
  const std::string why = library_kernel_refusal(n);
  KILN_CHECK(why.empty(), why);
  switch (n.op) {
    case Op::Gather: return plan_gather(n, dims);
    case Op::GatherElements: return plan_gather_elements(n, dims);
    case Op::Concat: return plan_concat(n, dims);
    case Op::Pad: return plan_pad(n, dims);
    case Op::Tril:
    case Op::Triu: return plan_triangle(n, dims);
    case Op::ArgMax:
    case Op::ArgMin: return plan_argreduce(n, dims);
    case Op::CumSum: return plan_cumsum(n, dims);
    case Op::TopK: return plan_topk(n, dims);
    case Op::MaxPool2d:
    case Op::AvgPool2d: return plan_pool(n, dims);
    case Op::GlobalAvgPool: return plan_global_avgpool(n, dims);
    case Op::Conv2d:
    case Op::ConvTranspose2d: return plan_conv(n, dims, tiled_depthwise);
    case Op::Im2Col: return plan_im2col(n, dims);
    case Op::Det: return plan_det(n, dims);
    case Op::Resize: return plan_resize(n, dims);
    default: break;
  }
  throw Error(str(n.describe(), ": no CUDA library kernel for op '", op_name(n.op), "'"));
}

}  // namespace kiln::codegen::cuda
