// The compile cache: a miss builds, a hit loads without the compiler, a corrupt entry is rebuilt,
// and concurrent compilers of the same source (threads and processes) all end with a working
// shared object.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "unit/compile/compile_test_util.h"
#include "runtime/compile_cache.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

// A graph whose generated source is unique to `salt`, so each test starts from a cold key.
std::unique_ptr<Graph> salted_graph(double salt) {
  auto g = std::make_unique<Graph>("cache");
  Value* x = g->add_input("x", f32({33}));
  g->set_outputs({g->add(Op::Add, {g->add(Op::Exp, {x}), g->scalar(DType::F32, salt)})});
  return g;
}

CompileOptions fresh_dir(const std::string& name) {
  CompileOptions o = test_options();
  o.cache_dir = (fs::temp_directory_path() / str("kiln-cache-test-", name, "-", getpid())).string();
  fs::remove_all(o.cache_dir);
  return o;
}

void check_runs(const Graph& g, Executable& exe) {
  std::vector<HostTensor> in = {HostTensor::random(DType::F32, {33}, 3)};
  expect_matches_interpreter(g, in, exe, "cache");
}

TEST(CompileCache, MissThenHit) {
  CompileOptions o = fresh_dir("hit");
  auto g = salted_graph(1.25);
  auto first = compile(*g, o);
  EXPECT_FALSE(first->stats().cache_hit);
  EXPECT_GT(first->stats().compile_ms, 0);
  auto second = compile(*g, o);
  EXPECT_TRUE(second->stats().cache_hit);
  EXPECT_EQ(first->stats().cache_key, second->stats().cache_key);
  check_runs(*g, *second);
  // Another source is another key.
  auto other = compile(*salted_graph(2.5), o);
  EXPECT_NE(other->stats().cache_key, first->stats().cache_key);
  EXPECT_FALSE(other->stats().cache_hit);
  fs::remove_all(o.cache_dir);
}

TEST(CompileCache, FlagsArePartOfTheKey) {
  EXPECT_NE(runtime::CompileCache::key("src", "g++ 12", {"-O3"}),
            runtime::CompileCache::key("src", "g++ 12", {"-O2"}));
  EXPECT_NE(runtime::CompileCache::key("src", "g++ 12", {"-O3"}),
            runtime::CompileCache::key("src", "g++ 13", {"-O3"}));
  EXPECT_EQ(runtime::CompileCache::key("src", "g++ 12", {"-O3"}),
            runtime::CompileCache::key("src", "g++ 12", {"-O3"}));
}

TEST(CompileCache, CorruptEntryIsRebuilt) {
  CompileOptions o = fresh_dir("corrupt");
  auto g = salted_graph(3.75);
  std::string key = compile(*g, o)->stats().cache_key;
  runtime::CompileCache cache(o.cache_dir);
  {
    std::fstream f(cache.so_path(key), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.write("garbage!", 8);
  }
  auto again = compile(*g, o);
  EXPECT_FALSE(again->stats().cache_hit) << "a corrupt entry must not be loaded";
  check_runs(*g, *again);
  // A missing checksum is a miss too.
  fs::remove(cache.checksum_path(key));
  EXPECT_FALSE(compile(*g, o)->stats().cache_hit);
  EXPECT_TRUE(compile(*g, o)->stats().cache_hit);
  fs::remove_all(o.cache_dir);
}

TEST(CompileCache, ConcurrentThreadsShareOneBuild) {
  CompileOptions o = fresh_dir("threads");
  auto g = salted_graph(4.5);
  std::vector<std::shared_ptr<Executable>> exes(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < exes.size(); ++i)
    threads.emplace_back([&, i] { exes[i] = compile(*g, o); });
  for (auto& t : threads) t.join();
  int builds = 0;
  for (auto& e : exes) {
    builds += !e->stats().cache_hit;
    check_runs(*g, *e);
  }
  EXPECT_EQ(builds, 1) << "the per-key lock lets one thread build and the others load";
  fs::remove_all(o.cache_dir);
}

TEST(CompileCache, ConcurrentProcessesProduceAValidEntry) {
  CompileOptions o = fresh_dir("procs");
  auto g = salted_graph(5.5);
  std::vector<pid_t> kids;
  for (int i = 0; i < 3; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        auto exe = compile(*g, o);
        auto out = exe->run({HostTensor::random(DType::F32, {33}, 3)});
        rc = out.size() == 1 ? 0 : 2;
      } catch (...) {
        rc = 1;
      }
      _exit(rc);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto exe = compile(*g, o);
  EXPECT_TRUE(exe->stats().cache_hit);
  check_runs(*g, *exe);
  fs::remove_all(o.cache_dir);
}

}  // namespace
}  // namespace kiln::testing
