// Fused row reductions (a part of register rows, fused_row_reductions.cc): softmax's max and sum
// of exp, and layer norm's mean and sum of squares, each reduced across the block and cluster once
// a row instead of twice. Why: a row split over a cluster paid a block and a cluster barrier per
// reduction; fused, bf16 softmax on the H200 went from 3.10 to 3.25 TB/s on [4096x32768].
#pragma once

#include <string>
#include <vector>

#include "lower/loop_ir.h"

namespace kiln::codegen::cuda {

struct FusedReductionOptions {
  bool enabled = true;  // off: every row loop's reduction on its own
  // Layer norm's mean and variance fuse only up to this many elements a thread (their reduction
  // keeps ~6 more values live), unless registers, bulk rows or cluster mail allow (register_rows.cc).
  int norm_max_per_thread = 16;
};

// Two reductions of consecutive row loops combined into one block (and cluster) reduction a row.
// The first loop's accumulator stays per thread; the second loop measures its elements against
// that thread's own partial result (its max, its mean); after the second loop the pair is reduced
// with a rule that rescales each thread's second value to the row's first value
// (kiln_max_sum_combine, kiln_mean_m2_combine).
struct FusedReduction {
  enum Kind {
    kMaxExpSum,    // max of x, then sum of exp(x - max): softmax
    kMeanSquares,  // sum of x, then sum of (x - f(sum))^2: layer norm's mean and variance
  };
  Kind kind = kMaxExpSum;
  int loop = 0;        // index among the row body's loops of the second loop
  std::string first;   // the first loop's accumulator (the max; the sum)
  std::string second;  // the second loop's (the sum of exp; of squares)
  std::string count;   // kMeanSquares: the thread's element count (an accumulator of the first loop)
  // kMaxExpSum: later loops' exp(x - max) (printed as `global_exp`) equals the second loop's
  // exp(x - shift) (`local_exp`) times the thread's row-level `rescale`; plan_kept_values keeps
  // the latter in registers where they allow, as for an unfused softmax.
  std::string local_exp, global_exp, rescale;
};

// Rewrites `body` (a register-row body) so that each pair of consecutive row loops computing a
// softmax's (max, sum of exp) or a layer norm's (sum, sum of squares) is reduced across threads
// once, after the second loop (see FusedReduction); returns the fusions made. Pairs that do not
// match the pattern exactly are left alone, and mean/variance pairs unless `mean_squares`.
std::vector<FusedReduction> fuse_row_reductions(std::vector<lower::Stmt>& body, bool mean_squares);

}  // namespace kiln::codegen::cuda
