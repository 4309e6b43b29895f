// Vector points for the CUDA target's pointwise kernels: each thread takes V consecutive points of
// the innermost loop, and every buffer the body reads or writes contiguously along it moves as one
// 16-byte vector (element by element where a view is not aligned). Why: one 2-byte load or store
// per thread left bf16 pointwise kernels (the exact-gelu epilogue after a GEMM) at ~1 TB/s.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lower/loop_ir.h"

namespace kiln::codegen::cuda {

struct VectorAccess {
  int param = -1;
  lower::Index first;  // the element index of the thread's first point (innermost var -> var_base)
};

struct VectorPoints {
  int vector = 0;                     // points per thread; 0: the kernel is not vectorised
  std::string var;                    // the innermost loop variable
  std::vector<VectorAccess> loads;    // read as p<kStagedParamBase + param>[kiln_j]
  std::vector<VectorAccess> stores;   // written there, stored after the points
  std::vector<lower::Stmt> body;      // the point's statements with those accesses redirected
};

// `inner`: the statements run per point (no loops); `innermost`: the innermost loop of the grid
// nest. Vectorises when that loop has a constant extent divisible by V (16 bytes over the widest
// vectorised element) and some buffer is read or written as `base + var` (the same base each time,
// and never both read and written). Other accesses stay scalar, per point.
VectorPoints plan_vector_points(const std::vector<lower::Stmt>& inner, const lower::Stmt& innermost,
                                const std::vector<lower::KernelParam>& params);

}  // namespace kiln::codegen::cuda
