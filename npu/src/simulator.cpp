// Simulator entry point: per launch, lay out the tiles, build pools,
// connections and cores, then run them round robin until nothing moves.
#include "tessera/npu/simulator.h"

#include <algorithm>
#include <atomic>
#include <optional>

#include <fmt/format.h>

#include "simulator_state.h"
#include "simulator_trace.h"
#include "validator_rules.h"
#include "tessera/core/threads.h"
#include "tessera/npu/validator.h"

namespace tessera::npu {
namespace {

// Tile memory starts as NaN bytes (0xFF is a NaN in bf16 and f32): a kernel
// that reads what no DMA or kernel wrote shows it in its results, as garbage
// would on silicon, instead of silently reading zeros.
constexpr std::byte kPoison{0xFF};

void check_view(const Design& d, const HostBuffer& h, const HostMemory& host, const HostViews& views) {
  auto v = views.find(h.name);
  if (v == views.end()) return;
  if (host.count(h.name))
    throw_error<SimulationError>("design '{}': host buffer '{}' is both a read-only view and host memory", d.name,
                                 h.name);
  if (static_cast<int64_t>(v->second.size()) != h.bytes)
    throw_error<SimulationError>("design '{}': read-only host view '{}' holds {} bytes, the design declares {}",
                                 d.name, h.name, v->second.size(), h.bytes);
  for (const auto& l : d.launches)
    for (const auto& t : l.sequence)
      if (!t.to_device && t.host_buffer == h.name)
        throw_error<SimulationError>("design '{}': launch '{}' writes host buffer '{}', which is a read-only view",
                                     d.name, l.name, h.name);
}

void prepare_host(const Design& d, HostMemory& host, const HostViews* views) {
  for (const auto& h : d.host_buffers) {
    if (views && views->count(h.name)) {
      check_view(d, h, host, *views);
      continue;
    }
    auto it = host.find(h.name);
    if (it == host.end()) {
      host[h.name].assign(h.bytes, std::byte{0});
    } else if (static_cast<int64_t>(it->second.size()) != h.bytes) {
      throw_error<SimulationError>("design '{}': host buffer '{}' holds {} bytes, the design declares {}", d.name,
                                   h.name, it->second.size(), h.bytes);
    }
  }
}

// Only up to the highest allocated byte: nothing addresses a tile's memory
// except through its pools and buffers. Bytes new to this thread's arena start
// poisoned; bytes it already has are poisoned per run by poison() where a
// launch could read them before writing them.
void grow_memory(const std::vector<std::pair<TileCoord, size_t>>& need, std::map<TileCoord, std::vector<std::byte>>& mem) {
  for (const auto& [t, n] : need) {
    auto& bytes = mem[t];
    if (bytes.size() < n) bytes.resize(n, kPoison);
  }
}

// What a launch could read before writing it: local buffers (an accumulator
// nobody zeroes), pools a core writes (a kernel may leave part of an output
// unwritten) and pools whose objects no single DMA lands whole. A pool whose
// one writer is a DMA landing every byte of each object keeps the stale bytes
// of earlier runs: a reader acquires an object only after it landed, so it
// cannot see them. Poisoning those (weights, activations in L1 and L2) was a
// quarter of a decode token's host time.
// Per pool: is its one writer a DMA landing every byte of each object?
std::vector<bool> written_whole_by_one_dma(const sim::LaunchState& st) {
  std::vector<int> covering(st.pools.size(), 0);  // whole-object DMA writers; -1: any other writer
  for (const auto& c : st.conns)
    for (const auto& e : c.sinks) {
      const sim::Pool& p = st.pools[static_cast<size_t>(e.pool)];
      const bool whole = e.offset == 0 && c.chunk == p.slot_bytes &&
                         (e.pattern == AccessPattern{} ||
                          sim::contiguous_offset(e.pattern, e.elem_bytes, e.object_bytes) == 0);
      int& n = covering[static_cast<size_t>(e.pool)];
      n = whole && n >= 0 ? n + 1 : -1;
    }
  for (const auto& core : st.cores)
    for (const auto& port : core.ports)
      if (port.produce) covering[static_cast<size_t>(port.pool)] = -1;
  std::vector<bool> out(st.pools.size());
  for (size_t i = 0; i < st.pools.size(); ++i)
    out[i] = covering[i] == 1 && st.pools[i].written.size() == 1;
  return out;
}

std::vector<sim::MemRange> must_poison(const sim::LaunchState& st) {
  const std::vector<bool> whole = written_whole_by_one_dma(st);
  std::vector<sim::MemRange> out;
  for (size_t i = 0; i < st.pools.size(); ++i) {
    const sim::Pool& p = st.pools[i];
    if (whole[i]) continue;
    out.push_back({p.tile, p.address, p.address + p.depth * p.slot_bytes});
  }
  for (const auto& b : st.launch->buffers) {
    const int64_t at = st.layout->buffer_address.at({b.name, b.tile});
    out.push_back({b.tile, at, at + b.bytes});
  }
  return out;
}

// Per pool: does any core write its bytes? A core port that produces into it
// does, and so does a call arg on it that its kernel does not declare
// read-only (KernelDef::read_only_args).
std::vector<bool> core_writes(const sim::LaunchState& st) {
  std::vector<bool> out(st.pools.size(), false);
  for (const auto& core : st.cores) {
    for (const auto& port : core.ports)
      if (port.produce) out[static_cast<size_t>(port.pool)] = true;
    for (const auto& in : core.code)
      for (size_t a = 0; a < in.args.size(); ++a)
        for (int port : {in.args[a].consume_port, in.args[a].produce_port})
          if (port >= 0 && !in.kernel->reads_only(a))
            out[static_cast<size_t>(core.ports[static_cast<size_t>(port)].pool)] = true;
  }
  return out;
}

// Pools written whole by one DMA may alias the host bytes that DMA reads in
// place (sim::Pool::may_alias): mem-tile pools no core touches, and
// compute-tile pools whose cores only read them.
void mark_aliasing(sim::LaunchState& st) {
  const std::vector<bool> whole = written_whole_by_one_dma(st);
  const std::vector<bool> written = core_writes(st);
  std::vector<bool> core_port(st.pools.size(), false);
  for (const auto& core : st.cores)
    for (const auto& port : core.ports) core_port[static_cast<size_t>(port.pool)] = true;
  for (size_t i = 0; i < st.pools.size(); ++i) {
    sim::Pool& p = st.pools[i];
    p.may_alias = whole[i] && ((p.kind == TileKind::mem && !core_port[i]) ||
                               (p.kind == TileKind::compute && !written[i]));
    if (p.may_alias) p.alias.assign(static_cast<size_t>(p.depth), nullptr);
  }
}

void poison(const std::vector<sim::MemRange>& ranges, std::map<TileCoord, std::vector<std::byte>>& mem) {
  for (const auto& r : ranges) {
    auto& bytes = mem.at(r.tile);
    std::fill(bytes.begin() + r.begin, bytes.begin() + r.end, kPoison);
  }
}

void reset_queue(sim::ShimQueue& q, const sim::ShimQueue& ready) {
  q.next = ready.next;
  q.active = ready.active;
  q.direct = ready.direct;
  q.size = ready.size;
  q.pos = ready.pos;
}

// Puts a reused run state back to its prepared template: every field a run
// moves (cursors, queues, program counters, stats); bind_memory rebinds the
// pointers into tile memory.
void reset_state(sim::LaunchState& st, const sim::LaunchState& ready) {
  for (size_t i = 0; i < st.pools.size(); ++i) {
    st.pools[i].written = ready.pools[i].written;
    st.pools[i].read = ready.pools[i].read;
    st.pools[i].tail_read = ready.pools[i].tail_read;
    std::fill(st.pools[i].alias.begin(), st.pools[i].alias.end(), nullptr);  // no pointer into old host memory
  }
  for (size_t i = 0; i < st.conns.size(); ++i) {
    sim::Connection& c = st.conns[i];
    const sim::Connection& r = ready.conns[i];
    reset_queue(c.source_q, r.source_q);
    reset_queue(c.sink_q, r.sink_q);
    c.moved = r.moved;
    c.repeat_sent = r.repeat_sent;
    c.pending.clear();  // a run that threw between the partitions and their landing
    c.tally = {};  // a run that threw left its counts
  }
  for (size_t i = 0; i < st.cores.size(); ++i) {
    sim::CoreState& c = st.cores[i];
    const sim::CoreState& r = ready.cores[i];
    c.pc = r.pc;
    c.loops = r.loops;
    c.done = r.done;
    c.stats = r.stats;
    for (size_t k = 0; k < c.ports.size(); ++k) c.ports[k].held = r.ports[k].held;
  }
  st.stats = ready.stats;
}

void build_pools(sim::LaunchState& st) {
  for (const auto& op : st.layout->pools) {
    sim::Pool p;
    p.name = op.name;
    p.tile = op.tile;
    p.kind = st.spec->kind_of_row(op.tile.row);
    p.address = op.address;
    p.depth = op.depth;
    p.slot_bytes = op.object_bytes;
    size_t writers = 1, readers = 1;
    if (op.link >= 0) {
      writers = st.launch->links[op.link].inputs.size();
      readers = st.launch->links[op.link].outputs.size();
    }
    p.written.assign(writers, 0);
    p.read.assign(readers, 0);
    if (op.link >= 0)  // a forward link whose output keeps a group and streams a tail
      for (const auto& f : st.launch->fifos)
        if (f.repeat_tail > 0 && f.name == st.launch->links[op.link].outputs[0]) {
          p.group = f.repeat_group;
          p.cycle = f.repeat_group + int64_t{f.repeat} * f.repeat_tail;
        }
    st.pools.push_back(std::move(p));
  }
  for (const auto& ch : st.layout->channels) st.stats.channels.push_back({ch.tile, ch.s2mm, ch.index, ch.fifo, 0});
}

// Cores that share a pool (shared-memory FIFOs) must run in one sequence;
// other groups touch disjoint memory and cursors, so they may run on host
// threads with results identical to the serial order.
std::vector<std::vector<size_t>> core_groups(const sim::LaunchState& st) {
  std::vector<size_t> parent(st.cores.size());
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = i;
  auto root = [&](size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  std::map<int, size_t> pool_owner;
  for (size_t i = 0; i < st.cores.size(); ++i)
    for (const auto& p : st.cores[i].ports) {
      auto [it, fresh] = pool_owner.emplace(p.pool, i);
      if (!fresh) parent[root(i)] = root(it->second);
    }
  std::map<size_t, std::vector<size_t>> by_root;
  for (size_t i = 0; i < st.cores.size(); ++i) by_root[root(i)].push_back(i);
  std::vector<std::vector<size_t>> groups;
  for (auto& [r, g] : by_root) groups.push_back(std::move(g));
  return groups;
}

// Threads pay off only when kernels do real work per call (GEMM / GEMV
// blocks); copies and tiny kernels run faster serially than a thread spawn.
bool heavy_calls(const sim::LaunchState& st) {
  constexpr int64_t kMinWork = 1 << 16;  // a 64 x 64 x 16 block; a GEMV row (8K MACs) is too small
  for (const auto& c : st.cores)
    for (const auto& in : c.code)
      if (in.macs >= kMinWork) return true;
  return false;
}

bool worth_threads(const sim::LaunchState& st) {
  return st.groups.size() >= 2 && st.heavy && thread_count() >= 2;
}

bool run_cores(sim::LaunchState& st, const std::vector<std::vector<size_t>>& groups, bool threaded) {
  if (!threaded) {  // the same order as body(0, n) below, without a vector per round
    bool moved = false;
    for (const auto& g : groups)
      for (size_t i : g)
        if (!st.cores[i].done) moved |= sim::run_core(st, st.cores[i]);
    return moved;
  }
  std::vector<char> moved(groups.size(), 0);
  auto body = [&](size_t b, size_t e) {
    for (size_t g = b; g < e; ++g)
      for (size_t i : groups[g])
        if (!st.cores[i].done) moved[g] |= sim::run_core(st, st.cores[i]);
  };
  parallel_for(groups.size(), body);
  return std::find(moved.begin(), moved.end(), 1) != moved.end();
}

// Runs partition `part` until it finishes or waits on another.
void run_part(sim::LaunchState& st, const sim::LaunchState::Part& part) {
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t i : part.cores)
      if (!st.cores[i].done) progress |= sim::run_core(st, st.cores[i]);
    for (size_t i : part.conns) progress |= sim::run_connection(st, st.conns[i]);
  }
}

// The serial prefix (every core and connection, round robin) until the
// broadcasts have landed and every task left is past its wait; then each
// partition runs to its end on a host thread. Partitions share no pool and no
// connection, and no task left waits for another's, so the results, stats and
// cycles are the serial order's. Returns false where the prefix stalled
// first: the serial loop finishes the launch.
bool run_partitions(sim::LaunchState& st, sim::Recorder* rec) {
  auto released = [&] {
    for (size_t i : st.prefix) {
      const sim::ShimQueue& q = st.conns[i].source_q;
      if (q.active || q.next < q.tasks.size()) return false;
    }
    sim::advance_done_prefix(st);
    return st.gate_suffix_max[st.done_prefix] <= st.done_prefix;
  };
  // The broadcasts alone first: a resident x lands in one object per core,
  // and a round of every core and connection cost as much as the broadcast.
  for (size_t i : st.prefix) sim::run_connection(st, st.conns[i]);
  while (!released()) {
    bool progress = run_cores(st, st.groups, false);
    for (auto& c : st.conns) progress |= sim::run_connection(st, c);
    if (!progress) return false;
  }
  // Parts are claimed one at a time by whichever thread is free: a GEMV's
  // first column may carry fewer streams than the others.
  if (rec) rec->begin_parts(st.parts.size());
  {
    struct SideBySide {  // off again however the partitions end (a run state is reused)
      bool& on;
      ~SideBySide() { on = false; }
    } side{st.side_by_side = true};
    parallel_for_each(st.parts.size(), [&](size_t p) {
      if (rec) rec->begin_part(p);
      struct End {
        ~End() { sim::Recorder::end(); }
      } end;
      run_part(st, st.parts[p]);
    });
  }
  if (rec) rec->begin_tail();
  for (const auto& part : st.parts)
    for (size_t i : part.conns) sim::land_deferred(st, st.conns[i]);
  st.stats.host_partitions = static_cast<int>(st.parts.size());
  return true;
}

// Partitions pay off when a launch streams enough bytes to outweigh handing
// work to a pool thread. The pool's workers spin before they park
// (core/threads.cpp), so a handoff costs microseconds, not the tens of a
// futex wake: SmolLM2-135M's 576-wide decode GEMVs (221 KB to 1.8 MB) now
// gain too (100-token run 6.4 -> 5.2 s wall on this 2-core machine, where a
// 2 MiB threshold had measured no faster before the pool spun). Below 64 KiB
// a launch is a few dozen kernel calls, under the handoff's cost.
bool worth_partitions(const sim::LaunchState& st) {
  constexpr int64_t kMinStreamBytes = 64 << 10;
  return st.partitions_on && st.parts.size() >= 2 && st.stream_bytes >= kMinStreamBytes && thread_count() >= 2;
}

// `rec`: record the run (simulator_trace.h); its cores must not run on
// threads of their own within a round, which no list could order.
void schedule(sim::LaunchState& st, sim::Recorder* rec) {
  const bool threaded = worth_threads(st);
  if (rec && threaded) rec->fail();
  if (!threaded && worth_partitions(st)) run_partitions(st, rec);
  for (;;) {
    bool progress = run_cores(st, st.groups, threaded);
    for (auto& c : st.conns) progress |= sim::run_connection(st, c);
    if (!progress) break;
  }
  std::vector<std::string> problems;
  sim::fold_tallies(st);
  for (const auto& c : st.cores)
    if (!c.done) problems.push_back(sim::describe_blocked(st, c));
  for (auto& p : sim::describe_unfinished(st)) problems.push_back(std::move(p));
  if (!problems.empty())
    throw_error<SimulationError>("design '{}' launch '{}' cannot finish (deadlock or dropped transfer):\n  {}",
                                 st.design->name, st.launch->name, fmt::join(problems, "\n  "));
}

}  // namespace

