// How many cores' worth of compute this machine gives two threads right now:
// the same in-cache arithmetic on one thread, then on two at once (each its
// own copy). bench/host_speed.sh prints items/s of Arg(2) over Arg(1). On a
// shared VM the two vCPUs are sometimes two cores (ratio ~2) and sometimes
// one core's siblings or a time-sliced core (ratio ~1): two pinned copies of
// the oracle's GEMV kernel ran at half speed each in one test and at full
// speed each minutes later. Every two-thread host figure of the same run
// (oracle decode, simulator partitions) should be read against it.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

constexpr size_t kFloats = 4096;  // 16 KiB: stays in L1, so memory plays no part
constexpr int kPasses = 4096;  // a few ms per thread: thread start is noise beside it

// Independent multiply-add chains, so the loop is bound by the core's
// floating-point throughput, not by one chain's latency.
float work(const std::vector<float>& a) {
  std::array<float, 8> acc{};
  for (int p = 0; p < kPasses; ++p)
    for (size_t i = 0; i < a.size(); i += acc.size())
      for (size_t j = 0; j < acc.size(); ++j) acc[j] = acc[j] * 0.999f + a[i + j];
  float s = 0;
  for (float v : acc) s += v;
  return s;
}

// Each thread does the whole work on its own copy; timed by the wall clock
// from start to the last join (as membw_bench, for the same reason).
void BM_ComputeThreads(benchmark::State& state) {
  const auto threads = static_cast<size_t>(state.range(0));
  std::vector<std::vector<float>> data(threads, std::vector<float>(kFloats, 0.5f));
  std::vector<float> out(threads);
  for (auto _ : state) {
    std::vector<std::thread> pool;
    for (size_t t = 1; t < threads; ++t) pool.emplace_back([&, t] { out[t] = work(data[t]); });
    out[0] = work(data[0]);
    for (auto& t : pool) t.join();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(threads) *
                          static_cast<int64_t>(kFloats) * kPasses);
}
BENCHMARK(BM_ComputeThreads)->Arg(1)->Arg(2)->UseRealTime()->MinTime(0.2);

}  // namespace

BENCHMARK_MAIN();
