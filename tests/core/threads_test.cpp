#include "tessera/core/threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace tessera {
namespace {

using Chunks = std::set<std::pair<size_t, size_t>>;

// The chunks parallel_for promises: depend on n and thread_count() only.
Chunks expected_chunks(size_t n) {
  const size_t workers = std::min(thread_count(), n);
  const size_t chunk = (n + workers - 1) / workers;
  Chunks c;
  for (size_t b = 0; b < n; b += chunk) c.insert({b, std::min(n, b + chunk)});
  return c;
}

Chunks chunks_of(size_t n) {
  std::mutex mu;
  Chunks got;
  parallel_for(n, [&](size_t b, size_t e) {
    std::lock_guard lock(mu);
    EXPECT_TRUE(got.insert({b, e}).second) << "chunk " << b << ".." << e << " ran twice";
  });
  return got;
}

TEST(ParallelFor, RunsEachDocumentedChunkOnce) {
  for (size_t n : {1u, 2u, 3u, 7u, 64u, 1001u}) EXPECT_EQ(chunks_of(n), expected_chunks(n)) << n;
}

// A body that itself calls parallel_for (a kernel inside a threaded
// simulator round) runs the nested chunks on its own thread instead of
// waiting forever for the pool it occupies.
TEST(ParallelFor, NestedCallsFinishWithTheSameChunks) {
  std::mutex mu;
  std::vector<Chunks> inner;
  parallel_for(4, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      Chunks c = chunks_of(10);
      std::lock_guard lock(mu);
      inner.push_back(std::move(c));
    }
  });
  ASSERT_EQ(inner.size(), 4u);
  for (const auto& c : inner) EXPECT_EQ(c, expected_chunks(10));
}

TEST(ParallelFor, ConcurrentCallersBothFinish) {
  std::atomic<size_t> sum{0};
  auto work = [&] {
    for (int r = 0; r < 50; ++r)
      parallel_for(100, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) sum += i;
      });
  };
  std::thread other(work);
  work();
  other.join();
  EXPECT_EQ(sum.load(), 2u * 50u * 4950u);
}

TEST(ParallelFor, AnExceptionInAChunkReachesTheCaller) {
  EXPECT_THROW(parallel_for(8,
                            [](size_t b, size_t) {
                              if (b > 0 || thread_count() == 1) throw std::runtime_error("chunk failed");
                            }),
               std::runtime_error);
  // The pool still works afterwards.
  EXPECT_EQ(chunks_of(16), expected_chunks(16));
}

// parallel_for_each: every index once, nested inside a parallel_for body
// too, and a throwing index reaches the caller.
TEST(ParallelForEach, RunsEveryIndexOnce) {
  for (size_t n : {0u, 1u, 2u, 9u, 300u}) {
    std::vector<std::atomic<int>> runs(n);
    parallel_for_each(n, [&](size_t i) { runs[i] += 1; });
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(runs[i].load(), 1) << "index " << i << " of " << n;
  }
  std::atomic<size_t> sum{0};
  parallel_for(3, [&](size_t b, size_t e) {
    for (size_t k = b; k < e; ++k) parallel_for_each(10, [&](size_t i) { sum += i; });
  });
  EXPECT_EQ(sum.load(), 3u * 45u);
  EXPECT_THROW(parallel_for_each(5, [](size_t i) { if (i == 3) throw std::runtime_error("index failed"); }),
               std::runtime_error);
}

// Thousands of short jobs back to back, as a decode token's GEMVs come: a
// thread still finishing one job's last chunk must never take a chunk of the
// next job, or run one twice. Each job writes its own stamp into every index
// it covers; a chunk run twice, skipped, or run under another job's function
// leaves a wrong count or stamp.
TEST(ParallelFor, BackToBackJobsRunEachChunkOnceUnderTheirOwnJob) {
  constexpr size_t kJobs = 20000;
  std::vector<std::atomic<int>> runs(13);
  std::vector<std::atomic<size_t>> stamp(13);
  for (size_t j = 0; j < kJobs; ++j) {
    const size_t n = 2 + j % 12;  // 2..13 indices, so chunk counts vary job to job
    for (size_t i = 0; i < n; ++i) runs[i] = 0;
    parallel_for(n, [&, j](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) {
        runs[i] += 1;
        stamp[i] = j;
      }
    });
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(runs[i].load(), 1) << "job " << j << " index " << i;
      ASSERT_EQ(stamp[i].load(), j) << "job " << j << " index " << i;
    }
    if (j % 2 == 0) {
      parallel_for_each(n, [&, j](size_t i) { stamp[i] = j + 1; });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(stamp[i].load(), j + 1) << "job " << j << " each " << i;
    }
  }
}

}  // namespace
}  // namespace tessera
