// Host memory read bandwidth: the floor for any simulator or oracle step that
// reads every weight once (bench/host_speed.sh divides a model's bf16 bytes by
// it). A 512 MiB buffer is far past any cache; the sum is consumed so the
// reads cannot be dropped. Arg 2: what both cores of this machine reach.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBytes = size_t{512} << 20;

const std::vector<uint64_t>& buffer() {
  static const std::vector<uint64_t> b = [] {
    std::vector<uint64_t> v(kBytes / sizeof(uint64_t));
    for (size_t i = 0; i < v.size(); ++i) v[i] = i;  // touch every page
    return v;
  }();
  return b;
}

uint64_t sum(const uint64_t* p, size_t n) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    s0 += p[i];
    s1 += p[i + 1];
    s2 += p[i + 2];
    s3 += p[i + 3];
  }
  return s0 + s1 + s2 + s3;
}

// The whole buffer per iteration, split over `threads` host threads started
// together and timed by the wall clock from start to the last join. Not
// google-benchmark's Threads(): it averages each thread's own time, so two
// threads that a loaded machine runs one after the other report twice the
// bandwidth (49 GB/s here, against 25-31 from runs whose threads overlapped).
void BM_ReadBandwidth(benchmark::State& state) {
  const auto& b = buffer();
  const auto threads = static_cast<size_t>(state.range(0));
  const size_t per = b.size() / threads;
  std::vector<uint64_t> sums(threads);
  for (auto _ : state) {
    std::vector<std::thread> pool;
    for (size_t t = 1; t < threads; ++t)
      pool.emplace_back([&, t] { sums[t] = sum(b.data() + per * t, per); });
    sums[0] = sum(b.data(), per);
    for (auto& t : pool) t.join();
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(per * threads * sizeof(uint64_t)));
}
BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->UseRealTime()->MinTime(0.5);

}  // namespace

BENCHMARK_MAIN();
