#pragma once
// Resource layout of one Launch: which object pools exist, where they and the
// local Buffers live in L1 / L2 (addresses), which DMA channel each FIFO
// endpoint uses and how many BDs each tile needs. The validator checks the
// layout against the DeviceSpec; the simulator executes on it; the timing model
// may read per-channel assignments from it.
//
// Pools (a ring of `depth` object slots in one tile's memory):
//  - a FIFO endpoint on a compute tile: its own pool in that tile's L1;
//  - a FIFO whose single consumer shares memory with its producer (same tile,
//    or vertical / west neighbours, see shares_memory()): ONE pool, no DMA;
//  - a Link on a mem tile: ONE pool in L2 for all linked FIFOs; slots are the
//    large side's objects (the input of a split / forward, the output of a
//    join), depth = the largest depth among the linked FIFOs;
//  - shim endpoints have no pool (host DmaTasks are the data source / sink).
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tessera/npu/design.h"
#include "tessera/npu/device_spec.h"

namespace tessera::npu {

struct ObjectPool {
  std::string name;  // "<fifo>@(c,r)", "<fifo>" (shared), "link<i>@(c,r)"
  TileCoord tile;
  int depth = 0;
  int64_t object_bytes = 0;
  int64_t address = -1;
  int link = -1;  // index into Launch::links for a link pool
  int64_t bytes() const { return depth * object_bytes; }
};

// One DMA channel in use: S2MM (into the tile's memory, a FIFO consumer end)
// or MM2S (out of it, a FIFO producer end).
struct DmaChannel {
  TileCoord tile;
  bool s2mm = true;
  int index = 0;  // among the tile's channels of that direction, in FIFO order
  std::string fifo;
};

struct MemoryBlock {
  std::string name;
  int64_t address = 0;
  int64_t bytes = 0;
};

// What a tile's memory holds, printed on overflow (mlir-aie style).
struct TileMemory {
  TileCoord tile;
  TileKind kind = TileKind::compute;
  int64_t capacity = 0;
  std::vector<MemoryBlock> blocks;  // sorted by address
  int64_t used() const;             // end of the highest block
  std::string map() const;
};

struct LaunchLayout {
  std::vector<ObjectPool> pools;
  // (fifo, tile) -> pool index, for every non-shim endpoint of every FIFO. The
  // two ends of a shared-memory FIFO map to the same pool.
  std::map<std::pair<std::string, TileCoord>, int> endpoint_pool;
  // (fifo, mem tile) -> byte offset of the FIFO's objects inside the link pool slot.
  std::map<std::pair<std::string, TileCoord>, int64_t> link_offset;
  // (buffer name, tile) -> address.
  std::map<std::pair<std::string, TileCoord>, int64_t> buffer_address;
  std::vector<DmaChannel> channels;
  std::map<TileCoord, int> bds;  // BDs used per tile (shim: one per DmaTask)
  std::map<TileCoord, TileMemory> memory;
};

// True when the FIFO needs no DMA: exactly one consumer, both ends compute
// tiles, and the consumer's core can address the memory holding the objects.
bool shares_memory(const Fifo& fifo, const DeviceSpec& spec);
// The tile whose memory holds a shared FIFO's pool (the producer's memory when
// the consumer can reach it, else the consumer's).
TileCoord shared_home(const Fifo& fifo);

// Assigns addresses (bank-aligned first fit, user-fixed Buffer addresses kept)
// and channels. Throws DesignError with the tile's memory map when a memory
// overflows or fixed addresses overlap; other limits are the validator's job.
LaunchLayout layout_launch(const Launch& launch, const DeviceSpec& spec);

}  // namespace tessera::npu
