// Reduced-size functional runs of the three design families on the simulator.
#include <cmath>
#include <cstring>
#include <random>

#include "tessera/npu/designs.h"
#include "tessera/npu/simulator.h"

namespace tessera::npu {

namespace {

std::vector<std::byte> random_bf16(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<std::byte> out(static_cast<size_t>(n) * 2);
  for (int64_t i = 0; i < n; ++i) {
    bf16 v = f32_to_bf16(dist(rng));
    std::memcpy(out.data() + i * 2, &v, 2);
  }
  return out;
}

std::vector<bf16> to_bf16(const std::vector<std::byte>& b) {
  std::vector<bf16> out(b.size() / 2);
  std::memcpy(out.data(), b.data(), out.size() * 2);
  return out;
}

// Max abs error and whether every element is within one bf16 ulp of the fp64
// reference plus the fp32 accumulation bound for `terms` products of |x| <= 1.
void compare(FunctionalCheck& c, const std::vector<std::byte>& got, const std::vector<bf16>& want,
             int64_t terms) {
  std::vector<bf16> g = to_bf16(got);
  c.pass = g.size() == want.size();
  for (size_t i = 0; c.pass && i < want.size(); ++i) {
    double w = bf16_to_f32(want[i]), err = std::abs(bf16_to_f32(g[i]) - w);
    c.max_abs_error = std::max(c.max_abs_error, err);
    c.pass = err <= std::abs(w) * 2 * kBf16Eps + 2.0 * terms * terms * std::ldexp(1.0, -24);
  }
}

void record(FunctionalCheck& c, const SimStats& st) {
  c.simulated_bytes = st.ddr_bytes();
  c.simulated_macs = st.macs();
}

}  // namespace

std::vector<FunctionalCheck> run_functional_checks(const DeviceSpec& spec,
                                                   const KernelRegistry& registry) {
  Simulator sim(spec, registry);
  std::vector<FunctionalCheck> out;
  int cols = std::min(spec.columns, 4);
  for (bool core : {false, true}) {
    Design d = memcpy_design({cols, 2, int64_t{cols} * 2 * 4 * 4096, 4096, core}, spec);
    HostMemory h;
    h["in"] = random_bf16(int64_t{cols} * 2 * 4 * 2048, 11);
    FunctionalCheck c{d.name};
    record(c, sim.run(d, h));
    c.pass = h["out"] == h["in"];
    out.push_back(c);
  }
  {
    const int64_t M = 256, K = 128, N = 32 * cols;
    Design d = gemm_design({M, K, N, 32, 32, 32, cols, 0}, spec);
    HostMemory h;
    h["A"] = random_bf16(M * K, 12);
    h["B"] = random_bf16(K * N, 13);
    FunctionalCheck c{d.name};
    record(c, sim.run(d, h));
    compare(c, h["C"], reference_gemm(to_bf16(h["A"]), to_bf16(h["B"]), M, K, N), K);
    out.push_back(c);
  }
  {
    const int64_t M = 64 * cols, K = 1024;
    Design d = gemv_design({M, K, cols, 1, 32}, spec);
    HostMemory h;
    h["A"] = random_bf16(M * K, 14);
    h["x"] = random_bf16(K, 15);
    FunctionalCheck c{d.name};
    record(c, sim.run(d, h));
    compare(c, h["y"], reference_gemv(to_bf16(h["A"]), to_bf16(h["x"]), M, K), K);
    out.push_back(c);
  }
  return out;
}

}  // namespace tessera::npu
