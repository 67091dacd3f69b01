// Rules on access patterns, core programs and the host DMA sequence.
#include <cstdlib>
#include <map>
#include <set>

#include <fmt/format.h>

#include "tessera/npu/allocator.h"
#include "validator_rules.h"

namespace tessera::npu::detail {

ArgRef parse_arg(const std::string& arg) {
  auto lb = arg.find('[');
  if (lb == std::string::npos) return {arg, 0};
  if (arg.back() != ']' || lb + 2 > arg.size() - 1) return {arg.substr(0, lb), -1};
  std::string digits = arg.substr(lb + 1, arg.size() - lb - 2);
  if (digits.find_first_not_of("0123456789") != std::string::npos) return {arg.substr(0, lb), -1};
  return {arg.substr(0, lb), std::strtoll(digits.c_str(), nullptr, 10)};
}

void check_pattern(const Ctx& c, const AccessPattern& p, int64_t region_elems, int elem_bytes, TileKind accessor,
                   const Where& what) {
  const DeviceSpec& s = c.spec;
  const auto at = [&] { return fmt::format("{}: {}", c.at(), what); };
  const Where w(at);
  if (p.repeat < 1 || p.repeat > s.bd_max_repeat)
    throw_error<DesignError>("{}: repeat {} outside [1, {}]", w, p.repeat, s.bd_max_repeat);
  if (p.offset < 0) throw_error<DesignError>("{}: negative offset {}", w, p.offset);
  if (p.dims.empty()) {
    if (p.offset != 0)
      throw_error<DesignError>("{}: a contiguous pattern covers the whole buffer; offset {} needs explicit dims", w,
                               p.offset);
    return;
  }
  int max_dims = s.limits(accessor).bd_dims;
  if (static_cast<int>(p.dims.size()) > max_dims)
    throw_error<DesignError>("{}: {} dims, {} tile BDs allow {}", w, p.dims.size(), tile_kind_name(accessor), max_dims);
  int64_t last = p.offset;
  for (size_t i = 0; i < p.dims.size(); ++i) {
    const Dim& d = p.dims[i];
    bool inner = i + 1 == p.dims.size();
    int64_t max_size = inner ? s.bd_max_wrap : s.bd_max_size;
    if (d.size < 1 || d.size > max_size)
      throw_error<DesignError>("{}: dim {} size {} outside [1, {}] ({})", w, i, d.size, max_size,
                               inner ? "bd_max_wrap" : "bd_max_size");
    if (d.stride < (inner ? 1 : 0) || d.stride > s.bd_max_stride)
      throw_error<DesignError>("{}: dim {} stride {} outside [{}, {}]", w, i, d.stride, inner ? 1 : 0, s.bd_max_stride);
    last += (d.size - 1) * d.stride;
  }
  if (s.bf16_innermost_stride_one && elem_bytes < 4 && p.dims.back().stride != 1)
    throw_error<DesignError>("{}: innermost stride {} with {}-byte elements; the DMA needs stride 1 below 4 bytes", w,
                             p.dims.back().stride, elem_bytes);
  if (last >= region_elems)
    throw_error<DesignError>("{}: reaches element {} but the buffer holds {} elements of {} bytes", w, last,
                             region_elems, elem_bytes);
}

void check_fifo_patterns(const Ctx& c) {
  for (const auto& f : c.launch.fifos) {
    int64_t elems = f.object_bytes / f.elem_bytes;
    check_pattern(c, f.producer_pattern, elems, f.elem_bytes, c.kind(f.producer),
                  [&] { return fmt::format("fifo '{}' producer pattern at {}", f.name, to_string(f.producer)); });
    for (size_t i = 0; i < f.consumer_patterns.size(); ++i)
      check_pattern(c, f.consumer_patterns[i], elems, f.elem_bytes, c.kind(f.consumers[i]), [&] {
        return fmt::format("fifo '{}' consumer pattern at {}", f.name, to_string(f.consumers[i]));
      });
  }
}

namespace {

using Held = std::map<std::pair<std::string, CoreOp::Port>, int64_t>;

const char* port_name(CoreOp::Port p) { return p == CoreOp::Port::consume ? "consume" : "produce"; }

struct ProgramCheck {
  const Ctx& c;
  const Core& core;
  Where w;

