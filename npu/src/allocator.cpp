#include "tessera/npu/allocator.h"

#include <algorithm>

#include <fmt/format.h>

#include "tessera/npu/errors.h"

namespace tessera::npu {
namespace {

// Vector loads on a tile are 256-bit; DMA addresses must be word aligned.
constexpr int64_t kAlign = 32;
// Compute-tile data memory is 8 banks (hardware.md); a block of at least a bank
// starts on a bank boundary when that still fits, so a kernel streaming two
// large buffers does not hit one bank twice per cycle.
constexpr int kComputeBanks = 8;

int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

struct Request {
  std::string name;
  int64_t bytes = 0;
  int64_t fixed = -1;  // user-fixed address, -1 = allocate
  int pool = -1;       // index into pools, or -1 for a Buffer
  std::string buffer;  // Buffer name when pool == -1
};

bool fits_at(const std::vector<MemoryBlock>& blocks, int64_t at, int64_t bytes) {
  for (const auto& b : blocks)
    if (at < b.address + b.bytes && b.address < at + bytes) return false;
  return true;
}

// First fit over the gaps between placed blocks (sorted by address).
int64_t first_fit(const std::vector<MemoryBlock>& blocks, int64_t bytes, int64_t capacity, int64_t bank) {
  std::vector<int64_t> starts = {0};
  for (const auto& b : blocks) starts.push_back(align_up(b.address + b.bytes, kAlign));
  std::sort(starts.begin(), starts.end());
  if (bank > 0 && bytes >= bank)
    for (int64_t s : starts) {
      int64_t at = align_up(s, bank);
      if (at + bytes <= capacity && fits_at(blocks, at, bytes)) return at;
    }
  for (int64_t s : starts)
    if (s + bytes <= capacity && fits_at(blocks, s, bytes)) return s;
  return -1;
}

[[noreturn]] void overflow(const TileMemory& m, const Request& r, const char* why) {
  throw_error<DesignError>(
      "{} memory of {} tile {} overflows: '{}' needs {} bytes ({}), capacity {} bytes\n{}",
      m.kind == TileKind::compute ? "L1" : "L2", tile_kind_name(m.kind), to_string(m.tile), r.name, r.bytes,
      why, m.capacity, m.map());
}

void place_tile_with(TileMemory& m, std::vector<Request>& reqs, LaunchLayout& out, const TileCoord& tile,
                     int64_t bank) {
  auto record = [&](const Request& r, int64_t at) {
    m.blocks.push_back({r.name, at, r.bytes});
    std::sort(m.blocks.begin(), m.blocks.end(),
              [](const MemoryBlock& a, const MemoryBlock& b) { return a.address < b.address; });
    if (r.pool >= 0)
      out.pools[r.pool].address = at;
    else
      out.buffer_address[{r.buffer, tile}] = at;
  };
  for (const auto& r : reqs) {  // fixed addresses first: the allocator works around them
    if (r.fixed < 0) continue;
    if (r.fixed + r.bytes > m.capacity) overflow(m, r, fmt::format("fixed at 0x{:x}", r.fixed).c_str());
    if (!fits_at(m.blocks, r.fixed, r.bytes))
      overflow(m, r, fmt::format("fixed at 0x{:x} overlaps another block", r.fixed).c_str());
    record(r, r.fixed);
  }
  for (const auto& r : reqs) {
    if (r.fixed >= 0) continue;
    int64_t at = first_fit(m.blocks, r.bytes, m.capacity, bank);
    if (at < 0) overflow(m, r, "no free gap large enough");
    record(r, at);
  }
}

// Bank alignment is a preference: when its gaps leave a block nowhere to go,
// the tile is placed again packed (first fit only), so a design whose buffers
// fit the memory is never refused for the alignment's fragmentation.
void place_tile(TileMemory& m, std::vector<Request>& reqs, LaunchLayout& out, const TileCoord& tile) {
  const TileMemory before = m;
  try {
    place_tile_with(m, reqs, out, tile, m.kind == TileKind::compute ? m.capacity / kComputeBanks : 0);
  } catch (const DesignError&) {
    m = before;
    place_tile_with(m, reqs, out, tile, 0);
  }
}

const Fifo* find_fifo(const Launch& l, const std::string& name) {
  for (const auto& f : l.fifos)
    if (f.name == name) return &f;
  return nullptr;
}

// One pool per link, sized by the large side (see allocator.h).
void add_link_pools(const Launch& launch, LaunchLayout& out) {
  for (size_t i = 0; i < launch.links.size(); ++i) {
    const Link& k = launch.links[i];
    bool join = k.inputs.size() > 1;
    ObjectPool p{fmt::format("link{}@{}", i, to_string(k.tile)), k.tile, 0, 0, -1, static_cast<int>(i)};
    std::vector<const Fifo*> ins, outs;
    for (const auto& n : k.inputs) ins.push_back(find_fifo(launch, n));
    for (const auto& n : k.outputs) outs.push_back(find_fifo(launch, n));
    const auto& big = join ? outs : ins;
    if (big.empty() || !big[0]) continue;  // malformed link: the validator names it
    p.object_bytes = big[0]->object_bytes;
    int idx = static_cast<int>(out.pools.size());
    auto attach = [&](const std::vector<const Fifo*>& fs, bool split_side) {
      for (size_t j = 0; j < fs.size(); ++j) {
        if (!fs[j]) continue;
        p.depth = std::max(p.depth, fs[j]->depth);
        out.endpoint_pool[{fs[j]->name, k.tile}] = idx;
        int64_t off = split_side && j < k.offsets_bytes.size() ? k.offsets_bytes[j] : 0;
        out.link_offset[{fs[j]->name, k.tile}] = off;
      }
    };
    attach(ins, join);
    attach(outs, !join);
    out.pools.push_back(p);
  }
}

void add_channel(LaunchLayout& out, std::map<std::pair<TileCoord, bool>, int>& next, TileCoord t, bool s2mm,
                 const std::string& fifo) {
  out.channels.push_back({t, s2mm, next[{t, s2mm}]++, fifo});
}

}  // namespace

int64_t TileMemory::used() const {
  int64_t end = 0;
  for (const auto& b : blocks) end = std::max(end, b.address + b.bytes);
  return end;
}

std::string TileMemory::map() const {
  std::string s = fmt::format("memory map of {} tile {} ({} bytes, {} used):\n", tile_kind_name(kind),
                              to_string(tile), capacity, used());
  int64_t total = 0;
  for (const auto& b : blocks) {
    s += fmt::format("  0x{:06x}-0x{:06x} {:>8} bytes  {}\n", b.address, b.address + b.bytes - 1, b.bytes, b.name);
    total += b.bytes;
  }
  s += fmt::format("  free: {} bytes", capacity - total);
  return s;
}

bool shares_memory(const Fifo& f, const DeviceSpec& spec) {
  if (f.consumers.size() != 1) return false;
  TileCoord p = f.producer, c = f.consumers[0];
  if (spec.kind_of_row(p.row) != TileKind::compute || spec.kind_of_row(c.row) != TileKind::compute) return false;
  if (p == c) return true;
  // A core reaches its own, north, south and west neighbours' memory.
  if (p.col == c.col) return std::abs(p.row - c.row) == 1;
  return p.row == c.row && std::abs(p.col - c.col) == 1;
}

TileCoord shared_home(const Fifo& f) {
  TileCoord p = f.producer, c = f.consumers.at(0);
  // The consumer reaches the producer's memory unless the producer is its east
  // neighbour; then the producer reaches the consumer's (its west) instead.
  return (p.row == c.row && p.col == c.col + 1) ? c : p;
}

LaunchLayout layout_launch(const Launch& launch, const DeviceSpec& spec) {
  LaunchLayout out;
  add_link_pools(launch, out);
  std::map<std::pair<TileCoord, bool>, int> next;
  auto kind = [&](TileCoord t) { return spec.kind_of_row(t.row); };
  // A shim holds a BD per task issued since the last wait (DmaTask::after_wait).
  std::map<TileCoord, int> shim_tasks, in_flight;
  for (const auto& task : launch.sequence) {
    if (task.after_wait) in_flight.clear();
    if (const Fifo* f = find_fifo(launch, task.fifo))
      for (const auto& t : task.to_device ? std::vector<TileCoord>{f->producer} : f->consumers)
        if (kind(t) == TileKind::shim) shim_tasks[t] = std::max(shim_tasks[t], ++in_flight[t]);
  }
  for (const auto& f : launch.fifos) {
    if (shares_memory(f, spec)) {
      TileCoord home = shared_home(f);
      out.endpoint_pool[{f.name, f.producer}] = out.endpoint_pool[{f.name, f.consumers[0]}] =
          static_cast<int>(out.pools.size());
      out.pools.push_back({f.name, home, f.depth, f.object_bytes, -1, -1});
      continue;
    }
    std::vector<std::pair<TileCoord, bool>> ends = {{f.producer, false}};
    for (const auto& c : f.consumers) ends.push_back({c, true});
    for (const auto& [t, s2mm] : ends) {
      add_channel(out, next, t, s2mm, f.name);
      if (kind(t) == TileKind::shim) continue;  // shim BDs are counted per DmaTask
      out.bds[t] += f.depth;
      if (kind(t) == TileKind::compute) {
        out.endpoint_pool[{f.name, t}] = static_cast<int>(out.pools.size());
        out.pools.push_back({f.name + "@" + to_string(t), t, f.depth, f.object_bytes, -1, -1});
      }
    }
  }
  for (const auto& [t, n] : shim_tasks) out.bds[t] += n;

  std::map<TileCoord, std::vector<Request>> reqs;
  for (size_t i = 0; i < out.pools.size(); ++i) {
    const auto& p = out.pools[i];
    reqs[p.tile].push_back({fmt::format("{} [{} x {}]", p.name, p.depth, p.object_bytes), p.bytes(), -1,
                            static_cast<int>(i), ""});
  }
  for (const auto& b : launch.buffers) reqs[b.tile].push_back({b.name, b.bytes, b.address, -1, b.name});
  for (auto& [t, rs] : reqs) {
    TileMemory m{t, kind(t), spec.limits(kind(t)).memory_bytes, {}};
    place_tile(m, rs, out, t);
    out.memory[t] = std::move(m);
  }
  return out;
}

}  // namespace tessera::npu
