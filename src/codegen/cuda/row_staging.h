// Row staging for the CUDA target's row-block kernels: which buffers a block copies into shared
// memory once per row (or once per block, when every row reads the same elements) so the row's
// loops read them on chip, and which outputs the loops write there to be copied out with 16-byte
// stores. Why: softmax reads its row three times and layer_norm twice; done from HBM with one
// 2-byte load per element that held the row kernels at 1.1-1.8 TB/s.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lower/loop_ir.h"

namespace kiln::codegen::cuda {

// A staged buffer's on-chip copy prints as `p<kStagedParamBase + param>` in the rewritten body.
constexpr int kStagedParamBase = 1000;

struct StagedBuffer {
  int param = -1;             // the kernel parameter staged
  DType dtype = DType::F32;   // its dtype (the shared copy holds the storage type)
  int64_t extent = 0;         // elements per row
  lower::Index base;          // global element offset of the row's first element
  bool row_invariant = false; // the same elements for every row: copied once per block
  bool is_output = false;     // written by the row loops, copied out after them
  int shares_with = -1;       // an output written over this staged input's space (param index)
  int64_t offset = 0;         // byte offset in the block's dynamic shared memory
};

// Register rows (plan_register_rows): a value computed in one row loop and again, identically, in
// a later one (softmax's exp) is kept per thread in `array[kiln_e]` instead of recomputed.
struct KeptValue {
  std::string let;    // the Let of the earlier loop that writes the array
  std::string array;  // kiln_keepN
  DType dtype = DType::F32;
};
// Register rows: a division by a row-level value becomes a multiplication by its reciprocal,
// computed once per row before loop `loop`.
struct RowReciprocal {
  std::string of;    // the row-level value divided by
  std::string name;  // kiln_rcp_<of>
  DType dtype = DType::F32;
  int loop = 0;      // index among the row body's loops of the first loop that uses it
};

// Register rows: two reductions of consecutive row loops combined into one block (and cluster)
// reduction a row (fused_row_reductions.cc). The first loop's accumulator stays per thread; the
// second loop measures its elements against that thread's own partial result (its max, its
// mean); after the second loop the pair is reduced with a rule that rescales each thread's
// second value to the row's first value (kiln_max_sum_combine, kiln_mean_m2_combine).
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

struct RowStaging {
  std::vector<StagedBuffer> buffers;  // empty: nothing staged, `body` is the original
  int64_t shared_bytes = 0;           // dynamic shared memory per block
  std::vector<lower::Stmt> body;      // the row body with staged loads and stores redirected

