#pragma once
// Internal: a launch's run as the byte operations it made, replayed on later
// runs of the same prepared design (issue 16: "a design validated and lowered
// once into a ready-to-run form: precomputed DMA runs as (src, dst, bytes)
// lists").
//
// The scheduler (simulator.cpp) is deterministic and never looks at the data:
// which objects land where, which kernel runs on which bytes, and in what
// order, is a function of the design alone. One run, recorded, therefore
// names every byte a later run moves: the copies its DMAs made (memcpy runs,
// merged where contiguous) and the kernel calls with the bytes of their args,
// each as an offset into a region (a tile's memory, a host buffer, a
// connection's staging bytes) resolved to a pointer per run. Replaying those
// in the recorded order, with each partition's list on a host thread as the
// recording ran them, writes exactly the bytes the interpreter would, and the
// launch's statistics are the recorded ones.
//
// What may differ between runs is checked before a replay and sends the run
// back to the interpreter: a region's base address modulo 8 (a compute slot
// aliases host bytes only at matching alignment, sim::same_alignment) and its
// size.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "simulator_state.h"

namespace tessera::npu::sim {

struct Region {
  enum class Kind : uint8_t { tile, host, scratch } kind = Kind::tile;
  TileCoord tile;     // tile
  std::string name;   // host buffer
  int64_t extent = 0; // bytes [0, extent) the trace touches
  int align = 0;      // base % 8 when recorded (tile, host)
};

struct Addr {
  uint32_t region = 0;
  int64_t offset = 0;
};

struct TraceOp {
  const Instr* call = nullptr;  // the prepared state's instruction; null: a copy
  Addr dst, src;                // a copy
  int64_t bytes = 0;            // a copy
  uint32_t first_arg = 0;       // a call: OpList::args[first_arg, + call->args.size())
  TileCoord tile;               // a call: for its errors
};

struct TraceArg {
  Addr at;
  int64_t bytes = 0;
};

struct OpList {
  std::vector<TraceOp> ops;
  std::vector<TraceArg> args;
  // Filled when the trace is finished (plan_prefetch): the ops that are
  // calls, in order, and for call c the host bytes a replay prefetches
  // before it runs, fetches[fetch_first[c], fetch_first[c + 1]): its host
  // args but those the call before it read at the same place (a shared x,
  // already in cache).
  std::vector<uint32_t> calls;
  std::vector<TraceArg> fetches;
  std::vector<uint32_t> fetch_first;
  uint32_t far_calls = 3;  // how many calls ahead the L2 prefetch runs
};

// Bytes of the traces alive in this process, against a budget: each decode
// position's attention and kv_append designs are new and keep a trace for
// the session, so a long generation must not grow memory without bound.
// Past the budget a launch keeps the interpreter.
class TraceBytes {
 public:
  static constexpr int64_t kDefaultBudget = int64_t{256} << 20;
  TraceBytes() = default;
  TraceBytes(TraceBytes&& o) noexcept : bytes_(o.bytes_) { o.bytes_ = 0; }
  TraceBytes& operator=(TraceBytes&&) = delete;
  ~TraceBytes();
  // Takes `bytes` from the budget; false (nothing taken) when they do not fit.
  bool claim(int64_t bytes);
  static int64_t in_use();
  static int64_t set_budget(int64_t bytes);  // the budget it replaces

 private:
  int64_t bytes_ = 0;
};

struct Trace {
  TraceBytes budget;
  std::vector<Region> regions;
  OpList head;                // serial: everything before the partitions ran
  std::vector<OpList> parts;  // side by side (run_partitions), in part order
  OpList tail;                // serial: what the loop after them ran
  LaunchStats stats;
  bool partitions_on = true;  // the run's LaunchState::partitions_on
};

// One prepared launch's trace: recorded on its first run and replayed from
// its second. A decode position's new attention and kv_append designs run
// once per layer, so every interpreted run before the recording is one the
// replay could have spared; recording costs about as little as the run.
struct TraceSlot {
  std::atomic<int> runs{0};
  std::atomic<bool> failed{false};  // not traceable (threaded cores, too long, ...)
  std::mutex mu;
  std::shared_ptr<const Trace> trace;
};

// Recording: one per launch run; each host thread of the run appends to its
// own OpList through the thread-local pointer the hooks below read.
class Recorder {
 public:
  Recorder(const LaunchState& run, const LaunchState& prepared, std::map<TileCoord, std::vector<std::byte>>& mem);
  void begin_head();                // this thread records into the head
  void begin_parts(size_t n);       // before the partitions run side by side
  void begin_part(size_t part);     // this thread records into part `part`
  void begin_tail();
  static void end();                // this thread stops recording
  // The finished trace (stats: the run's), or null when the run was not traceable.
  std::shared_ptr<const Trace> finish(const LaunchStats& stats);
  void fail() { failed_ = true; }

  // Hooks: no-ops unless this thread is recording.
  static void copy(std::byte* dst, const std::byte* src, int64_t bytes);
  static void call(const CoreState& cs, const Instr& in, std::span<const std::span<std::byte>> args);
  // Connection `conn`'s staging (which 0: source queue, 1: sink queue, 2: temp,
  // 3: held-back from_device streams) now at `data`.
  static constexpr size_t kScratchPerConn = 4;
  static void scratch(size_t conn, int which, const std::byte* data, int64_t bytes);

 private:
  struct Range {
    const std::byte* begin;
    const std::byte* end;
    uint32_t region;
  };
  struct ListState {
    Recorder* rec = nullptr;
    OpList* out = nullptr;
    std::vector<int64_t> extent;  // by region
  };
  bool resolve(ListState& ls, const std::byte* p, int64_t bytes, Addr& out);
  void start(OpList* out);

  const LaunchState& run_;
  const LaunchState& prepared_;
  std::vector<Range> fixed_;  // tile memories and host buffers, by begin
  // Connections' staging buffers where they are now. Shared by the run's
  // threads: a to-device queue's stream is gathered into its staging by the
  // head's thread and read out by whichever thread runs the connection's
  // partition (SmolLM2's decode attention among them).
  std::mutex scratch_mu_;
  std::vector<Range> scratch_;
  Trace trace_;
  size_t scratch_base_ = 0;  // region index of connection 0's first staging buffer
  std::mutex mu_;
  std::vector<std::unique_ptr<ListState>> lists_;
  std::atomic<bool> failed_{false};
  friend struct RecorderAccess;
};

// Runs `trace` on this run's memories; false (nothing written) when a region
// is missing, smaller than the trace reaches or aligned otherwise than when
// recorded: then the interpreter runs the launch.
bool replay(const Trace& trace, std::map<TileCoord, std::vector<std::byte>>& mem, HostMemory& host,
            const HostViews* views);

}  // namespace tessera::npu::sim
