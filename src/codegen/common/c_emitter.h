// The C-like emitter: prints a Loop IR kernel as a C++ function. Targets (CPU now, CUDA later)
// override only what differs through CTarget: function qualifiers, whether OpenMP pragmas are
// printed, and the helper prelude. Why: one place defines what each elementwise op means in C,
// so every target computes the same thing the interpreter does.
#pragma once

#include <string>

#include "kiln/graph.h"
#include "lower/loop_ir.h"

namespace kiln::codegen {

struct CTarget {
  std::string function_qualifier = "extern \"C\" void";
  bool openmp = true;  // parallel/simd pragmas
};

// Whether a generated kernel can compute elementwise node n (every elementwise op of the op table
// that has a scalar formula here, on every dtype).
bool can_emit_elementwise(const Node& n);

// Helper functions every generated translation unit starts with (16-bit float conversions,
// NaN-propagating max/min, wrapping integer division...).
std::string c_prelude();
// The prelude's integer division, remainder and power helpers, each declared `qualifier` ("inline";
// "__device__ inline" in the CUDA prelude).
std::string c_integer_helpers(const std::string& qualifier);
// The prelude's 8- and 4-bit float conversions (kiln_f32_to_narrow, kiln_narrow_to_f32, e8m0),
// shared the same way; they call the target's kiln_f32_bits / kiln_bits_f32.
std::string c_narrow_float_helpers(const std::string& qualifier);

// One kernel: `void name(void* const* bufs, const int64_t* syms, int nthreads, int* status)`.
// status is set to 1 when an integer division or modulo by zero happened.
std::string emit_kernel(const lower::LoopKernel& k, const CTarget& target);

// The pieces emit_kernel prints statements from, for targets that arrange loops their own way (the
// CUDA target maps loops to blocks and threads but prints every expression exactly as here).
std::string c_scalar_expression(const lower::Scalar& s);
std::string c_index_expression(const lower::Index& index);
std::string c_store_expression(DType param_dtype, const std::string& value);  // value -> storage
std::string c_storage_type(DType t);                                          // pointer element type
std::string c_accumulator_identity(DType t, lower::Fold f);
// Accumulators updated somewhere inside `body` but not initialised inside it, in first-use order
// (the ones a loop over `body` must combine across its lanes, threads or a CUDA block).
std::vector<const lower::Stmt*> c_outer_accumulators(const std::vector<lower::Stmt>& body);
std::string c_accumulator_update(const lower::Stmt& update);  // "acc = fold(acc, value);"
// "fold(a, b)" for combining two partial accumulators of one fold.
std::string c_fold_combine(DType t, lower::Fold f, const std::string& a, const std::string& b);

}  // namespace kiln::codegen
