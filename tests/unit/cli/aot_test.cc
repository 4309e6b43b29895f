// Ahead-of-time artefacts (include/kiln/aot.h): a saved artefact loads without the system compiler
// and gives the JIT's outputs; corrupt, mismatched and foreign artefacts are refused by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kiln/aot.h"
#include "kiln/compile.h"
#include "kiln/error.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s), Device::CPU}; }

// exp(x * w) + 1 over a symbolic batch, then a matmul (a library call); w is big enough to land
// in weights.bin.
std::unique_ptr<Graph> model() {
  auto g = std::make_unique<Graph>("aot_model");
  Value* x = g->add_input("x", f32({SymInt::symbol("B"), 96}));
  Value* w = g->constant(HostTensor::random(DType::F32, {96}, 11));
  Value* m = g->constant(HostTensor::random(DType::F32, {96, 8}, 12));
  Value* e = g->add(Op::Add, {g->add(Op::Exp, {g->add(Op::Mul, {x, w})}), g->scalar(DType::F32, 1.0)});
  g->set_outputs({g->add(Op::MatMul, {e, m})});
  return g;
}

CompileOptions options() {
  CompileOptions o;
  o.cache_dir = (fs::temp_directory_path() / "kiln-test-cache").string();
  return o;
}

std::string fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / str("kiln-aot-test-", name, "-", getpid());
  fs::remove_all(d);
  return d.string();
}

// Sets $CXX for one scope; a loader that ran the compiler would fail on this path.
struct NoCompiler {
  std::string old;
  bool had = false;
  NoCompiler() {
    if (const char* c = std::getenv("CXX")) { old = c; had = true; }
    setenv("CXX", "/nonexistent/kiln-test-no-compiler", 1);
  }
  ~NoCompiler() { had ? setenv("CXX", old.c_str(), 1) : unsetenv("CXX"); }
};

std::string saved(const std::string& name) {
  auto g = model();
  auto exe = compile(*g, options());
  std::string dir = fresh_dir(name);
  save_compiled(*g, *exe, dir, options());
  return dir;
}

void expect_refused(const std::string& dir, const std::string& needle) {
  NoCompiler guard;
  try {
    load_compiled(dir);
    ADD_FAILURE() << "loading " << dir << " should fail mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Aot, RoundTripMatchesJitWithoutCompiler) {
  auto g = model();
  auto jit = compile(*g, options());
  std::string dir = fresh_dir("roundtrip");
  save_compiled(*g, *jit, dir, options());
  EXPECT_TRUE(fs::exists(fs::path(dir) / "kernels.so"));
  EXPECT_GT(fs::file_size(fs::path(dir) / "weights.bin"), 96u * 8 * 4 - 1);

  NoCompiler guard;
  CompiledArtefact a = load_compiled_artefact(dir);
  EXPECT_EQ(a.executable->stats().compile_ms, 0);
  EXPECT_EQ(fs::path(a.executable->stats().shared_object).parent_path(), fs::absolute(dir));
  EXPECT_EQ(a.executable->source(), jit->source());
  for (int64_t batch : {1, 5}) {
    std::vector<HostTensor> in = {HostTensor::random(DType::F32, {batch, 96}, uint64_t(batch))};
    HostTensor want = jit->run(in).at(0), got = a.executable->run(in).at(0);
    ASSERT_EQ(got.shape(), want.shape());
    for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(got.get_f64(i), want.get_f64(i)) << "element " << i;
  }
  fs::remove_all(dir);
}

TEST(Aot, CorruptSharedObjectIsRefused) {
  std::string dir = saved("corrupt");
  {
    std::fstream f(fs::path(dir) / "kernels.so", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  expect_refused(dir, "kernels.so is corrupt");
  fs::remove_all(dir);
}

TEST(Aot, MismatchedSourceHashIsRefused) {
  std::string dir = saved("mismatch");
  fs::path manifest = fs::path(dir) / "manifest.json";
  std::ifstream in(manifest);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t at = text.find("\"source_hash\": \"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at + 16, 32, std::string(32, '0'));
  std::ofstream(manifest) << text;
  expect_refused(dir, "different Kiln version");
  fs::remove_all(dir);
}

TEST(Aot, ForeignOrMissingArtefactsAreRefused) {
  std::string dir = fresh_dir("missing");
  expect_refused(dir, "is not a directory");
  fs::create_directories(dir);
  std::ofstream(fs::path(dir) / "manifest.json") << "{\"format\": \"something-else\"}";
  expect_refused(dir, "not a Kiln artefact manifest");
  std::ofstream(fs::path(dir) / "manifest.json") << "{ not json";
  expect_refused(dir, "not valid JSON");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln
