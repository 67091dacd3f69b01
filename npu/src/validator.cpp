// Structural rules: grid and tile kinds, names, FIFO shapes, links, and the
// resources of the allocated layout (memory, DMA channels, BDs, locks). The
// rules on patterns, core programs and the host sequence are in
// validator_program.cpp. Each rule is one function; the first violation throws.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "tessera/npu/allocator.h"
#include "validator_rules.h"

namespace tessera::npu {
namespace detail {

const Fifo* Ctx::fifo(const std::string& name) const {
  for (const auto& f : launch.fifos)
    if (f.name == name) return &f;
  return nullptr;
}

const HostBuffer* Ctx::host(const std::string& name) const {
  for (const auto& h : design.host_buffers)
    if (h.name == name) return &h;
  return nullptr;
}

bool Ctx::on_grid(TileCoord t) const {
  return t.col >= 0 && t.col < spec.columns && t.row >= 0 && t.row < spec.total_rows();
}

bool Ctx::is_consumer(const Fifo& f, TileCoord t) const {
  return std::find(f.consumers.begin(), f.consumers.end(), t) != f.consumers.end();
}

std::string Ctx::at() const { return fmt::format("design '{}' launch '{}'", design.name, launch.name); }

int64_t stream_bytes(const AccessPattern& p, int64_t object_bytes, int elem_bytes) {
  int64_t once = p.dims.empty() ? object_bytes : p.elements_per_repeat() * elem_bytes;
  return once * p.repeat;
}

int64_t fifo_chunk_bytes(const Fifo& f, const DeviceSpec& spec) {
  if (spec.kind_of_row(f.producer.row) != TileKind::shim)
    return stream_bytes(f.producer_pattern, f.object_bytes, f.elem_bytes);
  for (size_t i = 0; i < f.consumers.size(); ++i)
    if (spec.kind_of_row(f.consumers[i].row) != TileKind::shim)
      return stream_bytes(i < f.consumer_patterns.size() ? f.consumer_patterns[i] : AccessPattern{}, f.object_bytes,
                          f.elem_bytes);
  return f.object_bytes;
}

namespace {

void check_host_buffers(const Design& d) {
  std::set<std::string> seen;
  for (const auto& h : d.host_buffers) {
    if (!seen.insert(h.name).second) throw_error<DesignError>("design '{}': host buffer '{}' declared twice", d.name, h.name);
    if (h.elem_bytes != 1 && h.elem_bytes != 2 && h.elem_bytes != 4)
      throw_error<DesignError>("design '{}': host buffer '{}' elem_bytes {} is not 1, 2 or 4", d.name, h.name, h.elem_bytes);
    if (h.bytes <= 0 || h.bytes % h.elem_bytes != 0)
      throw_error<DesignError>("design '{}': host buffer '{}' has {} bytes, not a positive multiple of {}", d.name,
                               h.name, h.bytes, h.elem_bytes);
  }
}

void check_on_grid(const Ctx& c) {
  auto need = [&](TileCoord t, const Where& what) {
    if (!c.on_grid(t))
      throw_error<DesignError>("{}: {} is at tile {}, outside the {} x {} grid of '{}' (columns x rows)", c.at(), what,
                               to_string(t), c.spec.columns, c.spec.total_rows(), c.spec.name);
  };
  for (const auto& f : c.launch.fifos) {
    need(f.producer, [&] { return fmt::format("fifo '{}' producer", f.name); });
    for (const auto& t : f.consumers) need(t, [&] { return fmt::format("fifo '{}' consumer", f.name); });
  }
  for (const auto& b : c.launch.buffers) need(b.tile, [&] { return fmt::format("buffer '{}'", b.name); });
  for (const auto& k : c.launch.links) need(k.tile, [] { return "link"; });
  for (const auto& core : c.launch.cores) need(core.tile, [] { return "core"; });
}

void check_names(const Ctx& c) {
  std::set<std::string> fifos;
  for (const auto& f : c.launch.fifos)
    if (f.name.empty() || !fifos.insert(f.name).second)
      throw_error<DesignError>("{}: fifo name '{}' is empty or used twice", c.at(), f.name);
  std::set<std::pair<std::string, TileCoord>> bufs;
  for (const auto& b : c.launch.buffers) {
    if (b.name.empty() || !bufs.insert({b.name, b.tile}).second)
      throw_error<DesignError>("{}: buffer name '{}' on tile {} is empty or used twice", c.at(), b.name,
                               to_string(b.tile));
    if (fifos.count(b.name))
      throw_error<DesignError>("{}: buffer '{}' on tile {} has the name of a fifo (call args would be ambiguous)",
                               c.at(), b.name, to_string(b.tile));
  }
}

void check_tile_kinds(const Ctx& c) {
  std::set<TileCoord> cores;
  for (const auto& core : c.launch.cores) {
    if (c.kind(core.tile) != TileKind::compute)
      throw_error<DesignError>("{}: core program placed on {} tile {}; cores exist only on compute tiles", c.at(),
                               tile_kind_name(c.kind(core.tile)), to_string(core.tile));
    if (!cores.insert(core.tile).second)
      throw_error<DesignError>("{}: tile {} has two core programs (limit 1)", c.at(), to_string(core.tile));
  }
  for (const auto& k : c.launch.links)
    if (c.kind(k.tile) != TileKind::mem)
      throw_error<DesignError>("{}: link placed on {} tile {}; links exist only on mem tiles", c.at(),
                               tile_kind_name(c.kind(k.tile)), to_string(k.tile));
  for (const auto& b : c.launch.buffers) {
    if (c.kind(b.tile) == TileKind::shim)
      throw_error<DesignError>("{}: buffer '{}' placed on shim tile {}, which has no memory", c.at(), b.name,
                               to_string(b.tile));
    if (b.bytes <= 0) throw_error<DesignError>("{}: buffer '{}' on {} has {} bytes", c.at(), b.name, to_string(b.tile), b.bytes);
    if (b.address >= 0 && b.address % 4 != 0)
      throw_error<DesignError>("{}: buffer '{}' on {} fixed at 0x{:x}, not word aligned", c.at(), b.name,
                               to_string(b.tile), b.address);
  }
}

void check_fifo_shapes(const Ctx& c) {
  for (const auto& f : c.launch.fifos) {
    const auto at = [&] { return fmt::format("{}: fifo '{}' ({} -> ...)", c.at(), f.name, to_string(f.producer)); };
    const Where w(at);
    if (f.consumers.empty()) throw_error<DesignError>("{} has no consumer", w);
    std::set<TileCoord> seen(f.consumers.begin(), f.consumers.end());
    if (seen.size() != f.consumers.size()) throw_error<DesignError>("{} lists a consumer tile twice", w);
    if (f.depth < 1) throw_error<DesignError>("{} has depth {} (minimum 1)", w, f.depth);
    if (f.elem_bytes != 1 && f.elem_bytes != 2 && f.elem_bytes != 4)
      throw_error<DesignError>("{} has elem_bytes {} (1, 2 or 4)", w, f.elem_bytes);
    if (f.object_bytes <= 0 || f.object_bytes % 4 != 0 || f.object_bytes % f.elem_bytes != 0)
      throw_error<DesignError>("{} has object_bytes {}, not a positive multiple of 4 bytes (DMA word) and of elem_bytes",
                               w, f.object_bytes);
    if (!f.consumer_patterns.empty() && f.consumer_patterns.size() != f.consumers.size())
      throw_error<DesignError>("{} has {} consumer_patterns for {} consumers (need 0 or one each)", w,
                               f.consumer_patterns.size(), f.consumers.size());
    bool shim_src = c.kind(f.producer) == TileKind::shim;
    bool any_dma_end = !shim_src;
    for (const auto& t : f.consumers) any_dma_end |= c.kind(t) != TileKind::shim;
    if (!any_dma_end) throw_error<DesignError>("{} connects shim tiles only; a fifo needs a tile memory end", w);
    // from_device tasks name only the fifo, so a second shim consumer would be ambiguous.
    int shim_sinks = 0;
    for (const auto& t : f.consumers) shim_sinks += c.kind(t) == TileKind::shim;
    if (shim_sinks > 1) throw_error<DesignError>("{} has {} shim consumers (limit 1)", w, shim_sinks);
    if (f.repeat < 1 || f.repeat > c.spec.bd_max_repeat || f.repeat_group < 1 || f.repeat_tail < 0)
      throw_error<DesignError>("{} has repeat {} (1..{}), repeat_group {} (>= 1) and repeat_tail {} (>= 0)", w,
                               f.repeat, c.spec.bd_max_repeat, f.repeat_group, f.repeat_tail);
    if ((f.repeat > 1 || f.repeat_group > 1 || f.repeat_tail > 0) && c.kind(f.producer) != TileKind::mem)
      throw_error<DesignError>("{} repeats its objects, which only a mem-tile producer can (L2 re-send)", w);
    if (shim_src && f.producer_pattern != AccessPattern{})
      throw_error<DesignError>("{} has a producer_pattern on a shim producer; the DmaTask's pattern applies there", w);
    for (size_t i = 0; i < f.consumer_patterns.size(); ++i)
      if (c.kind(f.consumers[i]) == TileKind::shim && f.consumer_patterns[i] != AccessPattern{})
        throw_error<DesignError>("{} has a consumer_pattern on shim consumer {}; the DmaTask's pattern applies there", w,
                                 to_string(f.consumers[i]));
    if (shares_memory(f, c.spec) &&
        (f.producer_pattern != AccessPattern{} || (!f.consumer_patterns.empty() && f.consumer_patterns[0] != AccessPattern{})))
      throw_error<DesignError>("{} is a shared-memory fifo to {} (no DMA); it cannot have access patterns", w,
                               to_string(f.consumers[0]));
  }
}

// Every non-shim end of a FIFO must put the same number of bytes on the stream
// per object, or objects would be torn across transfers.
void check_stream_lengths(const Ctx& c) {
  for (const auto& f : c.launch.fifos) {
    if (shares_memory(f, c.spec)) continue;
    int64_t chunk = fifo_chunk_bytes(f, c.spec);
    for (size_t i = 0; i < f.consumers.size(); ++i) {
      if (c.kind(f.consumers[i]) == TileKind::shim) continue;
      int64_t got = stream_bytes(i < f.consumer_patterns.size() ? f.consumer_patterns[i] : AccessPattern{},
                                 f.object_bytes, f.elem_bytes);
      if (got != chunk)
        throw_error<DesignError>("{}: fifo '{}' consumer {} writes {} bytes per object but the producer side streams {}",
                                 c.at(), f.name, to_string(f.consumers[i]), got, chunk);
    }
  }
}

void check_link_tiling(const Ctx& c, const Link& k, const Fifo& big, const std::vector<const Fifo*>& small) {
  const auto at = [&] {
    return fmt::format("{}: link at {} ({} '{}')", c.at(), to_string(k.tile),
                       k.inputs.size() > 1 ? "join into" : "split of", big.name);
  };
  const Where w(at);
  if (k.offsets_bytes.size() != small.size())
    throw_error<DesignError>("{} has {} offsets for {} fifos", w, k.offsets_bytes.size(), small.size());
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (size_t i = 0; i < small.size(); ++i) {
    int64_t off = k.offsets_bytes[i], n = small[i]->object_bytes;
    if (off < 0 || off + n > big.object_bytes || off % 4 != 0)
      throw_error<DesignError>("{}: fifo '{}' at offset {} + {} bytes is outside the {}-byte object or not word aligned",
                               w, small[i]->name, off, n, big.object_bytes);
    ranges.push_back({off, n});
  }
  std::sort(ranges.begin(), ranges.end());
  int64_t end = 0;
  for (const auto& [off, n] : ranges) {
    if (off != end)
      throw_error<DesignError>("{}: parts {} at byte {} (expected parts to tile the {}-byte object without gap or overlap)",
                               w, off < end ? "overlap" : "leave a gap", off, big.object_bytes);
    end = off + n;
  }
  if (end != big.object_bytes)
    throw_error<DesignError>("{}: parts add up to {} bytes, the object has {}", w, end, big.object_bytes);
}

void check_links(const Ctx& c) {
  std::set<std::pair<std::string, TileCoord>> linked;
  for (const auto& k : c.launch.links) {
    const auto at = [&] { return fmt::format("{}: link at {}", c.at(), to_string(k.tile)); };
    const Where w(at);
    if (k.inputs.empty() || k.outputs.empty() || (k.inputs.size() > 1 && k.outputs.size() > 1))
      throw_error<DesignError>("{} has {} inputs and {} outputs (forward 1:1, split 1:N, join N:1)", w, k.inputs.size(),
                               k.outputs.size());
    std::vector<const Fifo*> ins, outs;
    for (const auto& n : k.inputs) {
      const Fifo* f = c.fifo(n);
      if (!f) throw_error<DesignError>("{}: input fifo '{}' does not exist", w, n);
      if (!c.is_consumer(*f, k.tile)) throw_error<DesignError>("{}: input fifo '{}' is not consumed by {}", w, n, to_string(k.tile));
      if (!linked.insert({n, k.tile}).second) throw_error<DesignError>("{}: fifo '{}' is linked twice at this tile", w, n);
      ins.push_back(f);
    }
    for (const auto& n : k.outputs) {
      const Fifo* f = c.fifo(n);
      if (!f) throw_error<DesignError>("{}: output fifo '{}' does not exist", w, n);
      if (f->producer != k.tile) throw_error<DesignError>("{}: output fifo '{}' is not produced by {}", w, n, to_string(k.tile));
      if (!linked.insert({n, k.tile}).second) throw_error<DesignError>("{}: fifo '{}' is linked twice at this tile", w, n);
      outs.push_back(f);
    }
    int depth = 0;
    for (const Fifo* f : ins) depth = std::max(depth, f->depth);
    for (const Fifo* f : outs) depth = std::max(depth, f->depth);
    for (const Fifo* f : outs) {
      if (f->repeat_group > depth)
        throw_error<DesignError>("{}: fifo '{}' repeats groups of {} objects but the link pool holds {} (the largest "
                                 "depth of its fifos)", w, f->name, f->repeat_group, depth);
      if (f->repeat_tail == 0) continue;
      // The tail passes through the pool's slots beside the resident group,
      // in the order the link's one input delivers it.
      if (ins.size() != 1 || outs.size() != 1)
        throw_error<DesignError>("{}: fifo '{}' passes a tail of {} objects through after its group, which only a "
                                 "forward link (1 input, 1 output) can", w, f->name, f->repeat_tail);
      if (f->repeat_group + 1 > depth)
        throw_error<DesignError>("{}: fifo '{}' keeps a resident group of {} objects and streams a tail past it, "
                                 "which needs a link pool of {} objects (the group + 1 slot for the tail); it "
                                 "holds {} (the largest depth of its fifos)", w, f->name, f->repeat_group,
                                 f->repeat_group + 1, depth);
    }
    if (ins.size() > 1) {
      check_link_tiling(c, k, *outs[0], ins);
    } else if (outs.size() > 1) {
      check_link_tiling(c, k, *ins[0], outs);
    } else {
      if (ins[0]->object_bytes != outs[0]->object_bytes)
        throw_error<DesignError>("{}: forward from '{}' ({} bytes) to '{}' ({} bytes) needs equal object sizes", w,
                                 ins[0]->name, ins[0]->object_bytes, outs[0]->name, outs[0]->object_bytes);
      if (!k.offsets_bytes.empty() && k.offsets_bytes != std::vector<int64_t>{0})
        throw_error<DesignError>("{}: a forward link takes no offsets", w);
    }
  }
  // A mem-tile FIFO end that no link connects would hold data nobody moves.
  for (const auto& f : c.launch.fifos) {
    std::vector<TileCoord> ends = f.consumers;
    ends.push_back(f.producer);
    for (const auto& t : ends)
      if (c.kind(t) == TileKind::mem && !linked.count({f.name, t}))
        throw_error<DesignError>("{}: fifo '{}' ends at mem tile {} but no link there connects it", c.at(), f.name,
                                 to_string(t));
  }
}

// The FIFO ends holding BDs on a compute or mem tile, as ": name depth, ...",
// so an overflow names the objects that take them.
std::string bd_users(const Ctx& c, TileCoord t) {
  std::vector<std::string> out;
  for (const auto& f : c.launch.fifos) {
    if (shares_memory(f, c.spec)) continue;
    if (f.producer == t || c.is_consumer(f, t)) out.push_back(fmt::format("{} {}", f.name, f.depth));
  }
  return out.empty() ? std::string() : fmt::format(": {}", fmt::join(out, ", "));
}

LaunchLayout check_resources(const Ctx& c) {
  LaunchLayout layout = layout_launch(c.launch, c.spec);  // throws with the memory map on overflow
  std::map<std::pair<TileCoord, bool>, std::vector<std::string>> used;
  for (const auto& ch : layout.channels) used[{ch.tile, ch.s2mm}].push_back(ch.fifo);
  for (const auto& [key, fifos] : used) {
    const auto& lim = c.spec.limits(c.kind(key.first));
    int limit = key.second ? lim.dma_in : lim.dma_out;
    if (static_cast<int>(fifos.size()) > limit)
      throw_error<DesignError>("{}: {} tile {} needs {} {} DMA channels (fifos {}), limit {}", c.at(),
                               tile_kind_name(c.kind(key.first)), to_string(key.first), fifos.size(),
                               key.second ? "S2MM (in)" : "MM2S (out)", fmt::join(fifos, ", "), limit);
  }
  for (const auto& [t, n] : layout.bds) {
    int limit = c.spec.limits(c.kind(t)).buffer_descriptors;
    if (n > limit)
      throw_error<DesignError>("{}: {} tile {} needs {} buffer descriptors (fifo depths{}), limit {}", c.at(),
                               tile_kind_name(c.kind(t)), to_string(t), n,
                               c.kind(t) == TileKind::shim ? "; one per DmaTask between waits" : bd_users(c, t),
                               limit);
  }
  // Each pool synchronises its producer and consumer with a lock pair.
  std::map<TileCoord, int> locks;
  for (const auto& p : layout.pools) locks[p.tile] += 2;
  for (const auto& [t, n] : locks)
    if (n > c.spec.limits(c.kind(t)).locks)
      throw_error<DesignError>("{}: {} tile {} needs {} locks (2 per object pool), limit {}", c.at(),
                               tile_kind_name(c.kind(t)), to_string(t), n, c.spec.limits(c.kind(t)).locks);
  return layout;
}

}  // namespace
}  // namespace detail

LaunchLayout validate_launch(const Design& design, const Launch& launch, const DeviceSpec& spec,
                             const KernelRegistry& registry) {
  detail::Ctx c{design, launch, spec, registry};
  detail::check_on_grid(c);
  detail::check_names(c);
  detail::check_tile_kinds(c);
  detail::check_fifo_shapes(c);
  detail::check_fifo_patterns(c);
  detail::check_stream_lengths(c);
  detail::check_links(c);
  detail::check_core_programs(c);
  detail::check_compute_endpoints_used(c);
  detail::check_sequence(c);
  return detail::check_resources(c);
}

std::vector<LaunchLayout> validate(const Design& design, const DeviceSpec& spec, const KernelRegistry& registry) {
  spec.validate();
  if (design.launches.empty()) throw_error<DesignError>("design '{}' has no launch", design.name);
  detail::check_host_buffers(design);
  std::vector<LaunchLayout> layouts;
  layouts.reserve(design.launches.size());
  for (const auto& l : design.launches) layouts.push_back(validate_launch(design, l, spec, registry));
  return layouts;
}

}  // namespace tessera::npu
