#pragma once
// Functional simulator: executes a Design on host buffers exactly as the array
// would, with real per-tile L1 / L2 byte arrays at the allocated addresses. Data
// reaches a tile only through FIFOs (DMA gathers / scatters through access
// patterns, contiguous runs moved with memcpy); cores run their programs
// (acquire blocks, release publishes / frees) and call kernels from the
// KernelRegistry on whole objects. Scheduling is deterministic: cores run until
// they block, then DMAs move what they can, round robin until quiescent. A
// design that cannot finish is a SimulationError naming the blocked tile / FIFO.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "tessera/npu/allocator.h"
#include "tessera/npu/design.h"
#include "tessera/npu/device_spec.h"
#include "tessera/npu/errors.h"
#include "tessera/npu/kernel_registry.h"

namespace tessera::npu {

using HostMemory = std::map<std::string, std::vector<std::byte>>;
// Host buffers the device only reads, viewed where they already are (packed
// weights in a memory-mapped file) instead of copied into HostMemory. A view
// must have exactly HostBuffer::bytes; a launch that writes one, or a name in
// both maps, is a SimulationError.
using HostViews = std::map<std::string, std::span<const std::byte>>;

struct TileStats {
  int64_t kernel_calls = 0;
  int64_t cycles = 0;  // sum of KernelDef::cycles over the calls
  int64_t macs = 0;
  bool operator==(const TileStats&) const = default;
};

struct ChannelStats {
  TileCoord tile;
  bool s2mm = true;  // into the tile's memory (true) or out of it (false)
  int index = 0;
  std::string fifo;
  int64_t bytes = 0;
  bool operator==(const ChannelStats&) const = default;
};

struct LaunchStats {
  std::string name;
  int64_t ddr_read_bytes = 0;   // gathered from host buffers by to_device tasks
  int64_t ddr_write_bytes = 0;  // scattered into host buffers by from_device tasks
  int64_t l2_bytes = 0;         // written into + read out of mem-tile L2 by DMAs
  int64_t l1_bytes = 0;         // written into + read out of compute L1 by DMAs
  int64_t transfers = 0;        // DMA chunks moved (one object per consumer stream)
  std::map<TileCoord, TileStats> tiles;
  std::vector<ChannelStats> channels;
  // Host speed only: how many partitions of the launch ran side by side on
  // host threads (0: it ran in the serial order). Every other field, and every
  // byte the launch wrote, is the same either way.
  int host_partitions = 0;
  // Host speed only: the run replayed the byte operations an earlier run of
  // the same prepared design recorded (Simulator::set_replay) instead of
  // interpreting the cores and DMAs. Every other field is the same either way.
  bool replayed = false;
  int64_t ddr_bytes() const { return ddr_read_bytes + ddr_write_bytes; }
  int64_t macs() const;
};

struct SimStats {
  std::vector<LaunchStats> launches;
  int64_t ddr_bytes() const;
  int64_t macs() const;
};

namespace sim {
struct LaunchState;  // simulator_state.h
struct TraceSlot;    // simulator_trace.h
}

// A design validated against one simulator's spec and registry, with every
// launch's memory layout already allocated: the part of a run that does not
// depend on the data, done once for a design that runs many times (a decode
// step runs the same designs every token). Holds its own copy of the design.
class PreparedDesign {
 public:
  const Design& design() const { return design_; }

 private:
  friend class Simulator;
  PreparedDesign(Design d, uint64_t owner) : design_(std::move(d)), owner_(owner) {}
  Design design_;
  std::vector<LaunchLayout> layouts_;  // by launch
  // Bytes each tile's memory must hold for every launch (the largest
  // TileMemory::used()), computed once instead of per run.
  std::vector<std::pair<TileCoord, size_t>> memory_need_;
  std::vector<std::shared_ptr<const sim::LaunchState>> launches_;  // by launch, unbound
  // By launch: the byte operations of one run, replayed by later runs
  // (simulator_trace.h).
  std::vector<std::shared_ptr<sim::TraceSlot>> traces_;
  uint64_t owner_;                      // Simulator::id_ of the simulator that validated it
  // Run states (one per launch) of finished runs, reset and reused instead of
  // copied from launches_ per run; one set per concurrent run.
  using RunStates = std::vector<std::shared_ptr<sim::LaunchState>>;
  RunStates take_states() const;
  void give_states(RunStates states) const;
  mutable std::mutex idle_mutex_;
  mutable std::vector<RunStates> idle_;
};

class Simulator {
 public:
  explicit Simulator(const DeviceSpec& spec,
                     const KernelRegistry& registry = KernelRegistry::global());
  // Validates the design first; host buffers missing from `host` are created
  // zero-filled, existing ones must have exactly HostBuffer::bytes.
  SimStats run(const Design& design, HostMemory& host, const HostViews* views = nullptr) const;
  // Validates and lays out once (DesignError as run()); the result runs only
  // on this simulator or its copies (same spec and registry).
  std::shared_ptr<const PreparedDesign> prepare(const Design& design) const;
  SimStats run(const PreparedDesign& prepared, HostMemory& host,
               const HostViews* views = nullptr) const;
  // run() for a caller that uses only the bytes (the runtime's executor): the
  // same bytes, without a copy of each replayed launch's recorded statistics
  // (a GEMV's tile map and channel list, per launch per token).
  void run_bytes(const PreparedDesign& prepared, HostMemory& host, const HostViews* views = nullptr) const;
  // Whether a launch's independent partitions (a GEMV's columns, once x has
  // landed) may run side by side on host threads; on by default. Off, every
  // launch runs in the serial order (tests compare the two).
  void set_host_partitions(bool on) { host_partitions_ = on; }
  // Whether a prepared design's later runs replay the byte operations its
  // first run made (copies and kernel calls, in the scheduler's order)
  // instead of interpreting its cores and DMAs again; on by default. The
  // scheduler never looks at the data, so a replay writes the bytes and
  // returns the statistics the interpreter would (tests compare the two).
  void set_replay(bool on) { replay_ = on; }
  // Bytes the traces of every prepared design alive in this process hold,
  // and their budget (256 MiB unless set): a launch whose trace would not fit
  // keeps the interpreter. A decode position's attention and kv_append
  // designs are new per position, so a long generation would otherwise grow.
  static int64_t trace_bytes();
  static int64_t set_trace_budget(int64_t bytes);  // returns the budget it replaces

 private:
  DeviceSpec spec_;
  bool host_partitions_ = true;
  bool replay_ = true;
  const KernelRegistry* registry_;
  uint64_t id_;
  void run_into(const PreparedDesign& prepared, HostMemory& host, const HostViews* views, SimStats* stats) const;
};

}  // namespace tessera::npu
