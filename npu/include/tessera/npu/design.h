#pragma once
// Design IR: what one dispatch runs on the array, in the spirit of mlir-aie's
// objectfifo-level IR. A Design is one or more Launches (the array is
// reconfigured between launches); each Launch places kernels on compute tiles,
// allocates buffers, connects tiles with object FIFOs (broadcast, and split /
// join / forward through mem-tile Links), and issues host DMA tasks through shim
// tiles. Data reaches a compute tile only through these FIFOs.
//
// Units: sizes and strides of access patterns are in ELEMENTS of the FIFO's or
// host buffer's elem_bytes; byte sizes are explicit (`_bytes`).
#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace tessera::npu {

struct TileCoord {
  int col = 0;
  int row = 0;  // 0 shim, 1 mem, 2.. compute (xdna2)
  auto operator<=>(const TileCoord&) const = default;
};
std::string to_string(TileCoord t);  // "(col,row)"

// One dimension of a BD access pattern (mlir-aie: [size, stride] pairs,
// outermost first). The innermost dimension is dims.back().
struct Dim {
  int64_t size = 1;
  int64_t stride = 1;
  auto operator<=>(const Dim&) const = default;
};

// An n-d access pattern over a buffer. Empty dims = contiguous over the whole
// transfer. `repeat` re-issues the same pattern (BD repeat count).
struct AccessPattern {
  int64_t offset = 0;
  std::vector<Dim> dims;
  int64_t repeat = 1;
  bool contiguous() const { return dims.empty(); }
  int64_t elements_per_repeat() const;  // product of sizes (0 dims -> caller's size)
  auto operator<=>(const AccessPattern&) const = default;
};

// An object FIFO: a producer tile hands fixed-size objects to one or more
// consumer tiles (more than one = broadcast). Each endpoint holds `depth`
// object buffers in its own memory (L1 on compute, L2 on mem tiles) and uses
// one DMA channel and `depth` BDs, unless producer and consumer share memory.
struct Fifo {
  std::string name;
  TileCoord producer;
  std::vector<TileCoord> consumers;
  int depth = 2;
  int64_t object_bytes = 0;
  int elem_bytes = 2;
  // In-flight layout transformation: how the producer's DMA reads each object
  // (MM2S) and how each consumer's DMA writes it (S2MM). Empty = contiguous.
  AccessPattern producer_pattern;
  std::vector<AccessPattern> consumer_patterns;  // empty or one per consumer
  // Re-send from L2 (mem-tile producers only; mlir-aie objectfifo repeat_count
  // over a BD chain): the producer sends each group of `repeat_group`
  // consecutive objects `repeat` times over (o0..o(g-1), o0.., ...) before
  // freeing them, so data staged once in a mem tile feeds several passes of
  // the cores. The group must fit the link pool (depth of a linked FIFO >= g).
  int repeat = 1;
  int repeat_group = 1;
  // A partial re-send (mem-tile producer of a forward link, with repeat):
  // after each re-send of the group the producer passes `repeat_tail`
  // further objects through once each, fresh from its input. A cycle of the
  // link pool so takes repeat_group + repeat * repeat_tail input objects and
  // sends repeat * (repeat_group + repeat_tail): the group stays resident in
  // repeat_group slots for the whole cycle while the tail cycles through the
  // pool's other slots (depth >= repeat_group + 1). Used when a whole group
  // would not fit L2 (a long-K weight panel: the first K blocks resident,
  // the rest re-read from DDR per repeat). On silicon: the MM2S BD chain of
  // the resident buffers, re-used every repeat, then the tail's ping-pong BDs.
  int repeat_tail = 0;
};

// Data movement through a mem tile between FIFOs.
//  forward: 1 input, 1 output
//  split:   1 input, N outputs; output i takes object bytes [offsets[i], + its object_bytes)
//  join:    N inputs, 1 output; input i lands at offsets[i] of the output object
struct Link {
  TileCoord tile;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<int64_t> offsets_bytes;
};

// A named buffer in a tile's local memory (kernel scratch, accumulators,
// resident weights). address -1 = to be assigned by the allocator.
struct Buffer {
  std::string name;
  TileCoord tile;
  int64_t bytes = 0;
  int64_t address = -1;
};

using ParamValue = std::variant<int64_t, double, std::string>;
using KernelParams = std::map<std::string, ParamValue>;

// The program of one compute tile: loops over acquire / call / release, as a
// core's main() in mlir-aie. A call's args name acquired FIFO objects
// ("fifo" = the oldest acquired object not yet released, "fifo[i]" = i-th of
// them) or local buffers of the tile.
struct CoreOp {
  enum class Kind { loop, acquire, release, call };
  enum class Port { consume, produce };
  Kind kind = Kind::call;
  int64_t count = 1;            // loop trip count / objects acquired or released
  std::string fifo;             // acquire / release
  Port port = Port::consume;    // acquire / release
  std::string kernel;           // call
  std::vector<std::string> args;
  KernelParams params;
  std::vector<CoreOp> body;     // loop
};

struct Core {
  TileCoord tile;
  std::vector<CoreOp> program;
};

// Host-side buffer an entire Design reads or writes (a DDR tensor).
struct HostBuffer {
  std::string name;
  int64_t bytes = 0;
  int elem_bytes = 2;
};

// One host DMA task in the runtime sequence: moves host_buffer data, gathered
// (to_device) or scattered (from device) through `pattern`, into / out of the
// shim end of `fifo`.
struct DmaTask {
  std::string fifo;
  std::string host_buffer;
  AccessPattern pattern;
  bool to_device = true;
  // A dma_wait before this task in the runtime sequence: it and every later
  // task are issued only after every earlier task has completed, so the shim
  // BDs those held are free again (the validator counts a shim's BDs per run
  // of tasks between waits; the timing model charges a pipeline drain and
  // refill per wait).
  bool after_wait = false;
};

struct Launch {
  std::string name;
  std::vector<Buffer> buffers;
  std::vector<Fifo> fifos;
  std::vector<Link> links;
  std::vector<Core> cores;
  std::vector<DmaTask> sequence;
};

struct Design {
  std::string name;
  std::vector<HostBuffer> host_buffers;
  std::vector<Launch> launches;
  // Stable textual form (golden tests compare it byte for byte).
  std::string dump() const;
};

}  // namespace tessera::npu
