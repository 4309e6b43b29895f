// The CPU target's translation unit, compiler invocation and loader (see cpu_jit.h).
#include "codegen/cpu/cpu_jit.h"

#include <dlfcn.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "codegen/common/c_emitter.h"
#include "kiln/error.h"

namespace kiln::codegen::cpu {

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a shell command, returning its exit status and combined output.
int run_command(const std::string& cmd, std::string* output) {
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) output->append(buf, n);
  int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

std::string translation_unit(const std::vector<const lower::LoopKernel*>& kernels) {
  std::ostringstream os;
  os << c_prelude() << "\n";
  CTarget target;
  for (const auto* k : kernels) os << emit_kernel(*k, target) << "\n";
  return os.str();
}

std::string CompilerConfig::command_line(const std::string& src, const std::string& out) const {
  std::string cmd = shell_quote(cxx);
  for (const auto& f : flags) cmd += " " + shell_quote(f);
  return cmd + " " + shell_quote(src) + " -o " + shell_quote(out);
}

std::string cpu_isa_level() {
  std::string level;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  const bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
                  __builtin_cpu_supports("bmi2");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512vl");
  level = v4 ? "x86-64-v4" : v3 ? "x86-64-v3" : "";
#endif
  return level;
}

std::string host_isa_level(const std::string& cxx) {
  const std::string level = cpu_isa_level();
  if (level.empty()) return level;
  // Whether this compiler knows the level's name (GCC 11, Clang 12), asked once per compiler.
  static std::mutex mu;
  static std::map<std::string, bool> knows;
  std::lock_guard<std::mutex> lock(mu);
  auto it = knows.find(cxx + " " + level);
  if (it == knows.end()) {
    std::string out;
    const int rc = run_command(shell_quote(cxx) + " -march=" + level + " -x c++ -E - < /dev/null", &out);
    it = knows.emplace(cxx + " " + level, rc == 0).first;
  }
  return it->second ? level : "";
}

CompilerConfig default_compiler(bool march_native, const std::vector<std::string>& extra_flags, bool host_isa) {
  CompilerConfig cfg;
  const char* env = std::getenv("CXX");
  cfg.cxx = env && *env ? env : "g++";
  // -fno-trapping-math: results are unchanged (Kiln never reads FP exception flags), but without it GCC
  // refuses to if-convert float comparisons (relu, max, clamps, kiln_exp), so those loops stay scalar.
  cfg.flags = {"-std=c++17", "-O3", "-fopenmp", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math", "-w"};
  // GCC tunes AVX-512 CPUs to 256-bit vectors; the row kernels (softmax's exp pass, norms) are
  // compute-bound in L1 and ran 10-25% faster at 512 bits on the Xeon bench host, and the
  // streaming ones were unchanged (docs/compiler.md). A no-op on CPUs without AVX-512.
  if (march_native) {
    cfg.flags.push_back("-march=native");
    cfg.flags.push_back("-mprefer-vector-width=512");
  } else if (const std::string level = host_isa ? host_isa_level(cfg.cxx) : ""; !level.empty()) {
    cfg.flags.push_back("-march=" + level);
    if (level == "x86-64-v4") cfg.flags.push_back("-mprefer-vector-width=512");
  }
#ifdef KILN_JIT_SANITIZE
  // A sanitizer build (-DKILN_SANITIZE=ON) checks the generated kernels too: an out-of-bounds
  // access in a generated loop or undefined behaviour in a formula aborts the test that ran it,
  // naming the kernel's source line. The flags are part of the cache key like any other.
  for (const char* f : {"-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer"})
    cfg.flags.push_back(f);
#endif
  for (const auto& f : extra_flags) cfg.flags.push_back(f);
  // The compiler's identity is asked once per compiler path.
  static std::mutex mu;
  static std::map<std::string, std::string> identities;
  std::lock_guard<std::mutex> lock(mu);
  auto it = identities.find(cfg.cxx);
  if (it == identities.end()) {
    std::string out;
    int rc = run_command(shell_quote(cfg.cxx) + " --version", &out);
    KILN_CHECK(rc == 0, "cannot run the C++ compiler '", cfg.cxx,
               "' (set $CXX or put g++ on PATH): ", out);
    std::string version;
    run_command(shell_quote(cfg.cxx) + " -dumpfullversion -dumpversion", &version);
    it = identities.emplace(cfg.cxx, out.substr(0, out.find('\n')) + " / " + version).first;
  }
  cfg.identity = it->second;
  return cfg;
}

void compile_shared_object(const CompilerConfig& cfg, const std::string& source_path,
                           const std::string& out_path) {
  std::string output;
  std::string cmd = cfg.command_line(source_path, out_path);
  int rc = run_command(cmd, &output);
  KILN_CHECK(rc == 0, "the C++ compiler failed on generated code (", source_path, "):\n  ", cmd,
             "\n", output.substr(0, 4000));
}

SharedObject::SharedObject(const std::string& path) : path_(path) {
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* err = dlerror();
    throw Error(str("cannot load compiled kernels ", path, ": ", err ? err : "unknown error"));
  }
}

SharedObject::~SharedObject() {
  if (handle_) dlclose(handle_);
}

KernelFn SharedObject::kernel(const std::string& name) const {
  void* sym = dlsym(handle_, name.c_str());
  KILN_CHECK(sym != nullptr, "compiled kernels ", path_, " have no symbol ", name);
  return reinterpret_cast<KernelFn>(sym);
}

}  // namespace kiln::codegen::cpu
