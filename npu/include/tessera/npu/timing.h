#pragma once
// Static timing model (DESIGN.md "Device model"): a roofline with overheads,
// computed from the Design alone (no data, no simulation) so the compiler can
// compare plans before weights exist. Per launch:
//   time = max(compute, stream, dma, ddr) + fill_drain (+ reconfigure if not first)
//   compute    busiest compute tile: sum over its program of the kernels'
//              KernelCost (matrix-unit cycles with the per-inner-loop
//              overhead of the tile shape, vector-unit cycles at
//              vector_lanes_per_cycle, core_call_overhead_cycles per call)
//              / efficiency(kernel), over clock_hz. The launch's bound says
//              which part dominates: "compute", "vector" or "overhead".
//   stream     busiest stream port (one per FIFO endpoint; a broadcast producer
//              port carries each object once) at stream_bytes_per_cycle * clock
//   dma        busiest DMA channel at the same rate, but every contiguous run of
//              its access pattern costs whole words (4 B) on tiles and whole
//              bursts (shim_burst_bytes) at the shim: strided gathers are slow;
//              plus dma_object_overhead_cycles per object (BD + lock handshake)
//   ddr        bytes through all shims, each run rounded up to whole shim
//              bursts, / ddr_bytes_per_second
//   fill_drain the first object's trip from a shim to its first kernel plus the
//              last output object's trip back (per-hop object time), once
//              more per wait in the sequence (DmaTask::after_wait)
// Per dispatch: dispatch_overhead + sum of launches. The bound of a launch is
// its largest term; of a dispatch, the term that contributed most time
// ("overhead" when dispatch + reconfiguration cost dominates).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tessera/npu/design.h"
#include "tessera/npu/device_spec.h"
#include "tessera/npu/kernel_registry.h"

namespace tessera::npu {

// One DMA channel / stream port as the model charges it.
struct ChannelTiming {
  TileCoord tile;
  TileKind kind = TileKind::compute;
  bool s2mm = true;        // into the tile (FIFO consumer end) or out (producer end)
  std::string fifo;
  int64_t bytes = 0;       // payload bytes through the port
  int64_t dma_bytes = 0;   // bytes the DMA pays for (runs rounded to words / bursts)
  double stream_seconds = 0;
  double dma_seconds = 0;
};

struct TileTiming {
  TileCoord tile;
  int64_t calls = 0;
  int64_t cycles = 0;      // raw kernel cycles (at 100 % efficiency)
  double effective_cycles = 0;  // cycles / efficiency, summed per call
  KernelCost cost;         // effective_cycles split by unit
  int64_t macs = 0;
  double seconds = 0;
};

struct LaunchTiming {
  std::string name;
  double reconfigure_seconds = 0;  // 0 for the first launch
  double compute_seconds = 0;
  double stream_seconds = 0;
  double dma_seconds = 0;
  double ddr_seconds = 0;
  double fill_drain_seconds = 0;
  double total_seconds = 0;
  std::string bound;               // "compute" | "vector" | "overhead" | "stream" | "dma" | "ddr"
  std::string busiest_tile;        // e.g. "(3,2)"
  std::string busiest_port;        // "<fifo> (c,r) in|out"
  std::string busiest_channel;
  int64_t ddr_bytes = 0;           // through shim channels (in + out)
  int64_t ddr_burst_bytes = 0;     // the same, each run rounded up to whole bursts
  int64_t l2_bytes = 0;            // into + out of mem tiles
  int64_t l1_bytes = 0;            // into + out of compute tiles by DMA
  int64_t macs = 0;
  double utilization = 0;          // macs / (peak array MAC/s * total_seconds)
  std::vector<TileTiming> tiles;       // compute tiles with a program
  std::vector<ChannelTiming> channels; // every FIFO endpoint that uses a DMA
};

struct DispatchTiming {
  std::string design;
  double overhead_seconds = 0;     // dispatch overhead
  double total_seconds = 0;
  std::string bound;               // "overhead" | "compute" | "vector" | "stream" | "dma" | "ddr" | "fill_drain"
  int64_t ddr_bytes = 0, l2_bytes = 0, l1_bytes = 0, macs = 0;
  double utilization = 0;
  double peak_macs_per_second = 0;
  std::vector<LaunchTiming> launches;

  std::string summary() const;     // a few lines for humans
  nlohmann::json to_json() const;
};

// Throws DesignError for a design the model cannot cost (unknown kernel, a FIFO
// whose object count cannot be derived); run validate() for the full checks.
// Names of the tile kernels a design calls, sorted, each once.
std::vector<std::string> called_kernels(const Design& design);

DispatchTiming estimate_time(const Design& design, const DeviceSpec& spec,
                             const KernelRegistry& registry = KernelRegistry::global());

}  // namespace tessera::npu