  // Register rows (in_registers): each staged buffer is a per-thread array of `per_thread`
  // elements; thread t of the block holds elements (c * threads + t) * vector + j, j < vector, of
  // its block's part of the row, so a row is read and written with one vector per chunk and every
  // row loop is unrolled over the thread's elements (index kiln_e). With cluster > 1 the row is
  // split into `cluster` parts of `block_elements`, one per block of a thread-block cluster, and
  // the reductions are combined across the cluster through distributed shared memory.
  bool in_registers = false;
  int threads = 0;
  int per_thread = 0;
  int vector = 1;
  int cluster = 1;
  int64_t row_elements = 0;    // N, the row loops' common extent
  int64_t block_elements = 0;  // elements of the row each block holds (N when cluster == 1)
  std::vector<KeptValue> kept;
  std::vector<RowReciprocal> reciprocals;
  bool prefetch = false;       // per-row inputs of the next row are loaded before this row's loops
  bool fast_exp = false;       // every stored value is a 16-bit float: exp via ex2.approx (kiln_exp16)
  std::vector<FusedReduction> fused;
  // Row-invariant buffers (layer norm's weights) that do not stay in registers — no room, or the
  // row is split over a cluster — read one 16-byte chunk at a time inside the loops that use them
  // (`p<1000 + param>[kiln_e]`, loaded where kiln_e starts a chunk): one vector load per chunk
  // instead of one 2-byte load per element. Only where no chunk straddles the row's end.
  std::vector<StagedBuffer> chunked;
  // With chunked weights, outputs are stored a chunk at a time as the loop completes each chunk,
  // instead of all at once after the loops: a chunk's registers are free as soon as it is written
  // (32 elements a thread otherwise held the whole output row live, and the weights' chunks spilled).
  bool chunked_stores = false;
  // Chunked weights of a row split over a cluster, copied once per kernel into shared memory (a
  // block always holds the same part of the row; StagedBuffer::offset places each): the chunks
  // are read there instead of from L1/L2 every row (layer norm reads 2 bytes of weights per byte
  // of x).
  bool chunked_in_shared = false;
  // Bulk rows (sm_90): the per-row inputs of the block's next `bulk_stages - 1` rows are copied
  // into a ring of shared-memory stages by the copy engine (cp.async.bulk, one copy per buffer and
  // row, completing the stage's mbarrier), and each row's registers are filled from its stage.
  // Replaces the register prefetch where rows are long: the loads in flight no longer cost
  // registers, and a multiprocessor holds several rows' worth of them. A buffer's place in a stage
  // is its StagedBuffer::offset; stage s starts at kBulkRingOffset + s * bulk_stage_bytes of the
  // dynamic shared memory, the stages' mbarriers at 0. Falls back to direct loads at run time
  // when a pointer is not 16-byte aligned.
  int bulk_stages = 0;
  int64_t bulk_stage_bytes = 0;
  bool any_per_row() const {
    for (const auto& b : buffers)
      if (!b.row_invariant) return true;
    return false;
  }
};

// Plans staging for a row body (the statements below the grid-mapped loops). A buffer qualifies
// when every access inside the row loops reads (or, for an output, writes) element `base + i` of
// a loop `for i < N` with a constant N, the same base and N each time, and (outputs) it is never
// read. Rows every row reads are staged only while the total stays within 48 KiB (occupancy);
// stages nothing when the per-row buffers would not fit in `budget_bytes`.
RowStaging plan_row_staging(const std::vector<lower::Stmt>& row_body, const std::vector<std::string>& grid_vars,
                            const std::vector<lower::KernelParam>& params, int64_t budget_bytes);

struct RegisterRowOptions {
  int max_threads = 1024;    // block size limit
  // Blocks up to this size are preferred: a row longer than such a block holds is split over a
  // cluster when clusters allow, so several rows share a multiprocessor (one 1024-thread block per
  // multiprocessor left it idle while the block computed).
  int preferred_threads = 256;
  int max_per_thread = 32;   // row elements per thread and buffer
  int max_cluster = 1;       // blocks that may share a row (thread-block clusters need sm_90); 1: none
  int register_words = 48;   // 32-bit registers per thread for staged arrays and kept values
  bool prefetch = true;      // load the block's next row while computing this one, if registers allow
  bool fuse_reductions = true;  // softmax's and layer norm's two reductions as one (FusedReduction)
  int fuse_norm_max_per_thread = 16;  // layer norm's mean and variance only up to this many elements
  // Threads a multiprocessor should hold at once (the launch bounds' minimum blocks); 1024 leaves
  // 64 registers a thread, 768 leaves 80.
  int occupancy_threads = 1024;
  bool chunks = true;  // chunked weights and stores (RowStaging::chunked, chunked_stores)
  // Bulk rows (RowStaging::bulk_stages): up to this many stages, for rows of at least
  // `bulk_min_per_thread` elements a thread, within the shared memory a multiprocessor has (0: no
  // bulk rows, e.g. before sm_90) shared by the blocks `occupancy_threads` allows, and at most
  // `shared_per_block` per block.
  int bulk_stages = 3;
  int bulk_min_per_thread = 32;
  int64_t shared_per_multiprocessor = 0;
  int64_t shared_per_block = 0;
  // Fused reductions across a cluster exchange the blocks' partials by mail (st.async completing
  // an mbarrier of each receiver) instead of a cluster barrier a row.
  bool cluster_mail = false;
  bool weights_in_shared = true;  // RowStaging::chunked_in_shared where shared memory allows
};

// Where the bulk ring's first stage starts in the dynamic shared memory (the mbarriers come first).
constexpr int64_t kBulkRingOffset = 128;

// Plans register rows (see RowStaging::in_registers) for a row body whose loops are all simple
// (no nested loop) with one common constant extent. Returns a staging with no buffers when the
// body does not qualify or the arrays would not fit `register_words`; the caller then falls back
// to plan_row_staging. Kept values and reciprocals are only planned here (see KeptValue).
RowStaging plan_register_rows(const std::vector<lower::Stmt>& row_body, const std::vector<std::string>& grid_vars,
                              const std::vector<lower::KernelParam>& params, const RegisterRowOptions& options);

// Rewrites `body` (a register-row body) so that each pair of consecutive row loops computing a
// softmax's (max, sum of exp) or a layer norm's (sum, sum of squares) is reduced across threads
// once, after the second loop (see FusedReduction); returns the fusions made. Pairs that do not
// match the pattern exactly are left alone, and mean/variance pairs unless `mean_squares`.
std::vector<FusedReduction> fuse_row_reductions(std::vector<lower::Stmt>& body, bool mean_squares);

// The scalar tree s with every node for which `replace` returns non-null replaced by that (its
// arguments not visited); the nodes above a replacement are copied, the rest shared.
lower::ScalarPtr rebuild_scalar(const lower::ScalarPtr& s,
                                const std::function<lower::ScalarPtr(const lower::Scalar&)>& replace);
// Calls fn on every load in the scalar tree s.
void visit_loads(const lower::ScalarPtr& s, const std::function<void(const lower::Scalar&)>& fn);
// A loop the planners can stage: constant extent, no loop inside.
bool simple_row_loop(const lower::Stmt& st);

// A Let's value with the Lets of the same loop it refers to substituted (so two loops computing
// the same thing print the same), whether it reads only staged arrays, and whether it is worth
// keeping in registers (some op in it costs more than a few instructions).
struct Expanded {
  lower::ScalarPtr value;
  bool only_staged = true;
  bool expensive = false;
};
Expanded expand(const lower::ScalarPtr& s, const std::map<std::string, Expanded>& lets);

// `index` as `base + var` with base free of var; nullopt when it is not of that form.
std::optional<lower::Index> contiguous_base(const lower::Index& index, const std::string& var);

// Internal to the planners: the per-row and row-invariant buffers a row body reads as `base + i`
// and the outputs it writes that way (the candidates for staging), with where they are touched.
struct RowCandidate {
  StagedBuffer buffer;
  int last_load_loop = -1;
  int store_loop = -1;
  bool store_is_last = false;
};
std::vector<RowCandidate> row_candidates(const std::vector<lower::Stmt>& row_body, const std::vector<std::string>& grid_vars,
                                         const std::vector<lower::KernelParam>& params);
// Rewrites the simple constant-extent loops of `body`: loads of `loads` params and stores to
// `stores` params go to p<kStagedParamBase + param>[index_var] (index_var empty: the loop's var).
void redirect_staged(std::vector<lower::Stmt>& body, const std::set<int>& loads, const std::set<int>& stores,
                     const std::string& index_var);

}  // namespace kiln::codegen::cuda
