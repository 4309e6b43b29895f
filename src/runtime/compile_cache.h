// The on-disk compile cache: generated shared objects content-addressed by a hash of the source,
// the compiler's identity and version, and the flags. Entries are written atomically (temp file +
// rename), carry a checksum verified on every load (a corrupt entry is rebuilt), and a per-key
// lock file makes concurrent compilers of the same key wait for one build instead of racing.
// Why: g++ costs ~0.3-1 s per translation unit; a warm cache makes the second run free.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace kiln::runtime {

// $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln (else /tmp/kiln-cache).
std::string default_cache_dir();

class CompileCache {
 public:
  explicit CompileCache(std::string dir);  // creates the directory when missing

  // Hex XXH3-128 of everything that determines the shared object's bytes.
  static std::string key(const std::string& source, const std::string& compiler_identity,
                         const std::vector<std::string>& flags);

  // Path of a verified shared object for key. On a miss (or a corrupt entry) writes the source
  // next to it and calls build(source_path, temp_so_path), then publishes the result atomically.
  // *hit tells which happened.
  using BuildFn = std::function<void(const std::string& source_path, const std::string& so_path)>;
  std::string get_or_build(const std::string& key, const std::string& source, const BuildFn& build,
                           bool* hit);

  const std::string& dir() const { return dir_; }
  std::string so_path(const std::string& key) const { return dir_ + "/" + key + ".so"; }
  std::string checksum_path(const std::string& key) const { return dir_ + "/" + key + ".so.xxh"; }

 private:
  bool verified(const std::string& key) const;
  std::string dir_;
};

}  // namespace kiln::runtime
