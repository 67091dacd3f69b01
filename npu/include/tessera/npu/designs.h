#pragma once
// Reference microbenchmark designs built on the Design IR (issue 3): memcpy
// through the shims, a bf16 GEMM in the mlir-aie whole-array style and a bf16
// GEMV. Each builder checks its shape against the tiling and the DeviceSpec and
// throws DesignError naming the shape and the tile when it does not fit; the
// result still has to pass validate(). Host buffers are row-major.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tessera/core/bf16.h"
#include "tessera/npu/design.h"
#include "tessera/npu/device_spec.h"
#include "tessera/npu/kernel_registry.h"
#include "tessera/npu/timing.h"

namespace tessera::npu {

// Kernels the designs call (plain C++ bodies, cycle costs from the spec):
//   "passthrough"      (in, out)          copy one object
//   "zero_f32"         (acc)              acc = 0                      param: elems
//   "matmul_bf16_f32"  (a, b, acc)        acc(m,n) += a(m,k) b(k,n)    params: m, k, n
//   "store_bf16"       (acc, c)           c = rne(acc); acc = 0        param: elems
//   "gemv_bf16"        (a, x, y)          y[offset + i] = rne(a(i,:) x) params: rows, k, offset
void register_microbench_kernels(KernelRegistry& registry);

// (a) memcpy: host "in" -> shim -> mem tile -> [compute passthrough ->
// mem tile] -> shim -> host "out", on `columns` columns with `channels` (1|2)
// shim channels per column each way; every channel moves an equal contiguous
// slice. through_core=false is the DMA-only bypass (shim -> mem -> shim).
struct MemcpyParams {
  int columns = 1;
  int channels = 2;
  int64_t bytes = 1 << 20;         // per direction
  int64_t object_bytes = 8192;
  bool through_core = false;
};
Design memcpy_design(const MemcpyParams& p, const DeviceSpec& spec);

// (b) C(M,N) = A(M,K) B(K,N), bf16 in / out, fp32 accumulation over K. Core
// (col c, compute row r) computes m x n tiles of C; A row blocks enter through
// mem tiles and are broadcast along compute rows, B column blocks go down
// columns, C tiles are joined in each column's mem tile. Tile rows of C are
// spread over several launches when one launch would need more shim BDs than
// the spec has (IRON recycles BDs with waits; the IR has none).
struct GemmParams {
  int64_t M = 256, K = 256, N = 256;
  int64_t m = 64, k = 64, n = 64;  // per-core tile
  int columns = 4;
  int rows = 0;  // compute rows used; 0 = all of the spec's
};
Design gemm_design(const GemmParams& p, const DeviceSpec& spec);

// (c) y(M) = A(M,K) x(K), bf16 in / out, fp32 accumulation. A's rows are split
// into equal contiguous ranges over `columns` columns (one core each, as IRON's
// matrix_vector), streamed from DDR through the column's mem tile in objects of
// `rows_per_object` full rows; x is broadcast once from shim 0 and stays
// resident in every core's L1 (so K is bounded by L1); y leaves in objects of
// `rows_per_output` results straight to the column's shim.
struct GemvParams {
  int64_t M = 256, K = 256;
  int columns = 1;
  int64_t rows_per_object = 1;
  int64_t rows_per_output = 32;
};
Design gemv_design(const GemvParams& p, const DeviceSpec& spec);

// Plain scalar references (fp64 sums, rounded to bf16 once) for tests and
// bench-device's functional check.
std::vector<bf16> reference_gemm(std::span<const bf16> a, std::span<const bf16> b,
                                 int64_t M, int64_t K, int64_t N);
std::vector<bf16> reference_gemv(std::span<const bf16> a, std::span<const bf16> x,
                                 int64_t M, int64_t K);

// A published measurement (hardware.md) the timing model is compared with and
// calibrated against: the design that reproduces it and how to read the
// predicted figure off a timing estimate.
struct Microbenchmark {
  std::string name;
  std::string unit;   // "GB/s" | "TFLOPS" | "us"
  double published = 0;
  std::string source;
  std::function<Design(const DeviceSpec&)> build;
  std::function<double(const DispatchTiming&)> metric;
};
const std::vector<Microbenchmark>& published_microbenchmarks();

struct Prediction {
  std::string name, unit, bound;
  double published = 0, predicted = 0;
  double relative_error = 0;  // predicted / published - 1
  double seconds = 0;
};
std::vector<Prediction> predict(const std::vector<Microbenchmark>& benches,
                                const DeviceSpec& spec, const KernelRegistry& registry);

// Fits the calibratable fields of DeviceSpec (field_sources(): clock, stream
// port width, bf16 MAC/cycle, DDR share, dispatch overhead and the efficiency
// of each kernel the benchmarks call), each inside its published range, to
// minimise the sum of squared log errors; coordinate search over a grid per
// field, deterministic. The result's name is "<base>-calibrated".
struct Calibration {
  DeviceSpec spec;
  double loss_before = 0, loss_after = 0;
  std::vector<Prediction> before, after;
};
Calibration calibrate(const DeviceSpec& base, const std::vector<Microbenchmark>& benches,
                      const KernelRegistry& registry);

// Runs each design family at a reduced size on the simulator against the plain
// references (what bench-device prints to show the designs work).
struct FunctionalCheck {
  std::string design;
  bool pass = false;
  double max_abs_error = 0;
  int64_t simulated_bytes = 0, simulated_macs = 0;
};
std::vector<FunctionalCheck> run_functional_checks(const DeviceSpec& spec,
                                                   const KernelRegistry& registry);

}  // namespace tessera::npu
