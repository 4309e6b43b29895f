// Text of the fused elementwise-chain kernel, the op table's names and the float64 reference.
#include "runtime/cuda/elementwise_chain.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "kiln/error.h"

namespace kiln::cuda {
namespace {

struct ChainOpInfo {
  std::string_view name;
  bool takes_scalar;
  std::string_view cuda_expression;
};

constexpr ChainOpInfo kChainOps[] = {
#define KILN_X(e, name, scalar, expr) {name, scalar, expr},
    KILN_CHAIN_OPS(KILN_X)
#undef KILN_X
};

const ChainOpInfo& info(ChainOp op) { return kChainOps[int(op)]; }

// An exact C++ float literal for the f32 value of `value`: "(0x1.8p+0f)".
std::string float_literal(double value, const std::string& kernel) {
  const float rounded = float(value);
  KILN_CHECK(std::isfinite(rounded), "elementwise chain kernel ", kernel,
             ": scalar operand ", value, " is not a finite f32");
  char text[64];
  std::snprintf(text, sizeof text, "(%af)", double(rounded));
  return text;
}

std::string trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t");
  size_t end = text.find_last_not_of(" \t");
  return begin == std::string_view::npos ? "" : std::string(text.substr(begin, end - begin + 1));
}

}  // namespace

std::string_view chain_op_name(ChainOp op) { return info(op).name; }
bool chain_op_takes_scalar(ChainOp op) { return info(op).takes_scalar; }

std::optional<ChainOp> parse_chain_op(std::string_view name) {
  for (int i = 0; i < int(std::size(kChainOps)); ++i) {
    if (kChainOps[i].name == name) return ChainOp(i);
  }
  return std::nullopt;
}

