// CUDA library kernels: hand-written kernels for the ops no generated (Loop IR) kernel computes —
// gather, gather_elements, concat, pad, tril/triu, argmax/argmin, cumsum, topk, max/avg/global
// pooling, conv2d, conv_transpose2d, det and resize — one kernel per op and dtype, compiled by NVRTC in the
// graph's translation unit and launched as that op's library step. Why: every op of the table needs
// a CUDA decision that runs (issue 20); these are the correct baseline (one thread per output point
// or line, coalesced along the innermost dim) that a fused or cuDNN path has to beat. Planning is
// pure (no device): `kiln dump`, the op table and the tests use it on machines without a GPU.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kiln/graph.h"

namespace kiln::codegen::cuda {

constexpr int kLibMaxInputs = 8;   // concat takes more operands over several launches
constexpr int kLibMaxParams = 40;  // int64 parameters of one launch
constexpr int kLibMaxRank = 8;     // gather_elements and pad address up to this many dims

// One launch of a library kernel: what the launcher puts into the kernels' KilnLibArgs struct
// (in[], out[], p[], f[], status, scratch), and how many points its grid-stride loop covers.
struct LibraryLaunch {
  std::string kernel;                 // extern "C" name in library_kernels_source
  std::vector<const Value*> inputs;   // in[0..]
  std::vector<const Value*> outputs;  // out[0..]
  std::vector<int64_t> params;        // p[0..]
  double value = 0;                   // f[0]
  int64_t points = 0;                 // threads of work; 0: nothing to launch
  int64_t scratch_bytes = 0;          // device scratch the launch needs (det's LU copies)
  std::vector<double> table;          // uploaded into the scratch once per binding (resize's taps)
};

// Whether op has a library kernel (in some dtypes: library_kernel_refusal says which).
bool has_library_kernel(Op op);

// The kernels' template names ("gather", "conv2d"...), longest first: kiln_lib_<base>_<types>.
const std::vector<std::string>& library_kernel_bases();

// Empty when node n runs as a library kernel; else why not (dtype, rank, op), naming the node.
std::string library_kernel_refusal(const Node& n);

// The kernels node n's launches call, whatever the dims (to compile them with the graph).
std::vector<std::string> library_kernel_names(const Node& n);

// A depthwise conv2d (one filter per channel: groups == channels in == channels out), which runs
// on a kernel of its own (dwconv2d, register-tiled: see DepthwiseTile). Why: cuDNN's NCHW depthwise
// kernels in bf16 took 360-520 us for ConvNeXt-T's 7x7 convs at batch 32 (~20 us of bytes).
bool is_depthwise_conv(const Node& n);

// How dwconv2d splits its work: a block of kDepthwiseThreads threads stages `staged_rows` input
// rows of `staged_width` (zero-padded) for each of `planes` (image, channel) planes in shared
// memory, then each thread computes kDepthwiseRows outputs of one column of a band of
// `rows_per_band` output rows. rows_per_band == 0: nothing fits kDepthwiseSharedBytes (planes
// thousands wide), and a block takes one plane at a time from L1 instead.
constexpr int64_t kDepthwiseThreads = 256;
constexpr int64_t kDepthwiseRows = 8;             // KILN_DW_ROWS in the kernel source
constexpr int64_t kDepthwiseSharedBytes = 24576;  // KILN_DW_SMEM_BYTES: 8 blocks of an SM fit
struct DepthwiseTile {
  int64_t rows_per_band = 0, planes = 1, staged_width = 0, staged_rows = 0, bands = 0;
};
// Channels-last depthwise convs (dwconv2d_nhwc: lanes over channels) stage a filter's taps for 32
// channels in shared memory: filters up to 9x9.
constexpr int64_t kDepthwiseNhwcMaxTaps = 81;  // KILN_DWN_MAX_TAPS in the kernel source

// A conv2d whose input and result are channels-last (layout "NHWC"; the CUDA target's
// channels_last pass writes them around depthwise convs).
bool is_channels_last(const Node& n);

DepthwiseTile plan_depthwise_tile(int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh,
                                  int64_t dw, int64_t element_bytes);

// Node n's launches once its dims are bound. Throws kiln::Error naming the node for bad input the
// reference interpreter also rejects (reflect padding wider than the dim, argmax over an empty axis).
// `tiled_depthwise` false: NCHW depthwise convs take dwconv2d's untiled form (one plane a block,
// inputs from L1; CudaCompileOptions::depthwise_kernel off).
std::vector<LibraryLaunch> plan_library_kernel(const Node& n, const std::map<std::string, int64_t>& dims,
                                               bool tiled_depthwise = true);

// Every kernel name of every op in every dtype it takes (for the NVRTC test: all must compile).
std::set<std::string> all_library_kernel_names();

// CUDA source (after cuda_prelude()) defining the named kernels.
std::string library_kernels_source(const std::set<std::string>& names);

// Bits of the status word a library kernel sets (the generated kernels set 1: division by zero).
constexpr int kStatusIndexOutOfRange = 2;

}  // namespace kiln::codegen::cuda
