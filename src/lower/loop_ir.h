// Loop IR: one fused kernel as loop nests over symbolic extents, scalar expressions built from the
// op table's elementwise ops, strided loads/stores with simplified index expressions, and
// accumulators. Why: the level between "which ops share a kernel" and "which C++ to print", where
// the schedule (parallel, vector, collapsed dims) is decided and can be printed and verified.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/attrs.h"
#include "kiln/ops.h"
#include "kiln/symint.h"

namespace kiln::lower {

// The fold of a reduction accumulator.
enum class Fold : uint8_t { Sum, Prod, Max, Min };
std::string_view fold_name(Fold f);

// Index expressions are SymInts over loop variables ("i0", "i1"...) and the kernel's run-time
// extents ("s0", "s1"...); SymInt keeps them in canonical (simplified) polynomial form, and
// floordiv/mod only appear where a reshape of a non-contiguous view needs them.
using Index = SymInt;

struct Scalar;
using ScalarPtr = std::shared_ptr<const Scalar>;

// A scalar value computed inside a loop body.
struct Scalar {
  enum Kind : uint8_t {
    kLoad,   // param[index], converted to the compute type of dtype
    kOp,     // an elementwise op of the op table applied to args
    kConst,  // a literal
    kRef,    // a named scalar: a Let or an accumulator
    kIndexValue,  // the value of an index expression (e.g. a symbolic element count), as dtype
  };
  Kind kind = kConst;
  DType dtype = DType::F32;  // the dtype of the value (computed in compute_type(dtype))
  int param = -1;            // kLoad
  Index index;               // kLoad, kIndexValue
  Op op = Op::Add;           // kOp
  Attrs attrs;               // kOp
  std::vector<ScalarPtr> args;
  double value = 0;          // kConst
  std::string name;          // kRef

  static ScalarPtr load(DType dtype, int param, Index index);
  static ScalarPtr apply(Op op, DType dtype, Attrs attrs, std::vector<ScalarPtr> args);
  static ScalarPtr constant(DType dtype, double value);
  static ScalarPtr ref(DType dtype, std::string name);
  static ScalarPtr index_value(DType dtype, Index index);
};

struct Stmt {
  enum Kind : uint8_t {
    kFor,        // for var in [0, extent): body
    kLet,        // const name = value
    kStore,      // param[index] = value (converted to the param's dtype)
    kAccInit,    // accumulator name = identity of fold
    kAccUpdate,  // name = fold(name, value)
  };
  Kind kind = kLet;
  // kFor
  std::string var;
  Index extent;
  bool parallel = false;   // distribute iterations over threads (OpenMP)
  int collapse = 1;        // with parallel: this many perfectly nested loops share the threads
  bool vectorize = false;  // ask for SIMD (innermost, unit-stride loops)
  Index parallel_work;     // with parallel: total iterations below which it runs on one thread
  std::vector<Stmt> body;
  // kLet, kAccInit, kAccUpdate
  std::string name;
  DType dtype = DType::F32;
  Fold fold = Fold::Sum;
  ScalarPtr value;
  // kStore
  int param = -1;
  Index index;

  static Stmt for_loop(std::string var, Index extent, std::vector<Stmt> body);
  static Stmt let(std::string name, ScalarPtr value);
  static Stmt store(int param, Index index, ScalarPtr value);
  static Stmt acc_init(std::string name, DType dtype, Fold fold);
  static Stmt acc_update(std::string name, DType dtype, Fold fold, ScalarPtr value);
};

struct KernelParam {
  std::string label;  // "x", "%12" - the value it holds, for printing
  DType dtype = DType::F32;
  bool is_output = false;
  Index numel;        // elements in the buffer (bytes moved = numel * size, each read once)
  bool may_alias = false;  // shares its buffer with another param (written in place): no __restrict
};

struct LoopKernel {
  std::string name;                      // C symbol: kiln_<graph>_k<N>
  std::vector<KernelParam> params;       // buffer arguments, in order
  std::vector<std::string> symbols;      // run-time extents s0, s1...: what each stands for
  std::vector<Stmt> body;
  std::vector<std::string> source_ops;   // graph ops it came from (for the scoreboard)
  Index iterations;                      // points of its iteration space (for FLOPs)
  int ops_per_point = 0;                 // elementwise ops per point (FLOP estimate)
  int64_t parallel_threshold = 32768;    // parallel loops with less work run on one thread
  std::vector<std::string> notes;        // lowering choices worth explaining (printed with the IR)
};

// Compute type of a dtype inside generated code: f16/bf16 compute in float, ints in their own type.
std::string_view compute_type_name(DType t);

std::string print_kernel(const LoopKernel& k);
// Checks: loop vars and refs defined before use and not redefined, indices only use enclosing
// loop vars and declared extents, loads read inputs and stores write outputs of matching dtype,
// parallel loops are perfectly nested as declared. Throws kiln::Error naming the kernel.
void verify_kernel(const LoopKernel& k);

}  // namespace kiln::lower