  const Fifo& endpoint(const CoreOp& op) const {
    const Fifo* f = c.fifo(op.fifo);
    if (!f) throw_error<DesignError>("{}: {} of unknown fifo '{}'", w, op.kind == CoreOp::Kind::acquire ? "acquire" : "release", op.fifo);
    bool ok = op.port == CoreOp::Port::consume ? c.is_consumer(*f, core.tile) : f->producer == core.tile;
    if (!ok)
      throw_error<DesignError>("{}: {} port of fifo '{}' used, but {} is not its {}", w, port_name(op.port), f->name,
                               to_string(core.tile), op.port == CoreOp::Port::consume ? "consumer" : "producer");
    return *f;
  }

  void call(const CoreOp& op, const Held& held) const {
    if (!c.registry.contains(op.kernel)) throw_error<DesignError>("{}: kernel '{}' is not registered", w, op.kernel);
    for (const auto& a : op.args) {
      ArgRef r = parse_arg(a);
      if (r.index < 0) throw_error<DesignError>("{}: call '{}' argument '{}' is malformed", w, op.kernel, a);
      if (const Fifo* f = c.fifo(r.name)) {
        auto hc = held.find({f->name, CoreOp::Port::consume});
        auto hp = held.find({f->name, CoreOp::Port::produce});
        int64_t n = hc != held.end() && hc->second > 0 ? hc->second : (hp != held.end() ? hp->second : 0);
        if (r.index >= n)
          throw_error<DesignError>("{}: call '{}' uses '{}' but holds {} acquired objects of fifo '{}' (a race on silicon)",
                                   w, op.kernel, a, n, f->name);
        continue;
      }
      bool local = false;
      for (const auto& b : c.launch.buffers) local |= b.name == r.name && b.tile == core.tile;
      if (!local || r.index != 0)
        throw_error<DesignError>("{}: call '{}' argument '{}' is neither a fifo nor a buffer of tile {}", w, op.kernel, a,
                                 to_string(core.tile));
    }
  }

