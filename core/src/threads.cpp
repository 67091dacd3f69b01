#include "tessera/core/threads.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
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

namespace {

// Workers started once and parked on a condition variable: the simulator
// calls parallel_for per scheduling round of every dispatch, and starting
// threads per call cost more than the kernels it spread. Chunk c of a job
// always runs chunk c's range, whichever thread takes it.
//
// Before parking, a worker (and a caller waiting for the last chunk) spins a
// bounded while: a decode token is a few hundred short jobs back to back
// (the oracle's GEMVs), and a futex sleep and wake per job cost about a
// sixth of the oracle's decode time on this 2-core machine. The simulator's
// decode GEMVs come 50-150 us apart (a launch's setup and serial prefix in
// between), so the spin covers a few hundred microseconds: a PAUSE takes
// about 25 ns on this Zen 4 VM.
constexpr int kSpins = 1 << 14;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
class WorkerPool {
 public:
  explicit WorkerPool(size_t workers) {
    for (size_t w = 0; w < workers; ++w) threads_.emplace_back([this] { work(); });
  }
  ~WorkerPool() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs fn on chunks [c*chunk, min(n, (c+1)*chunk)) for c < chunks; the
  // caller takes chunks too. Returns false (nothing run) when the pool is busy
  // with another caller's job or the caller is one of its workers.
  bool run(size_t n, size_t chunk, size_t chunks, const std::function<void(size_t, size_t)>& fn) {
    if (inside_worker_) return false;
    std::unique_lock job_lock(job_mu_, std::try_to_lock);
    if (!job_lock.owns_lock()) return false;
    errors_.assign(chunks, nullptr);
    {
      std::lock_guard lock(mu_);
      fn_ = &fn;
      n_ = n;
      chunk_ = chunk;
      chunks_ = chunks;
      next_ = 0;
      unfinished_ = chunks;
      ++generation_;
    }
    wake_.notify_all();
    take_chunks();
    for (int i = 0; i < kSpins && unfinished_.load(std::memory_order_acquire) != 0; ++i) cpu_relax();
    std::unique_lock lock(mu_);
    done_.wait(lock, [this] { return unfinished_ == 0; });
    fn_ = nullptr;
    lock.unlock();
    for (auto& e : errors_)
      if (e) std::rethrow_exception(e);
    return true;
  }

 private:
  void work() {
    inside_worker_ = true;
    size_t seen = 0;
    for (;;) {
      for (int i = 0; i < kSpins && generation_.load(std::memory_order_acquire) == seen; ++i) cpu_relax();
      {
        std::unique_lock lock(mu_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      take_chunks();
    }
  }

  void take_chunks() {
    for (;;) {
      size_t c;
      {
        std::lock_guard lock(mu_);
        if (fn_ == nullptr || next_ >= chunks_) return;
        c = next_++;
      }
      try {
        (*fn_)(c * chunk_, std::min(n_, (c + 1) * chunk_));
      } catch (...) {
        errors_[c] = std::current_exception();
      }
      std::lock_guard lock(mu_);
      if (--unfinished_ == 0) done_.notify_all();
    }
  }

  static thread_local bool inside_worker_;
  std::mutex job_mu_;  // one job at a time
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(size_t, size_t)>* fn_ = nullptr;
  size_t n_ = 0, chunk_ = 0, chunks_ = 0, next_ = 0;
  // Written under mu_; read without it by the spins above.
  std::atomic<size_t> unfinished_ = 0, generation_ = 0;
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;
};

thread_local bool WorkerPool::inside_worker_ = false;

WorkerPool& pool() {
  static WorkerPool p(thread_count() - 1);
  return p;
}

}  // namespace

namespace {
thread_local bool inline_here = false;
}  // namespace

InlineOnThisThread::InlineOnThisThread() : was_(inline_here) { inline_here = true; }
InlineOnThisThread::~InlineOnThisThread() { inline_here = was_; }

void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn,
                  size_t min_chunk) {
  if (n == 0) return;
  size_t workers = std::min(thread_count(), (n + min_chunk - 1) / std::max<size_t>(1, min_chunk));
  if (workers <= 1) {
    fn(0, n);
    return;
  }
  const size_t chunk = (n + workers - 1) / workers;
  const size_t chunks = (n + chunk - 1) / chunk;
  if (!inline_here && pool().run(n, chunk, chunks, fn)) return;
  // Nested or concurrent call: the same chunks, in order, on this thread.
  for (size_t c = 0; c < chunks; ++c) fn(c * chunk, std::min(n, (c + 1) * chunk));
}

void parallel_for_each(size_t n, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  const std::function<void(size_t, size_t)> body = [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) fn(i);
  };
  if (thread_count() <= 1 || n == 1 || inline_here || !pool().run(n, 1, n, body)) body(0, n);
}

}  // namespace tessera
