#pragma once
// A fixed pool of worker threads with a blocking parallel_for. Work is split into
// contiguous chunks by index so results never depend on scheduling (determinism).
#include <cstddef>
#include <functional>

namespace tessera {

// Number of worker threads used by parallel_for (TESSERA_THREADS env, else
// hardware concurrency).
size_t thread_count();

// Calls fn(begin, end) on disjoint chunks covering [0, n); blocks until done.
// Chunk boundaries depend only on n and thread_count(), never on timing.
void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn,
                  size_t min_chunk = 1);

// Calls fn(i) for every i in [0, n), each index once, on whichever thread is
// free next (indices are claimed in order): for independent pieces of uneven
// size whose results do not depend on the thread that runs them. Blocks
// until done.
void parallel_for_each(size_t n, const std::function<void(size_t)>& fn);

// While one is alive, parallel_for and parallel_for_each called on this
// thread run every chunk on it, in order, without the pool: for work beside
// a job that holds the pool (a session lowering its next decode plan while
// the prompt runs), which would otherwise take the pool's worker from it.
class InlineOnThisThread {
 public:
  InlineOnThisThread();
  ~InlineOnThisThread();
  InlineOnThisThread(const InlineOnThisThread&) = delete;
  InlineOnThisThread& operator=(const InlineOnThisThread&) = delete;

 private:
  bool was_;
};

}  // namespace tessera
