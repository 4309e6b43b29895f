// The generated CPU kernels' vector ISA: compiled for this CPU's x86-64 level by default (what the
// CPU benchmarks measure), named in the flags so the compile cache keeps machines apart, and the
// baseline for artefacts meant for other machines (`kiln compile`).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "codegen/cpu/cpu_jit.h"
#include "kiln/compile.h"
#include "kiln/graph.h"
#include "runtime/executable.h"

namespace kiln::testing {
namespace {

bool has_flag(const std::vector<std::string>& flags, const std::string& f) {
  return std::find(flags.begin(), flags.end(), f) != flags.end();
}

TEST(CpuIsa, JitKernelsTargetThisCpusLevelAndArtefactsTheBaseline) {
  const std::string level = codegen::cpu::host_isa_level("g++");
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_EQ(level, "x86-64-v4");
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_EQ(level, "x86-64-v3");
  }
#endif
  const std::vector<std::string> jit = codegen::cpu::default_compiler(false, {}, /*host_isa=*/true).flags;
  const std::vector<std::string> portable = codegen::cpu::default_compiler(false, {}).flags;
  EXPECT_EQ(has_flag(jit, "-march=" + level), !level.empty());
  for (const std::string& f : portable) EXPECT_EQ(f.rfind("-march", 0), std::string::npos) << f;
  // -march=native wins over the level when asked for.
  const std::vector<std::string> native = codegen::cpu::default_compiler(true, {}, true).flags;
  EXPECT_TRUE(has_flag(native, "-march=native"));
  EXPECT_FALSE(has_flag(native, "-march=" + level));
}

TEST(CpuIsa, ACompiledGraphRecordsTheLevelInItsCompilerCommand) {
  Graph g("isa");
  Value* x = g.add_input("x", TensorType{DType::F32, {37}, Device::CPU});
  g.set_outputs({g.add(Op::Exp, {x})});
  auto exe = compile(g, CompileOptions{});
  const std::string level = codegen::cpu::host_isa_level("g++");
  const std::string command = exe->explain();
  if (!level.empty()) {
    EXPECT_NE(command.find("-march=" + level), std::string::npos) << command;
  }
  HostTensor in = HostTensor::random(DType::F32, {37}, 3);
  HostTensor out = exe->run({in})[0];
  for (int64_t i = 0; i < 37; ++i) EXPECT_NEAR(out.get_f64(i), std::exp(in.get_f64(i)), 1e-6 * std::exp(in.get_f64(i)));
}

}  // namespace
}  // namespace kiln::testing
