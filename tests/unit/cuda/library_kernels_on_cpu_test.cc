// The depthwise conv kernels' CUDA text (library_kernel_source.cc) run on the CPU: the text is
// compiled by the host C++ compiler with a small shim (threadIdx and blockIdx per std::thread, 256
// threads a block sharing its __shared__ arrays and a barrier for __syncthreads, blocks in turn),
// launched with the parameters and grid the real planner (plan_library_kernel) gives, and held
// against the reference interpreter. Why: CI has no GPU, and these kernels' tiling and index math
// (bands, staged halos, planes a block, channel chunks) are where bugs hide; the GPU test
// (library_kernels_test.cc) runs the same shapes on the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "codegen/cpu/cpu_jit.h"
#include "codegen/cuda/library_kernels.h"
#include "common/compare.h"
#include "kiln/error.h"
#include "kiln/interp.h"

namespace kiln::testing {
namespace {

using Ints = std::vector<int64_t>;

// Enough of CUDA for the library kernels' text to compile and run as host C++ (f32 and bf16).
const char* kShim = R"SHIM(
#include <condition_variable>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>
#define __device__
#define __global__
#define __shared__ static
#define __launch_bounds__(x)
#define __align__(x) __attribute__((aligned(x)))
namespace kstd = std;
struct Dim3 { unsigned x = 1, y = 1, z = 1; };
thread_local Dim3 threadIdx, blockIdx;
Dim3 blockDim, gridDim;
struct Barrier {  // __syncthreads for one block's threads
  std::mutex m; std::condition_variable cv; int count = 0, waiting = 0; long generation = 0;
  void wait() {
    std::unique_lock<std::mutex> lock(m);
    const long g = generation;
    if (++waiting == count) { waiting = 0; ++generation; cv.notify_all(); return; }
    cv.wait(lock, [&] { return generation != g; });
  }
};
Barrier g_barrier;
inline void __syncthreads() { g_barrier.wait(); }
inline int atomicOr(int* p, int v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float kiln_b2f(uint16_t b) { uint32_t u = uint32_t(b) << 16; float f; std::memcpy(&f, &u, 4); return f; }
inline uint16_t kiln_f2b(float f) { uint32_t u; std::memcpy(&u, &f, 4); u += 0x7fff + ((u >> 16) & 1); return uint16_t(u >> 16); }
inline float kiln_h2f(uint16_t) { return NAN; }      // f16 is not emulated
inline uint16_t kiln_f2h(float) { return 0x7e00; }
)SHIM";

// Calls kernel `syms[0]` (an index into the kernels below) with grid `syms[1]` and the `syms[2]`
// parameters from syms[3]; bufs: x, w, bias (or null), y.
const char* kDriver = R"DRIVER(
typedef void (*Kernel)(const KilnLibArgs);
extern "C" void kiln_emulate(void* const* bufs, const int64_t* syms, int, int*) {
  static const Kernel kernels[] = {kiln_lib_dwconv2d_f32, kiln_lib_dwconv2d_nhwc_f32, kiln_lib_dwconv2d_bf16,
                                   kiln_lib_dwconv2d_nhwc_bf16};
  const Kernel k = kernels[syms[0]];
  KilnLibArgs a = {};
  for (int i = 0; i < 3; ++i) a.in[i] = bufs[i];
  a.out[0] = bufs[3];
  for (int64_t i = 0; i < syms[2]; ++i) a.p[i] = syms[3 + i];
  blockDim.x = 256;
  gridDim.x = unsigned(syms[1]);
  g_barrier.count = 256;
  std::vector<std::thread> threads;  // the block's threads, through the blocks in turn
  for (unsigned t = 0; t < 256; ++t)
    threads.emplace_back([&, t] {
      threadIdx.x = t;
      for (int64_t b = 0; b < syms[1]; ++b) {
        blockIdx.x = unsigned(b);
        k(a);
        g_barrier.wait();  // the next block reuses the __shared__ arrays
      }
    });
  for (auto& th : threads) th.join();
}
)DRIVER";

const std::vector<std::string> kKernels = {"kiln_lib_dwconv2d_f32", "kiln_lib_dwconv2d_nhwc_f32", "kiln_lib_dwconv2d_bf16",
                                           "kiln_lib_dwconv2d_nhwc_bf16"};

class Emulator {
 public:
  Emulator() {
    namespace fs = std::filesystem;
    dir_ = fs::temp_directory_path() / ("kiln-emulated-kernels-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    const std::string src = (dir_ / "kernels.cc").string(), so = (dir_ / "kernels.so").string();
    std::ofstream(src) << kShim << codegen::cuda::library_kernels_source({kKernels.begin(), kKernels.end()}) << kDriver;
    codegen::cpu::CompilerConfig cfg;
    const char* cxx = std::getenv("CXX");
    cfg.cxx = cxx && *cxx ? cxx : "g++";
    cfg.flags = {"-std=c++17", "-O1", "-fPIC", "-shared", "-pthread", "-w"};
    codegen::cpu::compile_shared_object(cfg, src, so);
    object_ = std::make_unique<codegen::cpu::SharedObject>(so);
    run_ = object_->kernel("kiln_emulate");
  }
  ~Emulator() { std::filesystem::remove_all(dir_); }

  // The graph's one conv2d node planned as compile_cuda plans it (tiled), run emulated.
  HostTensor run(const Graph& g, const std::vector<HostTensor>& inputs) {
    const Node& n = *g.nodes().back();
    const std::vector<codegen::cuda::LibraryLaunch> launches = codegen::cuda::plan_library_kernel(n, {}, true);
    EXPECT_EQ(launches.size(), 1u);
    const codegen::cuda::LibraryLaunch& l = launches[0];
    HostTensor y = HostTensor::empty(n.outputs[0]->type.dtype, n.outputs[0]->type.static_shape());
    void* bufs[4] = {nullptr, nullptr, nullptr, y.raw()};
    for (size_t i = 0; i < inputs.size(); ++i) bufs[i] = const_cast<void*>(inputs[i].raw());
    const auto kernel = std::find(kKernels.begin(), kKernels.end(), l.kernel);
    EXPECT_NE(kernel, kKernels.end()) << l.kernel;
    std::vector<int64_t> syms = {int64_t(kernel - kKernels.begin()), std::clamp<int64_t>((l.points + 255) / 256, 0, 132 * 32),
                                 int64_t(l.params.size())};
    syms.insert(syms.end(), l.params.begin(), l.params.end());
    run_(bufs, syms.data(), 0, nullptr);
    return y;
  }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<codegen::cpu::SharedObject> object_;
  codegen::cpu::KernelFn run_ = nullptr;
};

struct Shape4 {
  int64_t n, c, h, w, k, sh, sw, dh, dw;
  Ints pads;
  bool bias;
};

TEST(CudaKernelsOnTheCpu, DepthwiseKernelsMatchTheInterpreter) {
  Emulator emu;
  const std::vector<Shape4> shapes = {
      {2, 5, 57, 59, 7, 1, 1, 1, 1, {3, 3, 3, 3}, true},    // bands of a wide plane
      {3, 37, 7, 7, 7, 1, 1, 1, 1, {3, 3, 3, 3}, false},    // several planes a block; 37 channels
      {2, 9, 31, 29, 5, 2, 2, 1, 1, {2, 2, 2, 2}, true},    // stride 2: the generic tap loop
      {1, 11, 19, 113, 3, 1, 1, 1, 1, {0, 1, 2, 1}, true},  // asymmetric pads
      {2, 6, 23, 17, 3, 2, 1, 2, 2, {2, 1, 2, 1}, true},    // dilation
      {1, 2, 5, 3001, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true},   // too wide to stage: the untiled form
      {2, 70, 19, 23, 7, 1, 1, 1, 1, {3, 3, 3, 3}, true},   // 70 channels: a partial lane chunk
      {1, 3, 2, 2, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true},      // a plane smaller than the window
  };
  int checked = 0;
  for (const Shape4& s : shapes)
    for (bool nhwc : {false, true})
      for (DType d : {DType::F32, DType::BF16}) {
        Graph g("dw");
        const Ints x_shape = nhwc ? Ints{s.n, s.h, s.w, s.c} : Ints{s.n, s.c, s.h, s.w};
        std::vector<Value*> ins = {g.add_input("x", TensorType{d, Shape(x_shape.begin(), x_shape.end()), Device::CPU}),
                                   g.add_input("w", TensorType{d, {s.c, 1, s.k, s.k}, Device::CPU})};
        if (s.bias) ins.push_back(g.add_input("b", TensorType{d, {s.c}, Device::CPU}));
        g.set_outputs({g.add(Op::Conv2d, ins,
                             {{"groups", s.c}, {"strides", Ints{s.sh, s.sw}}, {"dilations", Ints{s.dh, s.dw}}, {"pads", s.pads},
                              {"layout", std::string(nhwc ? "NHWC" : "NCHW")}})});
        std::vector<HostTensor> inputs;
        for (size_t i = 0; i < ins.size(); ++i)
          inputs.push_back(HostTensor::random(d, ins[i]->type.static_shape(), 40 + checked * 3 + i));
        const HostTensor want = interp::run(g, inputs)[0];
        EXPECT_EQ(compare_tensors(emu.run(g, inputs), want), "")
            << (nhwc ? "NHWC " : "NCHW ") << dtype_name(d) << " " << s.n << "x" << s.c << "x" << s.h << "x" << s.w << " k" << s.k;
        ++checked;
      }
  EXPECT_EQ(checked, 32);
}

}  // namespace
}  // namespace kiln::testing
