// Which address ranges are file mappings (mapped_file.h registers each) and
// releasing the pages of tensors that lie inside one (mapped_pages.h).
#include "tessera/model/mapped_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <mutex>

#include "mapped_file.h"

namespace tessera::model {
namespace {

// Both are leaked on purpose: a MappedFile held by another static (a test's
// model cache, a registry of designs) unregisters itself during static
// destruction, possibly after these would have been destroyed.
std::mutex& registry_mutex() {
  static auto* m = new std::mutex;
  return *m;
}

std::map<uintptr_t, uintptr_t>& registry() {  // begin -> end of every live mapping
  static auto* r = new std::map<uintptr_t, uintptr_t>;
  return *r;
}

bool inside_mapping(uintptr_t begin, uintptr_t end) {
  std::lock_guard lock(registry_mutex());
  auto it = registry().upper_bound(begin);
  if (it == registry().begin()) return false;
  --it;
  return begin >= it->first && end <= it->second;
}

}  // namespace

void register_mapping(const std::byte* data, size_t size) {
  std::lock_guard lock(registry_mutex());
  registry()[reinterpret_cast<uintptr_t>(data)] = reinterpret_cast<uintptr_t>(data) + size;
}

void unregister_mapping(const std::byte* data) {
  std::lock_guard lock(registry_mutex());
  registry().erase(reinterpret_cast<uintptr_t>(data));
}

void release_mapped_pages(const Tensor& t) {
  if (t.bytes() == nullptr || t.nbytes() == 0) return;
  const auto begin = reinterpret_cast<uintptr_t>(t.bytes());
  const auto end = begin + t.nbytes();
  if (!inside_mapping(begin, end)) return;
  // Whole pages around the tensor: the neighbours' pages are file pages of
  // the same read-only mapping, which fault back in just the same.
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = begin / page * page;
  ::madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED);  // advice: failure is harmless
}

void release_mapped_pages(const Weights& w) {
  for (const std::string& name : w.names()) release_mapped_pages(w.get(name));
}

}  // namespace tessera::model
