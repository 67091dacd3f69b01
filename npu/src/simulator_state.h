#pragma once
// Internal: the runtime state of one simulated launch (simulator*.cpp).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/npu/allocator.h"
#include "tessera/npu/simulator.h"

namespace tessera::npu::sim {

// Copy between a region addressed through `p` and a contiguous stream. Runs
// that are contiguous in memory are merged and moved with one memcpy each.
void gather(const std::byte* region, const AccessPattern& p, int elem_bytes, int64_t region_bytes, std::byte* stream);
void scatter(std::byte* region, const AccessPattern& p, int elem_bytes, int64_t region_bytes, const std::byte* stream);
// The byte offset of `p` in its region when its whole stream is one
// contiguous run read once (no repeat), else -1.
int64_t contiguous_offset(const AccessPattern& p, int elem_bytes, int64_t region_bytes);
// The byte ranges [first, second) of a region that the pattern touches, in
// the order it touches them (adjacent runs merged).
std::vector<std::pair<int64_t, int64_t>> pattern_runs(const AccessPattern& p, int elem_bytes, int64_t region_bytes);

// A ring of `depth` object slots; object n lives in slot n % depth. Writers and
// readers each keep a cursor (objects completed); an object is readable when
// every writer completed it, a slot writable when every reader freed it.
struct Pool {
  std::string name;
  TileCoord tile;
  TileKind kind = TileKind::compute;
  int64_t address = 0;      // in the tile's memory
  std::byte* base = nullptr;  // bound per run (bind_memory)
  int depth = 1;
  int64_t slot_bytes = 0;
  std::vector<int64_t> written, read;
  // A pool whose only writer lands whole objects straight from host bytes
  // read in place (a host buffer, or a mem-tile slot aliasing one), and whose
  // bytes are only read (by DMAs; on a compute tile by kernel args the kernel
  // declares read-only, KernelDef::read_only_args): a slot may alias those
  // host bytes instead of holding a copy (alias[slot], null when the slot
  // holds its own bytes). Readers see the same bytes either way; it spares
  // the copies every weight byte took per token (host -> L2 -> L1).
  bool may_alias = false;
  std::vector<const std::byte*> alias;  // by slot, reset per run

  // A link pool whose reader keeps a resident group and passes a tail
  // through (Fifo::repeat_tail): objects arrive in cycles of `cycle` =
  // group + repeat * tail; object i of a cycle lives in slot i while
  // i < group (resident for the whole cycle), else in one of the other
  // depth - group slots in turn. `read` then counts whole cycles' objects
  // (it moves once the cycle's last object went out) and `tail_read` the
  // tail objects of the current cycle sent so far. cycle 0: a plain ring.
  int64_t group = 0, cycle = 0;
  int64_t tail_read = 0;

  int64_t min_written() const;
  int64_t max_written() const;
  int64_t min_read() const;
  int64_t slot_index(int64_t n) const {
    if (cycle == 0) return n % depth;
    const int64_t i = n % cycle;
    return i < group ? i : group + (i - group) % (depth - group);
  }
  // May a writer land object n? Its slot must be free of every reader.
  bool writable(int64_t n) const;
  std::byte* slot(int64_t n) const { return base + slot_index(n) * slot_bytes; }
  // Object n's bytes as a DMA reads them.
  const std::byte* read_slot(int64_t n) const {
    const std::byte* a = may_alias ? alias[static_cast<size_t>(slot_index(n))] : nullptr;
    return a ? a : slot(n);
  }
};

// A DMA end on a pool: writer or reader `cursor`, over the FIFO's objects that
// start `offset` bytes into each slot.
struct PoolEnd {
  int pool = -1;
  int cursor = 0;
  int64_t offset = 0;
  int64_t object_bytes = 0;
  AccessPattern pattern;
  int elem_bytes = 2;
  int channel = -1;  // index into LaunchStats::channels
};

// The host side of a FIFO's shim end: its DmaTasks in sequence order.
// A byte buffer that grows without zero-filling: every byte of a staged
// stream is written (gather, or the chunks of a from_device task) before it
// is read, and zero-filling a weight's stream cost as much as copying it.
class StreamBuffer {
 public:
  // A copy (of a prepared launch's template state) starts empty: the bytes
  // are per-run scratch, never state.
  StreamBuffer() = default;
  StreamBuffer(const StreamBuffer&) {}
  StreamBuffer& operator=(const StreamBuffer&) { return *this; }
  StreamBuffer(StreamBuffer&&) = default;
  StreamBuffer& operator=(StreamBuffer&&) = default;

