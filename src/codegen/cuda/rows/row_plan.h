// What every CUDA row form plans (rows/*.cc): a row-block kernel's row body rewritten to read and
// write its rows where the form keeps them (shared memory, registers, a ring of stages), with the
// launch shape that implies; the device facts the forms check; and the helpers they share for
// finding the buffers a row body reads as `base + i`. Why: one plan type lets the selector
// (select_row_form.h) compare forms and the emitter print any of them.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codegen/cuda/rows/fused_row_reductions.h"
#include "lower/loop_ir.h"

namespace kiln::codegen::cuda {

// A staged buffer's on-chip copy prints as `p<kStagedParamBase + param>` in the rewritten body.
constexpr int kStagedParamBase = 1000;

// Where the bulk ring's first stage starts in the dynamic shared memory (the mbarriers come first).
constexpr int64_t kBulkRingOffset = 128;

// The GPU a row kernel is planned for. The defaults are a GPU without clusters or bulk copies,
// with the 48 KiB of dynamic shared memory every kernel gets without opting in; compile_cuda
// passes the device's own.
struct RowDevice {
  int compute_major = 0;  // 9 and up: thread-block clusters, cp.async.bulk, st.async (mail)
  // Dynamic shared memory a block may use (the opt-in limit less the reductions' static slots).
  int64_t shared_per_block = 48 * 1024;
  int64_t shared_per_multiprocessor = 0;  // what a multiprocessor's blocks share (0: unknown)
  bool has_clusters() const { return compute_major >= 9; }
  // cp.async.bulk and mbarrier transaction counts, with a multiprocessor's shared memory known.
  bool has_bulk_copies() const { return compute_major >= 9 && shared_per_multiprocessor > 0; }

  // From the device's attributes (compute capability, cudaDevAttrMaxSharedMemoryPerBlockOptin,
  // cudaDevAttrMaxSharedMemoryPerMultiprocessor): the block reductions' static 1 KiB comes off the
  // per-block budget. compile_cuda reads them from the device; `kiln dump --sm90` uses sm90().
  static RowDevice from_limits(int compute_major, int64_t max_shared_per_block_optin,
                               int64_t max_shared_per_multiprocessor) {
    RowDevice d;
    d.compute_major = compute_major;
    d.shared_per_block = max_shared_per_block_optin > 1024 ? max_shared_per_block_optin - 1024 : 0;
    d.shared_per_multiprocessor = max_shared_per_multiprocessor;
    return d;
  }
  // An H100/H200 as compile_cuda sees one: 227 KiB opt-in a block, 228 KiB a multiprocessor.
  static RowDevice sm90() { return from_limits(9, 227 * 1024, 228 * 1024); }
};

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

// Register rows: a value computed in one row loop and again, identically, in a later one
// (softmax's exp) is kept per thread in `array[kiln_e]` instead of recomputed.
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

// One row kernel's plan. Staged rows (staged_rows.cc) fill buffers, shared_bytes, body and threads;
// register rows (register_rows.cc) everything from in_registers down, bulk rows (bulk_rows.cc) the
// ring, cluster mail (cluster_mail.cc) `mail`.
struct RowPlan {
  std::vector<StagedBuffer> buffers;  // empty: nothing staged, `body` is the original
  int64_t shared_bytes = 0;           // dynamic shared memory per block
  std::vector<lower::Stmt> body;      // the row body with staged loads and stores redirected
  int threads = 0;                    // the block size the kernel is written for

  // Register rows (in_registers): each staged buffer is a per-thread array of `per_thread`
  // elements; thread t of the block holds elements (c * threads + t) * vector + j, j < vector, of
  // its block's part of the row, so a row is read and written with one vector per chunk and every
  // row loop is unrolled over the thread's elements (index kiln_e). With cluster > 1 the row is
  // split into `cluster` parts of `block_elements`, one per block of a thread-block cluster, and
  // the reductions are combined across the cluster through distributed shared memory.
  bool in_registers = false;
  int per_thread = 0;
  int vector = 1;
  int cluster = 1;
  int occupancy_threads = 1024;  // threads a multiprocessor holds at once (the launch bounds)
  int64_t row_elements = 0;      // N, the row loops' common extent
  int64_t block_elements = 0;    // elements of the row each block holds (N when cluster == 1)
  std::vector<KeptValue> kept;
  std::vector<RowReciprocal> reciprocals;
  bool prefetch = false;       // per-row inputs of the next row are loaded before this row's loops
  bool fast_exp = false;       // every stored value is a 16-bit float: exp via ex2.approx (kiln_exp16)
  std::vector<FusedReduction> fused;
  // Fused reductions across the cluster exchange partials by mail (st.async completing each
  // receiver's mbarrier, kiln_mail_combine) instead of a cluster barrier a row.
  bool mail = false;
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

inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

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
