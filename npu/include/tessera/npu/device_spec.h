#pragma once
// DeviceSpec: every hardware number the compiler, validator, simulator and timing
// model may use (STYLE.md #6: limits behind one target object). Presets xdna2
// (Strix Point) and xdna1 (Phoenix); JSON load/save; each field carries its source.
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

  static DeviceSpec preset(const std::string& name);  // "xdna2" | "xdna1"
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
