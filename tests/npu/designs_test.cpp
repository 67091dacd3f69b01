// The microbenchmark designs: they validate at the sizes hardware.md cites,
// reject shapes that do not tile, and compute the right numbers on the
// simulator (memcpy bit for bit, GEMM / GEMV within the fp32-accumulation
// tolerance of an fp64 reference); a broken stride or a dropped transfer is
// caught by comparison.
#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tessera/npu/designs.h"
#include "tessera/npu/simulator.h"
#include "tessera/npu/validator.h"

namespace tessera::npu {
namespace {

const KernelRegistry& registry() {
  static KernelRegistry r = [] {
    KernelRegistry k;
    register_microbench_kernels(k);
    return k;
  }();
  return r;
}

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

std::span<const bf16> as_bf16(const std::vector<std::byte>& b) {
  return {reinterpret_cast<const bf16*>(b.data()), b.size() / 2};
}

std::vector<std::byte> abs_bf16(const std::vector<std::byte>& b) {
  std::vector<std::byte> out = b;
  for (size_t i = 1; i < out.size(); i += 2) out[i] &= std::byte{0x7f};  // little-endian sign
  return out;
}

// Largest amount by which |got - want| exceeds its bound: fp32 accumulation of
// `terms` products contributes at most terms * 2^-24 * sum|products| (abs_sums,
// doubled for slack in the reference's own rounding), and the two bf16
// roundings of nearly equal values differ by at most one bf16 ulp (2^-7 |w|).
double worst_excess(const std::vector<std::byte>& got, const std::vector<bf16>& want,
                    const std::vector<bf16>& abs_sums, int64_t terms) {
  auto g = as_bf16(got);
  double worst = -1;
  for (size_t i = 0; i < want.size(); ++i) {
    double w = bf16_to_f32(want[i]), v = bf16_to_f32(g[i]);
    double s = bf16_to_f32(abs_sums[i]) * 1.01;
    double tol = std::abs(w) * 2 * kBf16Eps + 2.0 * terms * std::ldexp(1.0, -24) * s;
    worst = std::max(worst, std::abs(v - w) - tol);
  }
  return worst;
}

double gemm_excess(HostMemory& h, int64_t M, int64_t K, int64_t N) {
  auto want = reference_gemm(as_bf16(h["A"]), as_bf16(h["B"]), M, K, N);
  auto a = abs_bf16(h["A"]), b = abs_bf16(h["B"]);
  return worst_excess(h["C"], want, reference_gemm(as_bf16(a), as_bf16(b), M, K, N), K);
}

TEST(Designs, ValidateAtPublishedSizes) {
  DeviceSpec spec = DeviceSpec::preset("xdna2-sourced");
  for (int cols : {1, 2, 4, 8}) {
    EXPECT_NO_THROW(validate(gemv_design({2048, 8192, cols, 1, 32}, spec), spec, registry()))
        << cols << " columns";
    EXPECT_NO_THROW(validate(memcpy_design({cols, 2, 64 << 20, 8192, false}, spec), spec,
                             registry()));
    EXPECT_NO_THROW(validate(memcpy_design({cols, 2, 16 << 20, 8192, true}, spec), spec,
                             registry()));
  }
  EXPECT_NO_THROW(
      validate(gemm_design({2048, 2048, 2048, 64, 64, 64, 8, 0}, spec), spec, registry()));
  for (int cols : {1, 2, 4})
    EXPECT_NO_THROW(
        validate(gemm_design({1024, 512, 1024, 64, 64, 64, cols, 0}, spec), spec, registry()))
        << cols << " columns";
}

TEST(Designs, RejectShapesThatDoNotTile) {
  DeviceSpec spec = DeviceSpec::preset("xdna2-sourced");
  try {
    gemm_design({250, 256, 256, 64, 64, 64, 4, 0}, spec);
    FAIL() << "no error";
  } catch (const DesignError& e) {
    EXPECT_NE(std::string(e.what()).find("250x256x256"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("m*rows = 256"), std::string::npos) << e.what();
  }
  EXPECT_THROW(gemm_design({256, 256, 256, 64, 60, 64, 1, 0}, spec), DesignError);
  EXPECT_THROW(gemm_design({256, 256, 256, 64, 64, 64, 9, 0}, spec), DesignError);
  EXPECT_THROW(gemv_design({100, 256, 1, 1, 32}, spec), DesignError);
  EXPECT_THROW(gemv_design({256, 32768, 1, 1, 32}, spec), DesignError);  // x exceeds L1
  EXPECT_THROW(memcpy_design({2, 2, 1000, 8192, false}, spec), DesignError);
}

TEST(Designs, MemcpyCopiesBitForBit) {
  DeviceSpec spec = DeviceSpec::preset("xdna2-sourced");
  for (bool core : {false, true}) {
    Design d = memcpy_design({2, 2, 4 * 4096 * 3, 4096, core}, spec);
    HostMemory host;
    host["in"] = random_bf16(4 * 4096 * 3 / 2, 7);
    Simulator(spec, registry()).run(d, host);
    EXPECT_EQ(host["out"], host["in"]) << (core ? "through core" : "bypass");
  }
}

struct GemmCase {
  int64_t M, K, N, m, k, n;
  int cols, rows;
};

TEST(Designs, GemmMatchesReference) {
  DeviceSpec spec = DeviceSpec::preset("xdna2-sourced");
  for (GemmCase c : {GemmCase{64, 64, 64, 16, 16, 16, 2, 2}, GemmCase{128, 96, 64, 32, 32, 16, 2, 4},
                     GemmCase{64, 48, 48, 16, 16, 24, 1, 1}, GemmCase{256, 64, 256, 32, 32, 32, 4, 4}}) {
    Design d = gemm_design({c.M, c.K, c.N, c.m, c.k, c.n, c.cols, c.rows}, spec);
    HostMemory host;
    host["A"] = random_bf16(c.M * c.K, 1);
    host["B"] = random_bf16(c.K * c.N, 2);
    SimStats st = Simulator(spec, registry()).run(d, host);
    EXPECT_LE(gemm_excess(host, c.M, c.K, c.N), 0.0) << d.name;
    EXPECT_EQ(st.macs(), c.M * c.K * c.N) << d.name;
  }
}

TEST(Designs, GemmSplitsRowBlocksOverLaunchesWhenShimBdsRunOut) {
  DeviceSpec spec = DeviceSpec::preset("xdna2-sourced");
  spec.shim.buffer_descriptors = 5;  // 1 (B) + 2 per C tile row: two rows per launch
  Design d = gemm_design({128, 32, 32, 16, 16, 16, 2, 2}, spec);
  ASSERT_EQ(d.launches.size(), 2u);
  HostMemory host;
  host["A"] = random_bf16(128 * 32, 3);
  host["B"] = random_bf16(32 * 32, 4);
  Simulator(spec, registry()).run(d, host);
  EXPECT_LE(gemm_excess(host, 128, 32, 32), 0.0);
}

// When one C tile row alone needs more shim BDs than the shim has (B not one
// BD: K beyond the BD size limit, one B task per C tile column), the C tile
// columns are split over launches too; IRON's Llama GEMMs (2048x2048x8192)
// need this. Before, the builder threw.
TEST(Designs, GemmSplitsColumnBlocksWhenOneRowNeedsTooManyBds) {
  DeviceSpec spec = DeviceSpec::preset("xdna2-sourced");
  spec.bd_max_size = 16;             // K = 32 > 16: one B task per C tile column
  spec.shim.buffer_descriptors = 5;  // A + C + 4 B tasks = 6 per row: two columns per launch
  Design d = gemm_design({64, 32, 64, 16, 16, 16, 1, 1}, spec);
  ASSERT_EQ(d.launches.size(), 8u);  // 4 C tile rows x 2 column halves
  validate(d, spec, registry());
  HostMemory host;
  host["A"] = random_bf16(64 * 32, 5);
  host["B"] = random_bf16(32 * 64, 6);
  SimStats st = Simulator(spec, registry()).run(d, host);
  EXPECT_LE(gemm_excess(host, 64, 32, 64), 0.0);
  EXPECT_EQ(st.macs(), 64 * 32 * 64);
}

TEST(Designs, GemvMatchesReference) {
  DeviceSpec spec = DeviceSpec::preset("xdna2-sourced");
  for (auto [M, K, cols, r, q] : {std::tuple{256, 512, 2, 1, 32}, std::tuple{192, 1000, 3, 2, 16},
                                  std::tuple{512, 256, 8, 4, 64}}) {
    Design d = gemv_design({M, K, cols, r, q}, spec);
    HostMemory host;
    host["A"] = random_bf16(int64_t{M} * K, 5);
    host["x"] = random_bf16(K, 6);
    Simulator(spec, registry()).run(d, host);
    auto want = reference_gemv(as_bf16(host["A"]), as_bf16(host["x"]), M, K);
    auto a = abs_bf16(host["A"]), x = abs_bf16(host["x"]);
    auto sums = reference_gemv(as_bf16(a), as_bf16(x), M, K);
    EXPECT_LE(worst_excess(host["y"], want, sums, K), 0.0) << d.name;
  }
}

// A wrong stride in A's gather and a dropped B transfer must show up.
TEST(Designs, BrokenGemmIsCaught) {
  DeviceSpec spec = DeviceSpec::preset("xdna2-sourced");
  GemmParams p{64, 64, 64, 16, 16, 16, 2, 2};
  HostMemory ref;
  ref["A"] = random_bf16(64 * 64, 8);
  ref["B"] = random_bf16(64 * 64, 9);

  Design strided = gemm_design(p, spec);
  for (auto& t : strided.launches[0].sequence)
    if (t.fifo == "A0") t.pattern.dims[1].stride = 48;  // rows 48 apart instead of K = 64
  HostMemory h1 = ref;
  Simulator(spec, registry()).run(strided, h1);
  EXPECT_GT(gemm_excess(h1, 64, 64, 64), 0.0);

  // B1's task sends its column blocks for one C tile row instead of two.
  Design dropped = gemm_design(p, spec);
  for (auto& t : dropped.launches[0].sequence)
    if (t.fifo == "B1") t.pattern.repeat = 1;
  HostMemory h2 = ref;
  EXPECT_THROW(Simulator(spec, registry()).run(dropped, h2), SimulationError);
}

}  // namespace
}  // namespace tessera::npu

namespace tessera::npu {
namespace {

// Calibration moves only calibratable fields, stays inside their ranges and
// lowers the loss (a 1-column GEMV alone pins the stream port width).
TEST(Designs, CalibrationFitsInsideRanges) {
  DeviceSpec base = DeviceSpec::preset("xdna2-sourced");
  std::vector<Microbenchmark> one = {published_microbenchmarks().at(0)};
  Calibration c = calibrate(base, one, registry());
  EXPECT_LT(c.loss_after, c.loss_before);
  EXPECT_LT(std::abs(c.after.at(0).relative_error), 0.02);
  EXPECT_EQ(c.spec.name, "xdna2-sourced-calibrated");
  EXPECT_EQ(c.spec.columns, base.columns);
  EXPECT_EQ(c.spec.compute.memory_bytes, base.compute.memory_bytes);
  for (const auto& f : field_sources(base.family)) {
    if (!f.calibratable || f.field == "kernel_efficiency") continue;
    nlohmann::json j = c.spec.to_json();
    double v = j.at(f.field).get<double>();
    EXPECT_GE(v, f.min) << f.field;
    EXPECT_LE(v, f.max) << f.field;
  }
  EXPECT_NO_THROW(c.spec.validate());
}

}  // namespace
}  // namespace tessera::npu
