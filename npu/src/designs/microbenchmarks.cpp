// The published measurements of hardware.md as Microbenchmarks, and their
// predictions under a spec.
#include <cmath>
#include <limits>

#include "tessera/npu/designs.h"
#include "tessera/npu/errors.h"

namespace tessera::npu {

namespace {

Microbenchmark gemv_bench(int cols, double gbps) {
  constexpr int64_t M = 2048, K = 8192;
  return {fmt::format("gemv_bf16_{}x{}_{}col", M, K, cols), "GB/s", gbps,
          "amd/IRON CI, Krackan: weight GB/s incl. dispatch (hardware.md)",
          [cols](const DeviceSpec& s) { return gemv_design({M, K, cols, 1, 32}, s); },
          [](const DispatchTiming& t) { return M * K * 2 / t.total_seconds / 1e9; }};
}

}  // namespace

const std::vector<Microbenchmark>& published_microbenchmarks() {
  static const std::vector<Microbenchmark> benches = [] {
    std::vector<Microbenchmark> b = {gemv_bench(1, 12.6), gemv_bench(2, 24.4), gemv_bench(4, 40.5),
                                     gemv_bench(8, 45.0)};
    constexpr int64_t n = 2048;
    b.push_back({"gemm_bf16_2048^3_8col", "TFLOPS", 2.23,
                 "amd/IRON CI, Krackan: 7691 us (hardware.md)",
                 [](const DeviceSpec& s) { return gemm_design({n, n, n, 64, 64, 64, 8, 0}, s); },
                 [](const DispatchTiming& t) { return 2.0 * n * n * n / t.total_seconds / 1e12; }});
    // mlir-aie memcpy: DMA-only bypass on 8 columns x 2 channels, 16 Mi int32
    // words each way (the README's example length).
    constexpr int64_t bytes = int64_t{16} << 22;
    b.push_back({"memcpy_8col_2ch_bypass", "GB/s", 66.6,
                 "mlir-aie PR 2559, AxCache=2: in+out combined (hardware.md)",
                 [](const DeviceSpec& s) { return memcpy_design({8, 2, bytes, 16384, false}, s); },
                 [](const DispatchTiming& t) { return 2.0 * bytes / t.total_seconds / 1e9; }});
    // A dispatch that moves almost nothing measures the dispatch overhead:
    // IRON decode_costs_npu2.json, 43.7-50.1 us with a cached context (midpoint).
    b.push_back({"dispatch_4KiB_memcpy", "us", 46.9,
                 "amd/IRON decode_costs_npu2.json, Strix Halo: 43.7-50.1 us (hardware.md)",
                 [](const DeviceSpec& s) { return memcpy_design({1, 1, 4096, 4096, false}, s); },
                 [](const DispatchTiming& t) { return t.total_seconds * 1e6; }});
    return b;
  }();
  return benches;
}

std::vector<Prediction> predict(const std::vector<Microbenchmark>& benches, const DeviceSpec& spec,
                                const KernelRegistry& registry) {
  std::vector<Prediction> out;
  for (const auto& b : benches) {
    Prediction p{b.name, b.unit, "", b.published, std::numeric_limits<double>::quiet_NaN(),
                 std::numeric_limits<double>::quiet_NaN(), 0};
    try {
      DispatchTiming t = estimate_time(b.build(spec), spec, registry);
      p.predicted = b.metric(t);
      p.relative_error = p.predicted / p.published - 1;
      p.seconds = t.total_seconds;
      p.bound = t.bound;
    } catch (const DesignError& e) {
      p.bound = std::string("n/a: ") + e.what();  // e.g. 8 columns on a 4-column spec
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace tessera::npu
