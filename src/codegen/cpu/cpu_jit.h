// The CPU target: assembles one C++ translation unit from Loop IR kernels, compiles it with the
// system compiler ($CXX or g++ from PATH) into a shared object, and loads it with dlopen. Why:
// the system compiler already vectorises and schedules loops well; Kiln decides what to fuse.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lower/loop_ir.h"

namespace kiln::codegen::cpu {

// Signature of every generated kernel.
using KernelFn = void (*)(void* const* bufs, const int64_t* syms, int nthreads, int* status);

std::string translation_unit(const std::vector<const lower::LoopKernel*>& kernels);

struct CompilerConfig {
  std::string cxx;                  // compiler executable
  std::vector<std::string> flags;   // recorded: part of the cache key and of explain()
  std::string identity;             // "g++ (Debian 12.2.0-14) 12.2.0": part of the cache key
  std::string command_line(const std::string& src, const std::string& out) const;
};

// The x86-64 microarchitecture level of this CPU: "x86-64-v4", "x86-64-v3" or "" (below, or not
// x86-64). No compiler needed (loading an artefact checks it).
std::string cpu_isa_level();

// The x86-64 microarchitecture level of this CPU that the compiler `cxx` can target:
// "x86-64-v4" (AVX-512 F/BW/CD/DQ/VL), "x86-64-v3" (AVX2, FMA, BMI1/2), or "" (the baseline,
// non-x86 machines, or a compiler without -march=x86-64-vN).
std::string host_isa_level(const std::string& cxx);

// $CXX or g++; -O3 -fopenmp -fPIC -shared -fno-math-errno (never -ffast-math). Vector ISA:
// -march=native (with -mprefer-vector-width=512) when asked; else, with `host_isa`, the CPU's
// x86-64 level (host_isa_level: a named level, so the flags, and so the cache key, differ between
// machines that differ: a shared cache never hands an AVX-512 object to an AVX2 machine); else the
// baseline (artefacts meant for other machines: `kiln compile`). Throws kiln::Error when no
// compiler runs.
CompilerConfig default_compiler(bool march_native, const std::vector<std::string>& extra_flags, bool host_isa = false);

// Compiles source_path into out_path; throws kiln::Error with the compiler's output on failure.
void compile_shared_object(const CompilerConfig& cfg, const std::string& source_path,
                           const std::string& out_path);

// A dlopen'ed shared object; closed when the last reference goes.
class SharedObject {
 public:
  // Throws kiln::Error with dlerror() when the file cannot be loaded.
  explicit SharedObject(const std::string& path);
  ~SharedObject();
  SharedObject(const SharedObject&) = delete;
  SharedObject& operator=(const SharedObject&) = delete;
  KernelFn kernel(const std::string& name) const;  // throws when missing
  const std::string& path() const { return path_; }

 private:
  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace kiln::codegen::cpu