  std::byte* data() { return bytes_.get(); }
  const std::byte* data() const { return bytes_.get(); }
  int64_t size() const { return size_; }
  void resize(int64_t n) {
    if (n > capacity_) {
      bytes_.reset(new std::byte[static_cast<size_t>(n)]);
      capacity_ = n;
    }
    size_ = n;
  }

 private:
  std::unique_ptr<std::byte[]> bytes_;
  int64_t size_ = 0, capacity_ = 0;
};

struct ShimQueue {
  std::vector<const DmaTask*> tasks;
  size_t next = 0;               // task being served
  bool active = false;
  StreamBuffer staging;  // the task's whole stream, unless `direct`
  // to_device task whose pattern is one contiguous run of a host buffer that
  // no from_device task of the launch writes: its stream is the host bytes
  // themselves, read in place instead of gathered into `staging` first.
  const std::byte* direct = nullptr;
  int64_t size = 0;  // stream bytes of the active task
  int64_t pos = 0;
  int channel = -1;
  const std::byte* stream() const { return direct ? direct : staging.data(); }
};

// LaunchStats' byte and transfer counts of one connection, folded into the
// launch's once it ran (fold_tallies): connections of separate partitions
// move on separate host threads.
struct Tally {
  int64_t ddr_read_bytes = 0, ddr_write_bytes = 0, l2_bytes = 0, l1_bytes = 0, transfers = 0;
};

// The DMA path of one FIFO: one source, a set of sinks (broadcast).
struct Connection {
  const Fifo* fifo = nullptr;
  int64_t chunk = 0;  // stream bytes per object
  bool shim_source = false;
  PoolEnd source;
  ShimQueue source_q;
  std::vector<PoolEnd> sinks;
  bool shim_sink = false;
  ShimQueue sink_q;
  int64_t moved = 0;
  int64_t repeat_sent = 0;  // transfers of the current repeat group (Fifo::repeat)
  // From_device tasks that write host bytes another partition's tasks write
  // too (by index into sink_q.tasks; simulator_partition.cpp):
  // while the partitions run side by side, such a finished task's stream is
  // held back in `held` at held_at[k] and lands after them, in partition
  // order (land_deferred).
  std::vector<bool> defer_task;
  int64_t held_bytes = 0;  // the streams of every deferred task
  std::vector<int64_t> held_at;
  StreamBuffer held;
  std::vector<size_t> pending;  // held tasks not landed yet, in completion order
  StreamBuffer temp;        // one gathered object (sized on first use per run)
  Tally tally;
};

struct Arg {
  int consume_port = -1, produce_port = -1;  // fifo object, or both -1 for a buffer
  int64_t index = 0;
  bool buffer = false;       // a local buffer at `address` of the core's tile
  int64_t address = 0;
  std::byte* ptr = nullptr;  // the buffer, bound per run (bind_memory)
  int64_t bytes = 0;
  std::string text;
};

struct Instr {
  enum class Op { loop_begin, loop_end, acquire, release, call } op = Op::call;
  int64_t count = 1;
  int port = -1;
  size_t jump = 0;  // loop_begin: its loop_end; loop_end: its loop_begin
  const KernelDef* kernel = nullptr;
  const KernelParams* params = nullptr;
  std::shared_ptr<const void> bound;  // kernel->bind(*params), when it binds
  std::vector<Arg> args;
  int64_t cycles = 0, macs = 0;
};

struct CorePort {
  std::string fifo;
  bool produce = false;
  int pool = -1;
  int cursor = 0;
  int64_t held = 0;
};

struct CoreState {
  TileCoord tile;
  std::vector<Instr> code;
  std::vector<CorePort> ports;
  size_t pc = 0;
  std::vector<int64_t> loops;  // remaining iterations, innermost last
  bool done = false;
  TileStats stats;
  // The spans of the call being made, kept between calls: a decode token
  // makes thousands of small kernel calls, and a vector allocated per call
  // cost more than the lookup of its arguments.
  std::vector<std::span<std::byte>> args;
};

// Bytes [begin, end) of one tile's memory.
struct MemRange {
  TileCoord tile;
  int64_t begin = 0, end = 0;
};

struct LaunchState {
  const Design* design = nullptr;
  const Launch* launch = nullptr;
  const DeviceSpec* spec = nullptr;
  const LaunchLayout* layout = nullptr;  // PreparedDesign's, for this launch
  std::vector<Pool> pools;
  std::vector<Connection> conns;
  std::vector<CoreState> cores;
  LaunchStats stats;
  HostMemory* host = nullptr;
  const HostViews* views = nullptr;  // read-only host buffers (simulator.h)
  // What this launch could read before writing it, poisoned per run (simulator.cpp).
  std::vector<MemRange> poison;
  // DmaTask::after_wait: per sequence task, the index of the last wait at or
  // before it (0 if none); the task starts once every task before that is
  // done. Tasks [0, done_prefix) are all done.
  std::vector<size_t> wait_gate;
  std::vector<char> task_done;
  size_t done_prefix = 0;
  // Cores that share a pool, in groups that may run on separate host threads
  // (simulator.cpp core_groups), and whether any call is worth a thread.
  std::vector<std::vector<size_t>> groups;
  bool heavy = false;
  // Partitions (simulator_partition.cpp): cores and connections that touch
  // disjoint pools once the broadcasts from a shim in `prefix` have landed.
  // When every task left is past its wait, each partition may run to its end
  // on its own host thread with the serial order's results.
  struct Part {
    std::vector<size_t> cores, conns;
  };
  std::vector<Part> parts;
  std::vector<size_t> prefix;
  std::vector<size_t> gate_suffix_max;  // max of wait_gate over tasks i.. (one past the end: 0)
  int64_t stream_bytes = 0;             // bytes the to_device tasks read per run
  bool partitions_on = true;            // Simulator::set_host_partitions, bound per run
  bool side_by_side = false;            // the partitions are running on host threads now
  // The tile memories (data() per tile, map order) bind_memory last bound to.
  std::vector<const std::byte*> bound_bases;
};

// simulator_core.cpp
void compile_cores(LaunchState& st, const KernelRegistry& registry);
// Points pools and local-buffer arguments of a copied LaunchState at this
// run's tile memories (each already grown to the layout's highest byte).
void bind_memory(LaunchState& st, std::map<TileCoord, std::vector<std::byte>>& mem);
bool run_core(LaunchState& st, CoreState& core);  // true if it made progress
std::string describe_blocked(const LaunchState& st, const CoreState& core);

// simulator_partition.cpp: fills st.parts, st.prefix and the held-back
// from_device tasks (Connection::defer_task); no partitions when the launch
// does not split.
void partition(LaunchState& st);

// simulator_dma.cpp
void build_connections(LaunchState& st);
bool run_connection(LaunchState& st, Connection& c);
// Lands a from_device task held back while the partitions ran (defer_task).
void land_deferred(LaunchState& st, Connection& c);
// Moves done_prefix past every completed task (serial use only).
void advance_done_prefix(LaunchState& st);
// Adds every connection's tally to st.stats and zeroes it.
void fold_tallies(LaunchState& st);
std::vector<std::string> describe_unfinished(const LaunchState& st);

}  // namespace tessera::npu::sim