  // Abstract interpretation of held objects; exact because programs have no
  // data-dependent control flow and loop bodies must be balanced.
  void walk(const std::vector<CoreOp>& ops, Held& held) const {
    for (const auto& op : ops) {
      switch (op.kind) {
        case CoreOp::Kind::loop: {
          if (op.count < 0) throw_error<DesignError>("{}: loop count {} is negative", w, op.count);
          if (op.count == 0) break;
          Held before = held;
          walk(op.body, held);
          for (const auto& [k, n] : held)
            if (op.count > 1 && n != (before.count(k) ? before.at(k) : 0))
              throw_error<DesignError>("{}: loop body changes the {} objects held of fifo '{}' from {} to {} per iteration",
                                       w, port_name(k.second), k.first, before.count(k) ? before.at(k) : 0, n);
          break;
        }
        case CoreOp::Kind::acquire: {
          const Fifo& f = endpoint(op);
          int64_t& n = held[{f.name, op.port}];
          if (op.count < 1 || n + op.count > f.depth)
            throw_error<DesignError>("{}: acquire {} of fifo '{}' ({} held) exceeds its depth {} (would block forever)",
                                     w, op.count, f.name, n, f.depth);
          n += op.count;
          break;
        }
        case CoreOp::Kind::release: {
          const Fifo& f = endpoint(op);
          int64_t& n = held[{f.name, op.port}];
          if (op.count < 1 || op.count > n)
            throw_error<DesignError>("{}: release {} {} of fifo '{}' but only {} acquired", w, op.count,
                                     port_name(op.port), f.name, n);
          n -= op.count;
          break;
        }
        case CoreOp::Kind::call:
          call(op, held);
          break;
      }
    }
  }
};

void collect_acquires(const std::vector<CoreOp>& ops, std::set<std::pair<std::string, CoreOp::Port>>& out) {
  for (const auto& op : ops) {
    if (op.kind == CoreOp::Kind::acquire) out.insert({op.fifo, op.port});
    if (op.kind == CoreOp::Kind::loop && op.count > 0) collect_acquires(op.body, out);
  }
}

}  // namespace

void check_core_programs(const Ctx& c) {
  for (const auto& core : c.launch.cores) {
    const auto at = [&] { return fmt::format("{}: core {}", c.at(), to_string(core.tile)); };
    ProgramCheck pc{c, core, Where(at)};
    Held held;
    pc.walk(core.program, held);
    for (const auto& [k, n] : held)
      if (k.second == CoreOp::Port::produce && n > 0)
        throw_error<DesignError>("{}: core {} ends holding {} unreleased objects of fifo '{}' (never published)",
                                 c.at(), to_string(core.tile), n, k.first);
  }
}

void check_compute_endpoints_used(const Ctx& c) {
  std::map<TileCoord, std::set<std::pair<std::string, CoreOp::Port>>> uses;
  for (const auto& core : c.launch.cores) collect_acquires(core.program, uses[core.tile]);
  auto need = [&](const Fifo& f, TileCoord t, CoreOp::Port port) {
    if (c.kind(t) != TileKind::compute) return;
    if (!uses[t].count({f.name, port}))
      throw_error<DesignError>("{}: fifo '{}' {} end at compute tile {} is never acquired by a core program there",
                               c.at(), f.name, port == CoreOp::Port::consume ? "consumer" : "producer", to_string(t));
  };
  for (const auto& f : c.launch.fifos) {
    need(f, f.producer, CoreOp::Port::produce);
    for (const auto& t : f.consumers) need(f, t, CoreOp::Port::consume);
  }
}

void check_sequence(const Ctx& c) {
  std::set<std::string> fed;
  for (size_t i = 0; i < c.launch.sequence.size(); ++i) {
    const DmaTask& t = c.launch.sequence[i];
    const auto task = [&] {
      return fmt::format("dma task {} ({} '{}' {} '{}')", i, t.to_device ? "to_device" : "from_device", t.fifo,
                         t.to_device ? "<-" : "->", t.host_buffer);
    };
    const Where what(task);
    const Fifo* f = c.fifo(t.fifo);
    if (!f) throw_error<DesignError>("{}: {}: fifo does not exist", c.at(), what);
    bool shim_end = false;
    if (t.to_device) {
      shim_end = c.kind(f->producer) == TileKind::shim;
    } else {
      for (const auto& tile : f->consumers) shim_end |= c.kind(tile) == TileKind::shim;
    }
    if (!shim_end)
      throw_error<DesignError>("{}: {}: fifo has no shim {}; DmaTasks run only through a shim end", c.at(), what,
                               t.to_device ? "producer" : "consumer");
    const HostBuffer* h = c.host(t.host_buffer);
    if (!h) throw_error<DesignError>("{}: {}: host buffer does not exist", c.at(), what);
    check_pattern(c, t.pattern, h->bytes / h->elem_bytes, h->elem_bytes, TileKind::shim,
                  [&] { return task() + " pattern over host buffer"; });
    int64_t bytes = stream_bytes(t.pattern, h->bytes, h->elem_bytes);
    int64_t chunk = fifo_chunk_bytes(*f, c.spec);
    if (bytes % chunk != 0)
      throw_error<DesignError>("{}: {}: moves {} bytes, not a whole number of {}-byte objects of fifo '{}'", c.at(),
                               what, bytes, chunk, f->name);
    fed.insert(t.fifo);
  }
  for (const auto& f : c.launch.fifos) {
    bool shim_end = c.kind(f.producer) == TileKind::shim;
    for (const auto& tile : f.consumers) shim_end |= c.kind(tile) == TileKind::shim;
    if (shim_end && !fed.count(f.name))
      throw_error<DesignError>("{}: fifo '{}' has a shim end but no DmaTask in the sequence", c.at(), f.name);
  }
}

}  // namespace tessera::npu::detail
