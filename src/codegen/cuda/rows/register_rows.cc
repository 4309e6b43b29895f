// Planning register rows (see register_rows.h): the block size, cluster split and elements a thread
// for a row, which buffers stay in registers and which weights are read a chunk at a time, the
// next row's prefetch, fused reductions, kept values and reciprocals.
#include "codegen/cuda/rows/register_rows.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "codegen/common/c_emitter.h"
#include "codegen/cuda/kernel_printer.h"
#include "codegen/cuda/rows/select_row_form.h"

namespace kiln::codegen::cuda {

using lower::Index;
using lower::Scalar;
using lower::ScalarPtr;
using lower::Stmt;

namespace {

int pow2_at_least(int64_t n) {
  int p = 1;
  while (p < n && p < (1 << 30)) p *= 2;
  return p;
}

// Bytes of the compute type an accumulator of `t` folds in (f16/bf16 accumulate in float).
int compute_bytes(DType t) { return t == DType::F16 || t == DType::BF16 ? 4 : dtype_size(t); }

// Values computed identically by an earlier row loop are read from a register array instead; so
// are a fused softmax's later exp(x - max), as the second loop's exp(x - shift) times the
// thread's rescale (FusedReduction).
void plan_kept_values(RowPlan& out, int words_left) {
  std::map<std::string, std::pair<std::string, std::string>> rescaled;  // global exp -> (local exp, rescale)
  for (const FusedReduction& f : out.fused)
    if (!f.global_exp.empty()) rescaled[f.global_exp] = {f.local_exp, f.rescale};
  std::map<std::string, std::pair<std::string, DType>> first;  // printed expression -> (let, dtype)
  std::map<std::string, std::string> array_of;                 // first let -> its array
  for (Stmt& st : out.body) {
    if (st.kind != Stmt::kFor) continue;
    std::map<std::string, Expanded> lets;
    std::map<std::string, std::pair<std::string, DType>> seen_here;
    for (Stmt& leaf : st.body) {
      if (leaf.kind != Stmt::kLet) continue;
      Expanded e = expand(leaf.value, lets);
      lets[leaf.name] = e;
      if (!e.only_staged || !e.expensive || compute_bytes(leaf.dtype) != 4) continue;
      std::string key = c_scalar_expression(*e.value);
      std::string factor;
      auto f = first.find(key);
      if (f == first.end()) {
        auto r = rescaled.find(key);
        if (r != rescaled.end() && first.count(r->second.first)) {
          factor = r->second.second;
          f = first.find(r->second.first);
        }
      }
      if (f == first.end()) {
        seen_here.emplace(key, std::make_pair(leaf.name, leaf.dtype));
        continue;
      }
      std::string& array = array_of[f->second.first];
      if (array.empty()) {
        if (words_left < out.per_thread) continue;
        words_left -= out.per_thread;
        array = str("kiln_keep", out.kept.size());
        out.kept.push_back({f->second.first, array, f->second.second});
      }
      leaf.value = Scalar::ref(leaf.dtype, array + "[kiln_e]");
      if (!factor.empty())
        leaf.value = Scalar::apply(Op::Mul, leaf.dtype, {}, {leaf.value, Scalar::ref(DType::F32, factor)});
    }
    for (auto& [key, v] : seen_here) first.emplace(key, v);
  }
}

ScalarPtr with_reciprocals(const ScalarPtr& s, const std::set<std::string>& row_level, RowPlan& out, int loop) {
  if (!s || s->kind != Scalar::kOp) return s;
  std::vector<ScalarPtr> args;
  bool changed = false;
  for (const auto& a : s->args) {
    args.push_back(with_reciprocals(a, row_level, out, loop));
    changed |= args.back() != a;
  }
  if (s->op == Op::Div && args.size() == 2 && args[1]->kind == Scalar::kRef && row_level.count(args[1]->name) &&
      compute_bytes(s->dtype) == 4 && is_float(s->dtype) && compute_bytes(args[1]->dtype) == 4 &&
      is_float(args[1]->dtype)) {
    const std::string name = "kiln_rcp_" + args[1]->name;
    bool known = false;
    for (const RowReciprocal& r : out.reciprocals) known |= r.name == name;
    if (!known) out.reciprocals.push_back({args[1]->name, name, DType::F32, loop});
    return Scalar::apply(Op::Mul, s->dtype, {}, {args[0], Scalar::ref(DType::F32, name)});
  }
  if (!changed) return s;
  auto copy = std::make_shared<Scalar>(*s);
  copy->args = std::move(args);
  return copy;
}

// Softmax divides every element by the row's sum. When every value the row loops store is rounded
// to a 16-bit float, x * (1/sum) (within 1.5 ulp of f32) rounds like x / sum except within a few
// f32 ulps of a rounding boundary of the 16-bit type, and costs one instruction instead of a
// division sequence. Under the same condition exp is computed as ex2.approx(x * log2 e)
// (RowPlan::fast_exp; relative error ~1e-6 for softmax's arguments, far below a bf16/f16 ulp).
void plan_reciprocals(RowPlan& out, const std::vector<lower::KernelParam>& params) {
  std::set<std::string> row_level;
  int loop = -1;
  for (const Stmt& st : out.body)
    if (st.kind == Stmt::kLet || st.kind == Stmt::kAccInit) row_level.insert(st.name);
  // Every store, the row-level ones (a reduction's result) included: an f64 row sum is not fast.
  if (!stores_only_16bit_floats(out.body, params)) return;
  out.fast_exp = true;
  for (Stmt& st : out.body) {
    if (st.kind != Stmt::kFor) continue;
    ++loop;
    for (Stmt& leaf : st.body) leaf.value = with_reciprocals(leaf.value, row_level, out, loop);
  }
}

}  // namespace

RowPlan plan_register_rows(const std::vector<Stmt>& row_body, const std::vector<std::string>& grid_vars,
                           const std::vector<lower::KernelParam>& params, const RowFormOptions& forms,
                           const RowDevice& device) {
  const RegisterRowOptions& options = forms.registers;
  RowPlan out;
  out.body = row_body;
  int64_t n = -1;
  for (const Stmt& st : row_body) {
    if (st.kind != Stmt::kFor) continue;
    if (!simple_row_loop(st)) return out;
    if (n >= 0 && st.extent.constant() != n) return out;
    n = st.extent.constant();
  }
  if (n <= 0) return out;
  std::vector<StagedBuffer> per_row, invariant;
  for (const RowCandidate& c : row_candidates(row_body, grid_vars, params))
    (c.buffer.row_invariant ? invariant : per_row).push_back(c.buffer);
  bool any_input = false;
  for (const StagedBuffer& b : per_row) any_input |= !b.is_output;
  if (!any_input) return out;

  // Accumulators combined across a cluster travel as 4- or 8-byte words.
  bool words_only = true;
  for (const Stmt& st : row_body)
    if (st.kind == Stmt::kFor)
      for (const Stmt& leaf : st.body)
        if (leaf.kind == Stmt::kAccUpdate) words_only &= compute_bytes(leaf.dtype) == 4 || compute_bytes(leaf.dtype) == 8;

  int widest = 1, row_bytes = 0;
  for (const StagedBuffer& b : per_row) widest = std::max(widest, dtype_size(b.dtype)), row_bytes += dtype_size(b.dtype);
  const int vec = std::max(1, 16 / widest);
  // Elements a thread may hold: the cap, and what the row arrays leave of the register budget.
  const int max_per_thread = std::min(options.max_per_thread, options.register_words * 4 / row_bytes) / vec * vec;
  if (max_per_thread < vec) return out;
  // The smallest block size from the preferred one up that holds the row, split over at most
  // max_cluster blocks — and, once the block has grown past the preferred size, over at most 8
  // while it can still grow: on the H200 a [512x262144] bf16 softmax ran at 2.56 TB/s as 8 blocks
  // of 1024 threads and 2.06 as 16 of 512 (layer_norm 1.70 and 1.74). Rows with row-invariant
  // weights (layer norm) take 16 there: since their weights sit in shared memory, a [512x262144]
  // layer norm ran at 2.79 TB/s as 16 blocks of 512 and 2.65-2.69 as 8 of 1024, where softmax stayed
  // faster on 8 (3.17 against 3.07; bench/results/gpu-h200-compiled-2026-11-30-s8.md).
  const int grown_cluster = std::min(invariant.empty() ? 8 : 16, options.max_cluster);
  int cluster = 0, max_threads = 0;
  for (int t = std::min(options.preferred_threads, options.max_threads);; t *= 2) {
    t = std::min(t, options.max_threads);
    const int64_t per_block_max = int64_t(t) * max_per_thread;
    const int c = n > per_block_max ? pow2_at_least((n + per_block_max - 1) / per_block_max) : 1;
    const bool grown = t > options.preferred_threads && t < options.max_threads;
    if (c <= (words_only ? (grown ? grown_cluster : options.max_cluster) : 1)) {
      cluster = c, max_threads = t;
      break;
    }
    if (t >= options.max_threads) return out;
  }
  const int64_t block_elements = round_up((n + cluster - 1) / cluster, vec);
  // ~16 elements a thread (fewer when capped): enough independent loads in flight per thread,
  // blocks small enough that several rows share a multiprocessor.
  const int64_t target = std::max(vec, std::min(16, max_per_thread));
  const int threads = std::clamp(pow2_at_least((block_elements + target - 1) / target), 32, max_threads);
  const int64_t per_thread = round_up((block_elements + threads - 1) / threads, vec);
  if (per_thread > max_per_thread) return out;

  auto words = [&](const StagedBuffer& b) { return int((per_thread * dtype_size(b.dtype) + 3) / 4); };
  int used = 0;
  for (const StagedBuffer& b : per_row) used += words(b);
  if (used > options.register_words) return out;
  out.in_registers = true;
  out.buffers = per_row;
  out.threads = threads;
  out.per_thread = int(per_thread);
  out.vector = vec;
  out.cluster = cluster;
  out.row_elements = n;
  out.block_elements = block_elements;
  plan_bulk_rows(out, invariant, forms, device);
  std::vector<StagedBuffer> chunked;
  for (const StagedBuffer& b : invariant) {
    if (dtype_size(b.dtype) > widest) continue;  // a chunk of it would be wider than 16 bytes
    // Weights in registers only where they line up with the row's elements and still fit — and
    // not beside bulk rows, whose ring machinery leaves no room for them at 64 registers (layer
    // norm spilled 128 bytes with them).
    if (cluster == 1 && out.bulk_stages == 0 && used + words(b) <= options.register_words) {
      used += words(b);
      out.buffers.push_back(b);
    } else if (options.chunks && n % vec == 0 && block_elements % vec == 0) {
      // Otherwise a chunk at a time, inside the loop that reads it (see RowPlan::chunked).
      chunked.push_back(b);
    }
  }

  out.chunked = chunked;  // (out.buffers keeps the ring offsets plan_bulk_rows gave the inputs)
  // Split over a cluster, the block's part of the weights fits in the shared memory bulk rows
  // would otherwise use (64 KiB a weight for a [512x262144] bf16 layer norm): copied there once.
  if (options.weights_in_shared && !out.chunked.empty() && cluster > 1 && out.bulk_stages == 0 &&
      device.has_bulk_copies()) {
    int64_t bytes = 0;
    for (StagedBuffer& b : out.chunked) b.offset = bytes, bytes += round_up(block_elements * dtype_size(b.dtype), 16);
    const int64_t blocks = std::max(1, options.occupancy_threads / threads);
    if (bytes <= device.shared_per_block && blocks * (bytes + 1024) <= device.shared_per_multiprocessor) {
      out.chunked_in_shared = true;
      out.shared_bytes = bytes;
    }
  }
  // Chunked stores only where they make room for chunked weights: on the H200 they cost softmax
  // 5-8% (it ran at 3.62 TB/s on [32768x4096] with them, 3.82 without) but let layer norm split
  // over a cluster read its weights a chunk at a time without spilling (+3%).
  out.chunked_stores = !chunked.empty();
  std::set<int> loads, stores;
  for (const StagedBuffer& b : out.buffers) (b.is_output ? stores : loads).insert(b.param);
  for (const StagedBuffer& b : out.chunked) loads.insert(b.param);
  redirect_staged(out.body, loads, stores, "kiln_e");
  // The next row's inputs in flight while this one computes: a second array per per-row input.
  int input_words = 0;
  for (const StagedBuffer& b : out.buffers)
    if (!b.is_output && !b.row_invariant) input_words += words(b);
  if (options.prefetch && out.bulk_stages == 0 && used + input_words <= options.register_words) {
    out.prefetch = true;
    used += input_words;
  }
  // Mean and variance fuse only up to 16 elements a thread (fuse_norm_max_per_thread), with 96
  // registers a thread or more, in bulk rows of one block (no prefetch array, no cluster), or split
  // over a cluster by mail: their reduction keeps ~6 more values live, and at 32 elements (64
  // registers) layer_norm then spilled and ran 5-25% slower than unfused on the H200
  // (bench/results/gpu-h200-compiled-*.md); as bulk rows [4096x32768] ran at 3.24 TB/s fused, 2.70
  // unfused (split over a cluster with a barrier: 1.91 and 1.94; by mail with the register
  // prefetch [512x262144] ran at 2.54 fused, two cluster reductions a row 2.01).
  const int registers = 65536 / std::max(1, options.occupancy_threads);
  const bool by_mail = out.cluster > 1 && forms.mail.enabled && out.bulk_stages == 0;
  if (forms.fused.enabled)
    out.fused = fuse_row_reductions(out.body, /*mean_squares=*/out.per_thread <= forms.fused.norm_max_per_thread ||
                                                   registers >= 96 || (out.bulk_stages > 0 && out.cluster == 1) ||
                                                   by_mail);
  plan_kept_values(out, options.register_words - used);
  plan_reciprocals(out, params);
  out.mail = uses_cluster_mail(out, forms.mail);
  out.occupancy_threads = options.occupancy_threads;
  return out;
}

}  // namespace kiln::codegen::cuda
