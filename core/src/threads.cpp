#include "tessera/core/threads.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <thread>
#include <vector>

namespace tessera {

size_t thread_count() {
  static const size_t n = [] {
    if (const char* e = std::getenv("TESSERA_THREADS")) {
      long v = std::strtol(e, nullptr, 10);
      if (v > 0) return static_cast<size_t>(v);
    }
    return std::max<size_t>(1, std::thread::hardware_concurrency());
  }();
  return n;
}

void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn,
                  size_t min_chunk) {
  if (n == 0) return;
  size_t workers = std::min(thread_count(), (n + min_chunk - 1) / std::max<size_t>(1, min_chunk));
  if (workers <= 1) {
    fn(0, n);
    return;
  }
  size_t chunk = (n + workers - 1) / workers;
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(workers);
  for (size_t w = 1; w < workers; ++w) {
    size_t b = w * chunk, e = std::min(n, b + chunk);
    if (b >= e) break;
    pool.emplace_back([&, w, b, e] {
      try {
        fn(b, e);
      } catch (...) {
        errors[w] = std::current_exception();
      }
    });
  }
  try {
    fn(0, std::min(n, chunk));
  } catch (...) {
    errors[0] = std::current_exception();
  }
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace tessera
