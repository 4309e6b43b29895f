// The on-disk compile cache (see compile_cache.h).
#include "runtime/compile_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "kiln/error.h"

namespace kiln::runtime {

namespace {

// Bumped when the generated code's calling convention changes, so old entries stop matching.
constexpr const char* kCodegenVersion = "kiln-cpu-codegen-1";

std::string read_file(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  *ok = bool(in);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), std::streamsize(data.size()));
  out.close();
  KILN_CHECK(out.good(), "compile cache: cannot write ", path);
}

std::string content_checksum(const std::string& bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%zu %016llx\n", bytes.size(),
                static_cast<unsigned long long>(XXH3_64bits(bytes.data(), bytes.size())));
  return buf;
}

// A name no other process or thread will pick for its temp file.
std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  std::ostringstream ss;
  ss << ".tmp." << getpid() << "." << std::hash<std::thread::id>{}(std::this_thread::get_id()) << "."
     << counter++;
  return ss.str();
}

void publish(const std::string& tmp, const std::string& final_path) {
  KILN_CHECK(std::rename(tmp.c_str(), final_path.c_str()) == 0, "compile cache: cannot rename ",
             tmp, " to ", final_path);
}

// Holds an exclusive flock on a per-key lock file for its lifetime.
class KeyLock {
 public:
  explicit KeyLock(const std::string& path) {
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);  // without a lock file we still publish atomically
  }
  ~KeyLock() {
    if (fd_ >= 0) {
      ::flock(fd_, LOCK_UN);
      ::close(fd_);
    }
  }

 private:
  int fd_ = -1;
};

}  // namespace

std::string default_cache_dir() {
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/kiln";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/kiln";
  return "/tmp/kiln-cache";
}

CompileCache::CompileCache(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  KILN_CHECK(std::filesystem::is_directory(dir_), "compile cache: cannot create directory ", dir_,
             ec ? ": " + ec.message() : "", " (set KILN_CACHE_DIR to a writable directory)");
}

std::string CompileCache::key(const std::string& source, const std::string& compiler_identity,
                              const std::vector<std::string>& flags) {
  std::string material = std::string(kCodegenVersion) + '\0' + compiler_identity + '\0';
  for (const auto& f : flags) material += f + '\0';
  material += source;
  XXH128_hash_t h = XXH3_128bits(material.data(), material.size());
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}

bool CompileCache::verified(const std::string& key) const {
  bool ok_so = false, ok_sum = false;
  std::string so = read_file(so_path(key), &ok_so);
  std::string sum = read_file(checksum_path(key), &ok_sum);
  return ok_so && ok_sum && !so.empty() && sum == content_checksum(so);
}

std::string CompileCache::get_or_build(const std::string& key, const std::string& source,
                                       const BuildFn& build, bool* hit) {
  *hit = false;
  if (verified(key)) {
    *hit = true;
    return so_path(key);
  }
  KeyLock lock(dir_ + "/" + key + ".lock");
  if (verified(key)) {  // another process built it while we waited for the lock
    *hit = true;
    return so_path(key);
  }
  std::string suffix = unique_suffix();
  std::string src_tmp = dir_ + "/" + key + suffix + ".cc";
  std::string so_tmp = dir_ + "/" + key + suffix + ".so";
  write_file(src_tmp, source);
  try {
    build(src_tmp, so_tmp);
  } catch (...) {
    std::remove(src_tmp.c_str());
    std::remove(so_tmp.c_str());
    throw;
  }
  bool ok = false;
  std::string bytes = read_file(so_tmp, &ok);
  KILN_CHECK(ok && !bytes.empty(), "compile cache: the compiler produced no shared object at ", so_tmp);
  std::string sum_tmp = checksum_path(key) + suffix;
  write_file(sum_tmp, content_checksum(bytes));
  // The .so goes first: a reader needs both, and a stale checksum only causes a rebuild.
  publish(so_tmp, so_path(key));
  publish(sum_tmp, checksum_path(key));
  publish(src_tmp, dir_ + "/" + key + ".cc");
  return so_path(key);
}

}  // namespace kiln::runtime