int64_t LaunchStats::macs() const {
  int64_t n = 0;
  for (const auto& [t, s] : tiles) n += s.macs;
  return n;
}

int64_t SimStats::ddr_bytes() const {
  int64_t n = 0;
  for (const auto& l : launches) n += l.ddr_bytes();
  return n;
}

int64_t SimStats::macs() const {
  int64_t n = 0;
  for (const auto& l : launches) n += l.macs();
  return n;
}

namespace {
std::atomic<uint64_t> next_simulator_id{1};
}  // namespace

Simulator::Simulator(const DeviceSpec& spec, const KernelRegistry& registry)
    : spec_(spec), registry_(&registry), id_(next_simulator_id++) {
  spec_.validate();
}

// Everything of a launch's state that does not depend on the data: layout,
// pools, DMA connections and compiled core programs, built once. A run copies
// it and binds the copy to that run's tile memories.
std::shared_ptr<const PreparedDesign> Simulator::prepare(const Design& design) const {
  std::vector<LaunchLayout> layouts = validate(design, spec_, *registry_);
  std::shared_ptr<PreparedDesign> p(new PreparedDesign(design, id_));
  p->layouts_ = std::move(layouts);
  std::map<TileCoord, size_t> need;
  for (const LaunchLayout& layout : p->layouts_)
    for (const auto& [t, m] : layout.memory) need[t] = std::max(need[t], static_cast<size_t>(m.used()));
  p->memory_need_.assign(need.begin(), need.end());
  for (size_t i = 0; i < p->design_.launches.size(); ++i) {
    const Launch& launch = p->design_.launches[i];
    auto st = std::make_shared<sim::LaunchState>();
    st->design = &p->design_;
    st->launch = &launch;
    st->spec = &spec_;
    st->layout = &p->layouts_[i];
    st->stats.name = launch.name;
    build_pools(*st);
    sim::build_connections(*st);
    sim::compile_cores(*st, *registry_);
    st->poison = must_poison(*st);
    mark_aliasing(*st);
    st->groups = core_groups(*st);  // once: two maps per launch per run were a dispatch's fixed cost
    st->heavy = heavy_calls(*st);
    sim::partition(*st);
    st->spec = nullptr;  // bound per run: this simulator may be copied or moved
    p->launches_.push_back(std::move(st));
    p->traces_.push_back(std::make_shared<sim::TraceSlot>());
  }
  return p;
}