std::vector<ChainStep> parse_chain(std::string_view text) {
  std::vector<ChainStep> steps;
  std::stringstream stream{std::string(text)};
  std::string item;
  while (std::getline(stream, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    std::string name = item;
    std::optional<double> scalar;
    if (size_t open = item.find('('); open != std::string::npos) {
      KILN_CHECK(item.back() == ')', "elementwise chain step '", item, "' lacks a closing ')'");
      name = trim(item.substr(0, open));
      std::string number = trim(item.substr(open + 1, item.size() - open - 2));
      char* end = nullptr;
      scalar = std::strtod(number.c_str(), &end);
      KILN_CHECK(!number.empty() && end && *end == '\0', "elementwise chain step '", item,
                 "': '", number, "' is not a number");
    }
    std::optional<ChainOp> op = parse_chain_op(name);
    KILN_CHECK(op, "unknown elementwise chain op '", name, "' in '", text,
               "' (known: add, sub, mul, max, min, relu, neg, abs, exp, tanh, sigmoid, gelu)");
    KILN_CHECK(chain_op_takes_scalar(*op) == scalar.has_value(), "elementwise chain op '", name,
               chain_op_takes_scalar(*op) ? "' needs a scalar, as in " : "' takes no scalar: ",
               name, chain_op_takes_scalar(*op) ? "(2)" : "");
    steps.push_back({*op, scalar.value_or(0)});
  }
  return steps;
}

std::string chain_to_string(const std::vector<ChainStep>& steps) {
  std::string out;
  for (const ChainStep& step : steps) {
    if (!out.empty()) out += ",";
    out += chain_op_name(step.op);
    if (chain_op_takes_scalar(step.op)) {
      char number[32];
      std::snprintf(number, sizeof number, "(%.9g)", step.scalar);
      out += number;
    }
  }
  return out;
}

double apply_step_reference(const ChainStep& step, double x) {
  const double s = step.scalar;
  switch (step.op) {
    case ChainOp::Add: return x + s;
    case ChainOp::Sub: return x - s;
    case ChainOp::Mul: return x * s;
    case ChainOp::Max: return std::fmax(x, s);
    case ChainOp::Min: return std::fmin(x, s);
    case ChainOp::Relu: return std::fmax(x, 0.0);
    case ChainOp::Neg: return -x;
    case ChainOp::Abs: return std::fabs(x);
    case ChainOp::Exp: return std::exp(x);
    case ChainOp::Tanh: return std::tanh(x);
    case ChainOp::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case ChainOp::Gelu: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
  }
  return x;
}

double apply_chain_reference(const std::vector<ChainStep>& steps, double x) {
  for (const ChainStep& step : steps) x = apply_step_reference(step, x);
  return x;
}

bool chain_supports_dtype(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

int chain_vector_width(DType dtype) { return 16 / dtype_size(dtype); }

std::string chain_kernel_name(const std::vector<ChainStep>& steps, DType dtype) {
  std::string name = "kiln_chain_" + std::string(dtype_name(dtype));
  if (steps.empty()) return name + "_copy";
  for (const ChainStep& step : steps) name += "_" + std::string(chain_op_name(step.op));
  return name;
}

std::string chain_kernel_source(const std::vector<ChainStep>& steps, DType dtype,
                                const ChainKernelOptions& options) {
  const std::string kernel = chain_kernel_name(steps, dtype);
  KILN_CHECK(chain_supports_dtype(dtype), "elementwise chain kernel ", kernel,
             ": dtype ", dtype_name(dtype), " is not supported (f32, f16 and bf16 are)");
  KILN_CHECK(options.block_threads > 0 && options.block_threads <= 1024 &&
                 options.vectors_per_thread >= 1 && options.vectors_per_thread <= 16,
             "elementwise chain kernel ", kernel, ": block of ", options.block_threads,
             " threads with ", options.vectors_per_thread, " vectors each is out of range");
  const int width = chain_vector_width(dtype);
  std::ostringstream src;
  src << "// Kiln elementwise chain over " << dtype_name(dtype) << ": "
      << (steps.empty() ? "copy" : chain_to_string(steps)) << "\n"
      << "// Generated; computes in f32, " << width << " elements per 16-byte vector.\n";
  if (dtype == DType::F32) {
    src << "typedef float kiln_elem;\n"
           "__device__ __forceinline__ float kiln_load(float v) { return v; }\n"
           "__device__ __forceinline__ float kiln_store(float f) { return f; }\n";
  } else {
    const bool bf16 = dtype == DType::BF16;
    src << "typedef unsigned short kiln_elem;\n";
    if (bf16) {
      src << "__device__ __forceinline__ float kiln_load(kiln_elem v) {\n"
             "  return __uint_as_float(((unsigned)v) << 16);\n}\n";
    } else {
      src << "__device__ __forceinline__ float kiln_load(kiln_elem v) {\n"
             "  float f;\n  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(v));\n  return f;\n}\n";
    }
    src << "__device__ __forceinline__ kiln_elem kiln_store(float f) {\n"
           "  kiln_elem r;\n  asm(\"cvt.rn."
        << (bf16 ? "bf16" : "f16") << ".f32 %0, %1;\" : \"=h\"(r) : \"f\"(f));\n  return r;\n}\n";
  }
  src << "__device__ __forceinline__ float kiln_apply(float x) {\n";
  for (const ChainStep& step : steps) {
    const ChainOpInfo& op = info(step.op);
    src << "  {";
    if (op.takes_scalar) src << " const float s = " << float_literal(step.scalar, kernel) << ";";
    src << " x = " << op.cuda_expression << "; }  // " << chain_to_string({step}) << "\n";
  }
  src << "  return x;\n}\n";
  if (dtype == DType::F32) {
    src << "__device__ __forceinline__ unsigned kiln_word(unsigned w) {\n"
           "  return __float_as_uint(kiln_apply(__uint_as_float(w)));\n}\n";
  } else {
    src << "__device__ __forceinline__ unsigned kiln_word(unsigned w) {\n"
           "  unsigned lo = kiln_store(kiln_apply(kiln_load((kiln_elem)(w & 0xffffu))));\n"
           "  unsigned hi = kiln_store(kiln_apply(kiln_load((kiln_elem)(w >> 16))));\n"
           "  return lo | (hi << 16);\n}\n";
  }
  src << "__device__ __forceinline__ uint4 kiln_vector(uint4 v) {\n"
         "  v.x = kiln_word(v.x); v.y = kiln_word(v.y); v.z = kiln_word(v.z); v.w = kiln_word(v.w);\n"
         "  return v;\n}\n";
  const int unroll = options.vectors_per_thread;
  src << "extern \"C\" __global__ void __launch_bounds__(" << options.block_threads << ")\n"
      << kernel << "(const void* __restrict__ in_raw, void* __restrict__ out_raw, long long n) {\n"
      << "  const uint4* __restrict__ in = (const uint4*)in_raw;\n"
         "  uint4* __restrict__ out = (uint4*)out_raw;\n"
      << "  const long long vectors = n / " << width << ";\n"
      << "  const long long stride = (long long)gridDim.x * blockDim.x;\n"
         "  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  long long i = first;\n"
         "  // Grid-stride loop; each step issues all its 16-byte loads before the first store.\n"
      << "  for (; i + " << unroll - 1 << " * stride < vectors; i += " << unroll << " * stride) {\n"
      << "    uint4 v[" << unroll << "];\n"
      << "#pragma unroll\n    for (int u = 0; u < " << unroll << "; ++u) v[u] = in[i + u * stride];\n"
      << "#pragma unroll\n    for (int u = 0; u < " << unroll
      << "; ++u) out[i + u * stride] = kiln_vector(v[u]);\n  }\n"
      << "  for (; i < vectors; i += stride) out[i] = kiln_vector(in[i]);\n"
      << "  // The n % " << width << " elements past the last whole vector.\n"
      << "  const kiln_elem* in_tail = (const kiln_elem*)in_raw;\n"
         "  kiln_elem* out_tail = (kiln_elem*)out_raw;\n"
      << "  for (long long j = vectors * " << width << " + first; j < n; j += stride)\n"
      << "    out_tail[j] = kiln_store(kiln_apply(kiln_load(in_tail[j])));\n}\n";
  return src.str();
}

}  // namespace kiln::cuda
