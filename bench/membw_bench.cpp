// Host memory read bandwidth: the floor for any simulator or oracle step that
// reads every weight once (bench/host_speed.sh divides a model's bf16 bytes by
// it). A 512 MiB buffer is far past any cache; the sum is consumed so the
// reads cannot be dropped. Threads(2): what both cores of this machine reach.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
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

void BM_ReadBandwidth(benchmark::State& state) {
  const auto& b = buffer();
  const size_t per = b.size() / static_cast<size_t>(state.threads());
  const uint64_t* p = b.data() + per * static_cast<size_t>(state.thread_index());
  for (auto _ : state) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= per; i += 4) {
      s0 += p[i];
      s1 += p[i + 1];
      s2 += p[i + 2];
      s3 += p[i + 3];
    }
    benchmark::DoNotOptimize(s0 + s1 + s2 + s3);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(per * sizeof(uint64_t)));
}
BENCHMARK(BM_ReadBandwidth)->Threads(1)->Threads(2)->UseRealTime()->MinTime(0.5);

}  // namespace

BENCHMARK_MAIN();
