// Host speed of the simulator on the launches that dominate a decode token
// (issue 16): SmolLM2-135M's decode GEMVs (M = 1; 576-wide q / k and the
// 1536-deep down projection, with the tile options its decode plan picks),
// weights read in place from read-only host views as the executor reads the
// packed-weight file. Each iteration runs the launch on the next of `copies`
// weight replicas (together larger than the last-level cache), so weights
// stream from DRAM as they do across a token's 30 layers.
// Counters: calls/s = tile-kernel calls per host second; w_bytes/s = weight
// bytes per host second; ns/call = host nanoseconds per kernel call.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "tessera/kernels/builders/builder_support.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/kernels/tile_kernels.h"
#include "tessera/npu/simulator.h"

namespace tessera::kernels {
namespace {

// Weights per run rotation: 3x a 32 MB L3 (env SIM_BENCH_REPLICA_MB to
// change it; 0 keeps them in cache, which isolates the simulator's own work).
int64_t replica_bytes() {
  const char* e = std::getenv("SIM_BENCH_REPLICA_MB");
  return (e ? std::atoll(e) : 96) << 20;
}

struct Fixture {
  BuiltOp op;
  std::shared_ptr<const npu::PreparedDesign> prepared;
  npu::HostMemory host;
  std::vector<std::vector<std::byte>> replicas;  // per weight buffer name order below
  std::vector<std::string> weight_names;
  std::vector<npu::HostViews> views;  // one per replica
};

Fixture make(const npu::Simulator& sim, const npu::DeviceSpec& spec, int64_t K, int64_t N,
             const TileOptions& tiles) {
  Fixture f;
  OpShape shape{"linear", {{"M", 1}, {"K", K}, {"N", N}}, {}};
  f.op = op_builder("linear").build(shape, spec, tiles);
  f.prepared = sim.prepare(f.op.design);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(static_cast<size_t>(K)), w(static_cast<size_t>(K * N));
  for (auto& v : x) v = u(rng);
  for (auto& v : w) v = u(rng);
  for (const auto& h : f.op.design.host_buffers) f.host[h.name].assign(static_cast<size_t>(h.bytes), std::byte{0});
  f.op.pack(0, x, f.host);
  npu::HostMemory packed_w;
  for (const auto& h : f.op.design.host_buffers) packed_w[h.name].assign(static_cast<size_t>(h.bytes), std::byte{0});
  f.op.pack(1, w, packed_w);
  int64_t wbytes = 0;
  for (const auto& [name, bytes] : packed_w)
    if (name.rfind("w_", 0) == 0) {
      f.weight_names.push_back(name);
      wbytes += static_cast<int64_t>(bytes.size());
      f.host.erase(name);
    }
  const int64_t copies = std::max<int64_t>(1, replica_bytes() / std::max<int64_t>(wbytes, 1));
  for (int64_t r = 0; r < copies; ++r) {
    std::vector<std::byte> all;
    npu::HostViews v;
    for (const auto& name : f.weight_names) all.insert(all.end(), packed_w[name].begin(), packed_w[name].end());
    f.replicas.push_back(std::move(all));
    size_t off = 0;
    for (const auto& name : f.weight_names) {
      v[name] = std::span<const std::byte>(f.replicas.back().data() + off, packed_w[name].size());
      off += packed_w[name].size();
    }
    f.views.push_back(std::move(v));
  }
  return f;
}

void run_gemv(benchmark::State& state, int64_t K, int64_t N, TileOptions tiles) {
  ensure_tile_kernels_registered();
  const npu::DeviceSpec spec = npu::DeviceSpec::preset("xdna2");
  npu::Simulator sim(spec, npu::KernelRegistry::global());
  Fixture f = make(sim, spec, K, N, tiles);
  int64_t calls = 0, wbytes = 0;
  size_t r = 0;
  for (auto _ : state) {
    npu::SimStats s = sim.run(*f.prepared, f.host, &f.views[r]);
    r = (r + 1) % f.views.size();
    for (const auto& l : s.launches)
      for (const auto& [t, ts] : l.tiles) calls += ts.kernel_calls;
    wbytes += 2 * K * N;
  }
  state.counters["calls/s"] = benchmark::Counter(static_cast<double>(calls), benchmark::Counter::kIsRate);
  state.counters["w_bytes/s"] = benchmark::Counter(static_cast<double>(wbytes), benchmark::Counter::kIsRate);
  state.counters["ns/call"] = benchmark::Counter(static_cast<double>(calls) * 1e-9,
                                                 benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// The tile options SmolLM2-135M's decode plan picks (tessera plan --preset
// smollm2-135m --seq 15 --decode-at 15).
void BM_q576(benchmark::State& s) { run_gemv(s, 576, 576, {{"rowmajor", 1}}); }
void BM_k192(benchmark::State& s) {
  run_gemv(s, 576, 192, {{"columns", 8}, {"gemm", 0}, {"k", 192}, {"m", 1}, {"n", 2}, {"rowmajor", 1},
                         {"rows", 4}, {"streams", 2}, {"x_resident", 1}});
}
void BM_up1536(benchmark::State& s) { run_gemv(s, 576, 1536, {{"rowmajor", 1}}); }
void BM_down576(benchmark::State& s) {
  run_gemv(s, 1536, 576, {{"columns", 8}, {"gemm", 0}, {"k", 256}, {"m", 1}, {"n", 2}, {"rowmajor", 1},
                          {"rows", 4}, {"streams", 2}, {"x_resident", 1}});
}
BENCHMARK(BM_q576)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_k192)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_up1536)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_down576)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tessera::kernels

BENCHMARK_MAIN();
