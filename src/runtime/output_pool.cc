// The output buffer pool (see output_pool.h).
#include "runtime/output_pool.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "kiln/error.h"

namespace kiln::runtime {

struct OutputPool::Shelf {
  std::mutex mu;
  std::multimap<size_t, void*> idle;  // allocation bytes -> buffer

  ~Shelf() {
    for (auto& [bytes, p] : idle) std::free(p);
  }
  void give_back(size_t bytes, void* p) {
    std::lock_guard<std::mutex> lock(mu);
    if (idle.count(bytes) >= kKeptPerSize) {
      std::free(p);
      return;
    }
    idle.emplace(bytes, p);
  }
};

OutputPool::OutputPool() : shelf_(std::make_shared<Shelf>()) {}
OutputPool::~OutputPool() = default;

HostTensor OutputPool::take(DType dtype, std::vector<int64_t> shape) {
  if (dtype == DType::Str) return HostTensor::empty(dtype, std::move(shape));
  const int64_t numel = numel_of(shape);
  KILN_CHECK(numel >= 0 && numel <= (int64_t(1) << 50) / dtype_size(dtype), "refusing to allocate a tensor of shape ",
             dims_to_string(shape), ": absurd size");
  const size_t bytes = std::max<size_t>(64, (size_t(numel) * dtype_size(dtype) + 63) / 64 * 64);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(shelf_->mu);
    auto it = shelf_->idle.find(bytes);
    if (it != shelf_->idle.end()) {
      p = it->second;
      shelf_->idle.erase(it);
    }
  }
  if (p == nullptr) p = std::aligned_alloc(64, bytes);
  KILN_CHECK(p != nullptr, "out of host memory allocating ", bytes, " bytes");
  std::shared_ptr<Shelf> shelf = shelf_;  // the deleter keeps the shelf alive
  std::shared_ptr<void> owner(p, [shelf, bytes](void* q) { shelf->give_back(bytes, q); });
  return HostTensor::borrow(dtype, std::move(shape), p, std::move(owner));
}

size_t OutputPool::idle_buffers() const {
  std::lock_guard<std::mutex> lock(shelf_->mu);
  return shelf_->idle.size();
}

}  // namespace kiln::runtime
