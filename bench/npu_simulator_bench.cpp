// Host speed of the functional simulator (issue 3: "a benchmark reports
// simulated bytes moved and MACs executed per host second"). Designs are the
// microbenchmark designs of npu/designs.h on the xdna2 preset:
//   memcpy   shim -> mem -> compute -> mem -> shim, 8 columns, 16 MiB each way
//   gemv     2048 x 8192 bf16 (a Llama-3.2-1B FFN projection), 8 columns
//   gemm     512^3 bf16 on 4 columns x 4 rows, 64^3 per core
// Counters: sim_bytes/s = DDR + L2 + L1 bytes moved by DMAs per host second,
// macs/s = kernel MACs per host second.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>

#include "tessera/npu/designs.h"
#include "tessera/npu/simulator.h"

namespace tessera::npu {
namespace {

const KernelRegistry& kernels() {
  static KernelRegistry r = [] {
    KernelRegistry k;
    register_microbench_kernels(k);
    return k;
  }();
  return r;
}

void fill(HostMemory& host, const Design& d) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (const auto& h : d.host_buffers) {
    auto& v = host[h.name];
    v.resize(h.bytes);
    for (int64_t i = 0; i + 1 < h.bytes; i += 2) {
      bf16 x = f32_to_bf16(u(rng));
      std::memcpy(v.data() + i, &x, 2);
    }
  }
}

void run_design(benchmark::State& state, const Design& d) {
  Simulator sim(DeviceSpec::preset("xdna2"), kernels());
  HostMemory host;
  fill(host, d);
  int64_t bytes = 0, macs = 0;
  for (auto _ : state) {
    SimStats s = sim.run(d, host);
    for (const auto& l : s.launches) bytes += l.ddr_bytes() + l.l2_bytes + l.l1_bytes;
    macs += s.macs();
  }
  state.counters["sim_bytes/s"] = benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kIsRate);
  state.counters["macs/s"] = benchmark::Counter(static_cast<double>(macs), benchmark::Counter::kIsRate);
}

void BM_memcpy(benchmark::State& state) {
  MemcpyParams p;
  p.columns = 8;
  p.bytes = 16 << 20;
  p.through_core = true;
  run_design(state, memcpy_design(p, DeviceSpec::preset("xdna2")));
}
BENCHMARK(BM_memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_gemv(benchmark::State& state) {
  GemvParams p;
  p.M = 2048;
  p.K = 8192;
  p.columns = 8;
  run_design(state, gemv_design(p, DeviceSpec::preset("xdna2")));
}
BENCHMARK(BM_gemv)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_gemm(benchmark::State& state) {
  GemmParams p;
  p.M = p.K = p.N = 512;
  p.columns = 4;
  run_design(state, gemm_design(p, DeviceSpec::preset("xdna2")));
}
BENCHMARK(BM_gemm)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace tessera::npu

BENCHMARK_MAIN();
