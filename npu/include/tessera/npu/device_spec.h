#pragma once
// DeviceSpec: every hardware number the compiler, validator, simulator and timing
// model may use (STYLE.md #6: limits behind one target object). Presets:
//   xdna2          Strix Point as calibrated against the published Llama-3.2-1B
//                  figures (npu/specs/xdna2-calibrated.json, docs/calibration.md)
//   xdna2-sourced  the same device with every field at its sourced default
//   xdna1          Phoenix (sourced defaults)
// JSON load/save; each field carries its source and range (field_sources()).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tessera::npu {

enum class TileKind { shim, mem, compute };
const char* tile_kind_name(TileKind k);

// Per tile-kind DMA / memory limits.
struct TileLimits {
  int64_t memory_bytes = 0;     // L1 data (compute), L2 (mem), 0 (shim: host DDR)
  int dma_in = 0;               // S2MM channels
  int dma_out = 0;              // MM2S channels
  int buffer_descriptors = 0;
  int locks = 0;
  int bd_dims = 0;              // dimensions of a BD access pattern
};

struct DeviceSpec {
  std::string name;
  // Which fit produced the calibratable fields ("none" = sourced defaults);
  // every plan / deploy / run names it next to the spec.
  std::string calibration = "none (sourced defaults)";
  // Tile kernels whose cost some calibration figure exercised; a plan flags
  // every other kernel it uses as unconstrained.
  std::vector<std::string> constrained_kernels;
  // The preset this spec derives from; selects the published ranges checked by
  // validate() (field_sources(family)).
  std::string family = "xdna2";
  // Grid: row 0 shim, rows [1, 1 + mem_rows) mem tiles, then compute rows.
  int columns = 0;
  int compute_rows = 0;
  int mem_rows = 1;
  int shim_rows = 1;

  TileLimits compute;
  TileLimits mem;
  TileLimits shim;
  int64_t program_memory_bytes = 0;  // per compute tile

  // BD access-pattern limits (mlir-aie / mlir-air notes).
  int64_t bd_max_wrap = 1024;      // max size of the innermost dimension
  int64_t bd_max_size = 1024;      // max size of outer dimensions
  int64_t bd_max_stride = 1 << 20; // elements
  int64_t bd_max_repeat = 255;
  bool bf16_innermost_stride_one = true;
  int64_t shim_burst_bytes = 512;

  // Throughput (calibratable fields are marked in field_sources()).
  double clock_hz = 1.5e9;
  double stream_bytes_per_cycle = 4.0;   // per stream port
  double macs_per_cycle_bf16 = 256;
  double macs_per_cycle_int8 = 512;
  double macs_per_cycle_bfp16 = 512;
  int vector_lanes_bf16 = 32;
  double ddr_bytes_per_second = 60e9;   // NPU share of host DDR
  double dispatch_overhead_seconds = 45e-6;
  double reconfigure_seconds = 3e-6;     // per additional launch in a dispatch

  // Tile-kernel physics (timing model; kernels/kernel_common.h cost vocabulary).
  // Matrix unit: one mmul_m x mmul_k x mmul_n instruction per cycle at peak;
  // kernels block 2 x 2 instructions per inner K loop, and every inner loop
  // pays mmul_loop_overhead_cycles (accumulator load/store, loop prologue and
  // pipeline drain), so a short K or a narrow tile runs below peak.
  int64_t mmul_m = 4, mmul_k = 8, mmul_n = 8;
  double mmul_loop_overhead_cycles = 16;
  // Vector unit (non-MAC work): an elementwise op on vector_lanes_bf16 lanes
  // retires vector_lanes_per_cycle lanes per cycle (vector_lanes_bf16 for
  // fully vectorized code, down to 1 for scalar code); exp and reciprocal /
  // rsqrt cost vector_exp_ops / vector_inv_ops elementwise ops each.
  double vector_lanes_per_cycle = 32;
  // GEMV (mlir-aie mv.cc): bf16 multiply-accumulates the vector unit retires
  // per cycle in a dot product (one 32-lane MAC per cycle fully vectorized).
  // Its own field: a MAC loop over a resident row streams loads into one
  // accumulator, unlike the multi-op elementwise kernels above.
  double gemv_macs_per_cycle = 32;
  double vector_exp_ops = 2;
  double vector_inv_ops = 2;
  // Fixed cost of one kernel call on a core (prologue, loop setup, lock
  // acquire / release around it).
  double core_call_overhead_cycles = 64;
  // Per object a DMA channel moves: BD fetch and the lock handshake.
  double dma_object_overhead_cycles = 8;

  // Host side (the laptop CPU next to the NPU, never the build machine).
  double host_bytes_per_second = 20e9;      // one pass over data in a host op
  double host_flops = 200e9;                // fp32, host ops that compute
  double host_call_overhead_seconds = 2e-6; // one host op / runtime call
  // A buffer-object sync is cache maintenance (flush / invalidate) over every
  // byte of the BO it names, whether or not the host touched them; a host
  // write into a BO is a streaming copy into its mapping first.
  double host_sync_bytes_per_second = 19.5e9;
  double host_copy_bytes_per_second = 30e9;  // bytes copied into / out of a BO
  // Fraction of peak MAC rate a real tile kernel reaches, by kernel name;
  // "default" applies when a kernel has no entry.
  std::map<std::string, double> kernel_efficiency = {{"default", 1.0}};

  int total_rows() const { return shim_rows + mem_rows + compute_rows; }
  int compute_tiles() const { return columns * compute_rows; }
  TileKind kind_of_row(int row) const;
  const TileLimits& limits(TileKind k) const;
  double efficiency(const std::string& kernel) const;

  // Throws DeviceSpecError naming the field for out-of-range values.
  void validate() const;

  static DeviceSpec preset(const std::string& name);  // preset_names()
  static const std::vector<std::string>& preset_names();
  // Starts from the preset named by "base" (default xdna2) and overrides the
  // given fields; unknown fields and out-of-range values are errors.
  static DeviceSpec from_json(const nlohmann::json& j);
  static DeviceSpec load(const std::string& path);
  nlohmann::json to_json() const;
};

// Where each default comes from and whether it may be calibrated (DESIGN.md
// device-model table); used by `tessera device` and docs/calibration.md.
struct FieldSource {
  std::string field;
  std::string source;
  bool calibratable = false;
  double min = 0, max = 0;  // published range for calibratable fields
};
const std::vector<FieldSource>& field_sources();  // xdna2
const std::vector<FieldSource>& field_sources(const std::string& family);

}  // namespace tessera::npu