PreparedDesign::RunStates PreparedDesign::take_states() const {
  {
    std::lock_guard lock(idle_mutex_);
    if (!idle_.empty()) {
      RunStates s = std::move(idle_.back());
      idle_.pop_back();
      return s;
    }
  }
  RunStates s;
  for (const auto& ready : launches_) s.push_back(std::make_shared<sim::LaunchState>(*ready));
  return s;
}

void PreparedDesign::give_states(RunStates states) const {
  std::lock_guard lock(idle_mutex_);
  idle_.push_back(std::move(states));
}

int64_t Simulator::trace_bytes() { return sim::TraceBytes::in_use(); }
int64_t Simulator::set_trace_budget(int64_t bytes) { return sim::TraceBytes::set_budget(bytes); }

SimStats Simulator::run(const Design& design, HostMemory& host, const HostViews* views) const {
  return run(*prepare(design), host, views);
}

SimStats Simulator::run(const PreparedDesign& prepared, HostMemory& host, const HostViews* views) const {
  SimStats stats;
  run_into(prepared, host, views, &stats);
  return stats;
}

void Simulator::run_bytes(const PreparedDesign& prepared, HostMemory& host, const HostViews* views) const {
  run_into(prepared, host, views, nullptr);
}

void Simulator::run_into(const PreparedDesign& prepared, HostMemory& host, const HostViews* views,
                         SimStats* stats) const {
  if (prepared.owner_ != id_)
    throw_error<InternalError>("design '{}' was prepared by another simulator (spec or kernel registry may differ)",
                               prepared.design_.name);
  const Design& design = prepared.design_;
  prepare_host(design, host, views);
  // Tile memories persist across the launches of one dispatch (reconfiguring
  // the array does not clear them), so stale data stays visible. Each run
  // starts with poison wherever any of its launches could read before
  // writing; the vectors keep their bytes from this thread's previous run,
  // which spares a malloc, page faults and a full poisoning per dispatch.
  thread_local std::map<TileCoord, std::vector<std::byte>> arena;
  std::map<TileCoord, std::vector<std::byte>> mem;
  mem.swap(arena);  // a nested run on this thread finds the arena empty, not in use
  struct GiveBack {
    std::map<TileCoord, std::vector<std::byte>>& mem;
    ~GiveBack() { arena.swap(mem); }
  } give_back{mem};
  grow_memory(prepared.memory_need_, mem);
  for (const auto& ready : prepared.launches_) poison(ready->poison, mem);
  PreparedDesign::RunStates states = prepared.take_states();
  struct PutBack {
    const PreparedDesign& prepared;
    PreparedDesign::RunStates& states;
    ~PutBack() { prepared.give_states(std::move(states)); }
  } put_back{prepared, states};
  for (size_t i = 0; i < states.size(); ++i) {
    sim::TraceSlot& slot = *prepared.traces_[i];
    const int earlier_runs = replay_ ? slot.runs.fetch_add(1) : -1;
    if (earlier_runs >= 1 && !slot.failed) {
      std::shared_ptr<const sim::Trace> trace;
      {
        std::lock_guard lock(slot.mu);
        trace = slot.trace;
      }
      if (trace && trace->partitions_on == host_partitions_ && sim::replay(*trace, mem, host, views)) {
        if (stats != nullptr) {
          stats->launches.push_back(trace->stats);
          stats->launches.back().replayed = true;
        }
        continue;
      }
    }
    sim::LaunchState& st = *states[i];
    reset_state(st, *prepared.launches_[i]);
    st.spec = &spec_;
    st.partitions_on = host_partitions_;
    st.host = &host;
    st.views = views;
    sim::bind_memory(st, mem);
    std::optional<sim::Recorder> rec;
    if (earlier_runs == 0) {
      rec.emplace(st, *prepared.launches_[i], mem);
      rec->begin_head();
    }
    {
      struct End {
        ~End() { sim::Recorder::end(); }
      } end;
      schedule(st, rec ? &*rec : nullptr);
    }
    for (const auto& c : st.cores) st.stats.tiles[c.tile] = c.stats;
    if (rec) {
      std::shared_ptr<const sim::Trace> trace = rec->finish(st.stats);
      std::lock_guard lock(slot.mu);
      slot.trace = std::move(trace);
      slot.failed = slot.trace == nullptr;
    }
    if (stats != nullptr) stats->launches.push_back(std::move(st.stats));
  }
}

}  // namespace tessera::npu
