// DMA side of the simulator: access-pattern copies, the per-FIFO connections
// (pool -> pools, host -> pools, pools -> host) and their progress.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "simulator_state.h"
#include "simulator_trace.h"
#include "validator_rules.h"

namespace tessera::npu::sim {
namespace {

// A pattern in bytes with its contiguous innermost run merged as far as the
// strides allow: e.g. [4:64, 64:1] over 2-byte elements is one 512-byte run.
struct Runs {
  std::vector<int64_t> sizes, strides;  // outer dims, bytes
  int64_t run = 0;
  int64_t offset = 0;
};

Runs normalize(const AccessPattern& p, int elem_bytes, int64_t region_bytes) {
  Runs r;
  r.offset = p.offset * elem_bytes;
  if (p.dims.empty()) {
    r.run = region_bytes;
    return r;
  }
  const Dim& in = p.dims.back();
  size_t outer = p.dims.size() - 1;
  if (in.stride == 1) {
    r.run = in.size * elem_bytes;
  } else {
    r.run = elem_bytes;
    outer = p.dims.size();
  }
  for (size_t i = 0; i < outer; ++i) {
    if (p.dims[i].size == 1) continue;
    r.sizes.push_back(p.dims[i].size);
    r.strides.push_back(p.dims[i].stride * elem_bytes);
  }
  while (!r.sizes.empty() && r.strides.back() == r.run) {
    r.run *= r.sizes.back();
    r.sizes.pop_back();
    r.strides.pop_back();
  }
  return r;
}

// Calls f(byte offset) for each run of the pattern, in stream order.
template <class F>
void for_each_run(const Runs& r, int64_t repeat, F&& f) {
  const size_t n = r.sizes.size();
  std::vector<int64_t> idx(n, 0);
  for (int64_t rep = 0; rep < repeat; ++rep) {
    int64_t pos = r.offset;
    for (;;) {
      f(pos);
      size_t d = n;  // odometer over the outer dims, innermost first
      for (; d > 0; --d) {
        size_t k = d - 1;
        pos += r.strides[k];
        if (++idx[k] < r.sizes[k]) break;
        pos -= r.strides[k] * r.sizes[k];
        idx[k] = 0;
      }
      if (d == 0) break;
    }
  }
}

template <bool Gather>
void copy_pattern(std::byte* region, const AccessPattern& p, int elem_bytes, int64_t region_bytes, std::byte* stream) {
  const Runs r = normalize(p, elem_bytes, region_bytes);
  for_each_run(r, p.repeat, [&](int64_t pos) {
    if constexpr (Gather) {
      std::memcpy(stream, region + pos, r.run);
      Recorder::copy(stream, region + pos, r.run);
    } else {
      std::memcpy(region + pos, stream, r.run);
      Recorder::copy(region + pos, stream, r.run);
    }
    stream += r.run;
  });
}

int channel_index(const LaunchState& st, TileCoord t, bool s2mm, const std::string& fifo) {
  for (size_t i = 0; i < st.stats.channels.size(); ++i) {
    const auto& c = st.stats.channels[i];
    if (c.tile == t && c.s2mm == s2mm && c.fifo == fifo) return static_cast<int>(i);
  }
  return -1;
}

// Writer / reader cursor of `fifo` on the pool of its end at `tile`.
PoolEnd pool_end(const LaunchState& st, const Fifo& f, TileCoord tile, bool s2mm, const AccessPattern& pattern) {
  PoolEnd e;
  e.pool = st.layout->endpoint_pool.at({f.name, tile});
  const ObjectPool& op = st.layout->pools[e.pool];
  if (op.link >= 0) {
    const Link& k = st.launch->links[op.link];
    const auto& names = s2mm ? k.inputs : k.outputs;
    e.cursor = static_cast<int>(std::find(names.begin(), names.end(), f.name) - names.begin());
    e.offset = st.layout->link_offset.at({f.name, tile});
  }
  e.object_bytes = f.object_bytes;
  e.pattern = pattern;
  e.elem_bytes = f.elem_bytes;
  e.channel = channel_index(st, tile, s2mm, f.name);
  return e;
}

ShimQueue shim_queue(const LaunchState& st, const Fifo& f, TileCoord tile, bool to_device) {
  ShimQueue q;
  for (const auto& t : st.launch->sequence)
    if (t.fifo == f.name && t.to_device == to_device) q.tasks.push_back(&t);
  q.channel = channel_index(st, tile, !to_device, f.name);
  return q;
}

const HostBuffer& host_info(const LaunchState& st, const std::string& name) {
  for (const auto& h : st.design->host_buffers)
    if (h.name == name) return h;
  throw_error<InternalError>("host buffer '{}' vanished after validation", name);
}

// The bytes a to_device task reads: a read-only view, else host memory.
const std::byte* host_source(const LaunchState& st, const std::string& name) {
  if (st.views) {
    auto v = st.views->find(name);
    if (v != st.views->end()) return v->second.data();
  }
  return st.host->at(name).data();
}

// Does a from_device task of this launch land in host buffer `name`? Then a
// to_device task must snapshot it when it starts, as gather does.
bool written_by_device(const LaunchState& st, const std::string& name) {
  for (const auto& t : st.launch->sequence)
    if (!t.to_device && t.host_buffer == name) return true;
  return false;
}

size_t task_index(const LaunchState& st, const DmaTask& t) {
  return static_cast<size_t>(&t - st.launch->sequence.data());
}

// Has every task before the last wait at or before task i completed?
// Checked before the prefix moves: in a launch's parallel phase
// (simulator.cpp) every task left is past its wait already, and no thread
// writes done_prefix.
bool past_wait(LaunchState& st, size_t i) {
  if (st.done_prefix >= st.wait_gate[i]) return true;
  advance_done_prefix(st);
  return st.done_prefix >= st.wait_gate[i];
}

void finish_task(LaunchState& st, ShimQueue& q) {
  st.task_done[task_index(st, *q.tasks[q.next])] = 1;
  q.active = false;
  ++q.next;
}

// Starts the next task when idle and past its wait; a to_device task gathers
// its whole stream. `conn` is the queue's connection (for a recording).
bool shim_ready(LaunchState& st, ShimQueue& q, bool to_device, Tally& tally, size_t conn) {
  if (q.active) return true;
  if (q.next >= q.tasks.size()) return false;
  const DmaTask& t = *q.tasks[q.next];
  if (!past_wait(st, task_index(st, t))) return false;
  const HostBuffer& h = host_info(st, t.host_buffer);
  q.size = detail::stream_bytes(t.pattern, h.bytes, h.elem_bytes);
  q.pos = 0;
  q.active = true;
  q.direct = nullptr;
  if (to_device) {
    const std::byte* host = host_source(st, h.name);
    const int64_t at = written_by_device(st, h.name) ? -1 : contiguous_offset(t.pattern, h.elem_bytes, h.bytes);
    if (at >= 0) {
      q.direct = host + at;
    } else {
      q.staging.resize(q.size);
      Recorder::scratch(conn, 0, q.staging.data(), q.size);
      gather(host, t.pattern, h.elem_bytes, h.bytes, q.staging.data());
    }
    tally.ddr_read_bytes += q.size;
  } else {
    q.staging.resize(q.size);
    Recorder::scratch(conn, 1, q.staging.data(), q.size);
  }
  return true;
}

// A kernel checks its args' alignment (kernels::arg_bytes, alignof of a
// scalar type: at most 8): a compute slot aliases host bytes only when they
// sit at the same address modulo 8 as the slot's own bytes, so every check
// passes or fails as it would on the copy. (Modulo 16 never matched: weight
// offsets in the packed file are only 8-aligned.)
bool same_alignment(const std::byte* host, const std::byte* slot, TileKind kind) {
  constexpr uintptr_t kAlign = 8;
  return kind != TileKind::compute ||
         reinterpret_cast<uintptr_t>(host) % kAlign == reinterpret_cast<uintptr_t>(slot) % kAlign;
}

// Host speed only (issue 16), no effect on any result: starts the cache
// misses of host bytes a kernel will read in place. Into L2, not L1
// (locality 1, prefetcht2): a round lands objects for every core before any
// core reads one, and into L1 they evicted each other and the simulator's own
// state (llama-3.2-1b decode 0.58-0.63 -> 0.43-0.44 CPU s/token, three A/B
// pairs on one machine).
void prefetch(const std::byte* data, int64_t bytes) {
  constexpr int64_t kLine = 64;
  for (int64_t off = 0; off < bytes; off += kLine) __builtin_prefetch(data + off, 0, 1);
}

void count_pool_bytes(LaunchState& st, Tally& tally, const PoolEnd& e, int64_t bytes) {
  (st.pools[e.pool].kind == TileKind::mem ? tally.l2_bytes : tally.l1_bytes) += bytes;
  if (e.channel >= 0) st.stats.channels[e.channel].bytes += bytes;
}

// A repeating mem-tile source (Fifo::repeat) sends, per repeat, the group
// (objects read .. read + group - 1) and then its tail of that repeat
// (Fifo::repeat_tail): the pool object it sends next.
int64_t source_index(const LaunchState& st, const Connection& c) {
  // A plain FIFO (the most of a decode's sources): sent in order, no divisions.
  if (c.fifo->repeat == 1 && c.fifo->repeat_tail == 0)
    return st.pools[c.source.pool].read[c.source.cursor] + c.repeat_sent;
  const int64_t group = c.fifo->repeat_group, tail = c.fifo->repeat_tail, per = group + tail;
  const int64_t rep = c.repeat_sent / per, j = c.repeat_sent % per;
  return st.pools[c.source.pool].read[c.source.cursor] + (j < group ? j : group + rep * tail + (j - group));
}

// After a pool source sent an object: a tail object frees its slot at once;
// the read cursor moves a whole cycle (the group and every repeat's tail)
// once every repeat went out.
void source_sent(LaunchState& st, Connection& c) {
  const int64_t group = c.fifo->repeat_group, tail = c.fifo->repeat_tail, repeats = c.fifo->repeat;
  Pool& p = st.pools[c.source.pool];
  if (c.repeat_sent % (group + tail) >= group) ++p.tail_read;
  if (++c.repeat_sent == (group + tail) * repeats) {
    p.read[c.source.cursor] += group + repeats * tail;
    p.tail_read = 0;
    c.repeat_sent = 0;
  }
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> pattern_runs(const AccessPattern& p, int elem_bytes, int64_t region_bytes) {
  const Runs r = normalize(p, elem_bytes, region_bytes);
  std::vector<std::pair<int64_t, int64_t>> runs;
  for_each_run(r, p.repeat, [&](int64_t pos) {
    if (!runs.empty() && runs.back().second == pos) runs.back().second = pos + r.run;
    else runs.emplace_back(pos, pos + r.run);
  });
  return runs;
}

void gather(const std::byte* region, const AccessPattern& p, int elem_bytes, int64_t region_bytes, std::byte* stream) {
  copy_pattern<true>(const_cast<std::byte*>(region), p, elem_bytes, region_bytes, stream);
}

void scatter(std::byte* region, const AccessPattern& p, int elem_bytes, int64_t region_bytes, const std::byte* stream) {
  copy_pattern<false>(region, p, elem_bytes, region_bytes, const_cast<std::byte*>(stream));
}

int64_t contiguous_offset(const AccessPattern& p, int elem_bytes, int64_t region_bytes) {
  if (p.repeat != 1) return -1;
  Runs r = normalize(p, elem_bytes, region_bytes);
  return r.sizes.empty() ? r.offset : -1;
}

void advance_done_prefix(LaunchState& st) {
  while (st.done_prefix < st.task_done.size() && st.task_done[st.done_prefix]) ++st.done_prefix;
}

void fold_tallies(LaunchState& st) {
  for (Connection& c : st.conns) {
    st.stats.ddr_read_bytes += c.tally.ddr_read_bytes;
    st.stats.ddr_write_bytes += c.tally.ddr_write_bytes;
    st.stats.l2_bytes += c.tally.l2_bytes;
    st.stats.l1_bytes += c.tally.l1_bytes;
    st.stats.transfers += c.tally.transfers;
    c.tally = {};
  }
}

int64_t Pool::min_written() const { return *std::min_element(written.begin(), written.end()); }
int64_t Pool::max_written() const { return *std::max_element(written.begin(), written.end()); }
int64_t Pool::min_read() const { return *std::min_element(read.begin(), read.end()); }

bool Pool::writable(int64_t n) const {
  if (cycle == 0) return n < min_read() + depth;
  // A later cycle waits for the reader to finish this one: its group reuses
  // the resident slots, its tail the slots this cycle's tail still cycles.
  if (n - n % cycle != min_read()) return false;
  const int64_t u = n % cycle - group;  // position in the tail, < 0 for the group
  return u < depth - group || tail_read > u - (depth - group);
}

void build_connections(LaunchState& st) {
  const auto& seq = st.launch->sequence;
  st.wait_gate.assign(seq.size(), 0);
  st.task_done.assign(seq.size(), 0);
  for (size_t i = 0, gate = 0; i < seq.size(); ++i) st.wait_gate[i] = gate = seq[i].after_wait ? i : gate;
  for (const auto& f : st.launch->fifos) {
    if (shares_memory(f, *st.spec)) continue;
    Connection c;
    c.fifo = &f;
    c.chunk = detail::fifo_chunk_bytes(f, *st.spec);
    if (st.spec->kind_of_row(f.producer.row) == TileKind::shim) {
      c.shim_source = true;
      c.source_q = shim_queue(st, f, f.producer, true);
    } else {
      c.source = pool_end(st, f, f.producer, false, f.producer_pattern);
    }
    for (size_t i = 0; i < f.consumers.size(); ++i) {
      TileCoord t = f.consumers[i];
      if (st.spec->kind_of_row(t.row) == TileKind::shim) {
        c.shim_sink = true;
        c.sink_q = shim_queue(st, f, t, false);
      } else {
        c.sinks.push_back(pool_end(st, f, t, true, i < f.consumer_patterns.size() ? f.consumer_patterns[i] : AccessPattern{}));
      }
    }
    st.conns.push_back(std::move(c));
  }
}

// A finished from_device task whose host bytes another partition writes
// too, while the partitions run side by side: its stream waits in c.held.
void hold_back(Connection& c, size_t task, size_t conn) {
  c.held.resize(c.held_bytes);  // no reallocation once this run state has it
  Recorder::scratch(conn, 3, c.held.data(), c.held_bytes);
  const ShimQueue& q = c.sink_q;
  std::memcpy(c.held.data() + c.held_at[task], q.staging.data(), static_cast<size_t>(q.size));
  Recorder::copy(c.held.data() + c.held_at[task], q.staging.data(), q.size);
  c.pending.push_back(task);
}

bool run_connection(LaunchState& st, Connection& c) {
  bool progress = false;
  const auto index = static_cast<size_t>(&c - st.conns.data());
  for (;;) {
    if (c.shim_source ? !shim_ready(st, c.source_q, true, c.tally, index)
                      : source_index(st, c) >= st.pools[c.source.pool].min_written())
      break;
    bool ready = !c.shim_sink || shim_ready(st, c.sink_q, false, c.tally, index);
    for (const auto& e : c.sinks) {
      const Pool& p = st.pools[e.pool];
      ready = ready && p.writable(p.written[e.cursor]);
    }
    if (!ready) break;

    const std::byte* data;
    // Host bytes read in place stay put for the whole launch (no from_device
    // task writes their buffer): an aliasing pool may point at them.
    bool stable = false;
    if (c.shim_source) {
      data = c.source_q.stream() + c.source_q.pos;
      stable = c.source_q.direct != nullptr;
      if (c.source_q.channel >= 0) st.stats.channels[c.source_q.channel].bytes += c.chunk;
    } else {
      Pool& p = st.pools[c.source.pool];
      const int64_t n = source_index(st, c);
      const std::byte* obj = p.read_slot(n) + c.source.offset;
      if (c.source.pattern == AccessPattern{}) {
        data = obj;  // contiguous: sinks copy straight from the slot
        stable = p.may_alias && p.alias[static_cast<size_t>(p.slot_index(n))] != nullptr;
      } else {
        c.temp.resize(c.chunk);
        Recorder::scratch(index, 2, c.temp.data(), c.chunk);
        gather(obj, c.source.pattern, c.source.elem_bytes, c.source.object_bytes, c.temp.data());
        data = c.temp.data();
      }
      count_pool_bytes(st, c.tally, c.source, c.chunk);
    }
    for (const auto& e : c.sinks) {
      Pool& p = st.pools[e.pool];
      const int64_t n = p.written[e.cursor];
      std::byte* obj = p.slot(n) + e.offset;
      const bool alias = p.may_alias && stable && same_alignment(data, obj, p.kind);
      if (p.may_alias) p.alias[static_cast<size_t>(p.slot_index(n))] = alias ? data : nullptr;
      // The core reads an aliased slot's host bytes (decode GEMV weights, a
      // few hundred bytes per call, 335k calls per SmolLM2 token) a call or
      // more later: their misses overlap the simulator's work in between
      // instead of stalling the kernel's first loads (11-19 % less CPU per
      // token, A/B on this machine).
      if (alias && p.kind == TileKind::compute) prefetch(data, c.chunk);
      if (!alias) {  // else the slot reads as the host bytes
        if (e.pattern == AccessPattern{}) {
          std::memcpy(obj, data, c.chunk);
          Recorder::copy(obj, data, c.chunk);
        } else {
          scatter(obj, e.pattern, e.elem_bytes, e.object_bytes, data);
        }
      }
      count_pool_bytes(st, c.tally, e, c.chunk);
      ++p.written[e.cursor];
    }
    if (c.shim_sink) {
      ShimQueue& q = c.sink_q;
      std::memcpy(q.staging.data() + q.pos, data, c.chunk);
      Recorder::copy(q.staging.data() + q.pos, data, c.chunk);
      if (q.channel >= 0) st.stats.channels[q.channel].bytes += c.chunk;
      q.pos += c.chunk;
      if (q.pos == q.size) {  // task complete: land it in DDR
        const DmaTask& t = *q.tasks[q.next];
        const HostBuffer& h = host_info(st, t.host_buffer);
        if (st.side_by_side && !c.defer_task.empty() && c.defer_task[q.next])
          hold_back(c, q.next, index);
        else
          scatter(st.host->at(h.name).data(), t.pattern, h.elem_bytes, h.bytes, q.staging.data());
        c.tally.ddr_write_bytes += q.size;
        finish_task(st, q);
      }
    }
    if (c.shim_source) {
      ShimQueue& q = c.source_q;
      q.pos += c.chunk;
      if (q.pos == q.size) finish_task(st, q);
    } else {
      source_sent(st, c);
    }
    ++c.moved;
    ++c.tally.transfers;
    progress = true;
  }
  return progress;
}

void land_deferred(LaunchState& st, Connection& c) {
  for (size_t k : c.pending) {
    const DmaTask& t = *c.sink_q.tasks[k];
    const HostBuffer& h = host_info(st, t.host_buffer);
    scatter(st.host->at(h.name).data(), t.pattern, h.elem_bytes, h.bytes, c.held.data() + c.held_at[k]);
  }
  c.pending.clear();
}

std::vector<std::string> describe_unfinished(const LaunchState& st) {
  std::vector<std::string> out;
  auto queue_text = [&](const ShimQueue& q, const Fifo& f, int64_t chunk, bool to_device) {
    const DmaTask& t = *q.tasks[q.next];
    const HostBuffer& h = host_info(st, t.host_buffer);
    return fmt::format("dma {} task of fifo '{}' ({} host buffer '{}') stopped after {} of {} objects; {} task(s) unfinished",
                       to_device ? "to_device" : "from_device", f.name, to_device ? "from" : "into", t.host_buffer,
                       q.active ? q.pos / chunk : 0, detail::stream_bytes(t.pattern, h.bytes, h.elem_bytes) / chunk,
                       q.tasks.size() - q.next);
  };
  for (const auto& c : st.conns) {
    if (c.shim_source && c.source_q.next < c.source_q.tasks.size())
      out.push_back(queue_text(c.source_q, *c.fifo, c.chunk, true));
    if (c.shim_sink && c.sink_q.next < c.sink_q.tasks.size())
      out.push_back(queue_text(c.sink_q, *c.fifo, c.chunk, false));
  }
  for (const auto& p : st.pools) {
    int64_t undelivered = p.max_written() - p.min_read();
    if (undelivered > 0)
      out.push_back(fmt::format("pool '{}' at {} holds {} object(s) never consumed (dropped transfer?)", p.name,
                                to_string(p.tile), undelivered));
  }
  return out;
}

}  // namespace tessera::npu::sim
