// Recording a launch's run as byte operations, and replaying them
// (simulator_trace.h).
#include "simulator_trace.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "tessera/core/threads.h"

namespace tessera::npu::sim {

namespace {

// Beyond this a trace costs more memory than its replay saves time (a long
// prefill's strided gathers are many short runs); such launches keep the
// interpreter. 64 Ki ops of 64 bytes: 4 MiB per list. SmolLM2-135M's decode
// designs take at most a few thousand.
constexpr size_t kMaxOps = size_t{1} << 16;

struct ThreadRecording {
  void* list = nullptr;  // Recorder::ListState of this thread's list
};
thread_local ThreadRecording t_recording;

int align_of(const std::byte* p) { return static_cast<int>(reinterpret_cast<uintptr_t>(p) % 8); }

std::atomic<int64_t> g_trace_bytes{0};
std::atomic<int64_t> g_trace_budget{TraceBytes::kDefaultBudget};

}  // namespace

TraceBytes::~TraceBytes() { g_trace_bytes -= bytes_; }

bool TraceBytes::claim(int64_t bytes) {
  int64_t used = g_trace_bytes.load();
  do {
    if (used + bytes > g_trace_budget.load()) return false;
  } while (!g_trace_bytes.compare_exchange_weak(used, used + bytes));
  bytes_ += bytes;
  return true;
}

int64_t TraceBytes::in_use() { return g_trace_bytes.load(); }
int64_t TraceBytes::set_budget(int64_t bytes) { return g_trace_budget.exchange(bytes); }

struct RecorderAccess {
  static Recorder::ListState* current() { return static_cast<Recorder::ListState*>(t_recording.list); }
};

Recorder::Recorder(const LaunchState& run, const LaunchState& prepared,
                   std::map<TileCoord, std::vector<std::byte>>& mem)
    : run_(run), prepared_(prepared) {
  auto add = [&](Region r, const std::byte* base, size_t bytes) {
    r.align = align_of(base);
    fixed_.push_back({base, base + bytes, static_cast<uint32_t>(trace_.regions.size())});
    trace_.regions.push_back(std::move(r));
  };
  for (auto& [tile, bytes] : mem) add({Region::Kind::tile, tile, {}, 0, 0}, bytes.data(), bytes.size());
  for (const auto& h : run.design->host_buffers) {
    const std::byte* base = nullptr;
    size_t size = 0;
    auto v = run.views ? run.views->find(h.name) : HostViews::const_iterator{};
    if (run.views && v != run.views->end()) {
      base = v->second.data();
      size = v->second.size();
    } else {
      const auto& bytes = run.host->at(h.name);
      base = bytes.data();
      size = bytes.size();
    }
    add({Region::Kind::host, {}, h.name, 0, 0}, base, size);
  }
  std::sort(fixed_.begin(), fixed_.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  scratch_base_ = trace_.regions.size();
  for (size_t i = 0; i < run.conns.size() * kScratchPerConn; ++i) trace_.regions.push_back({Region::Kind::scratch, {}, {}, 0, 0});
  trace_.partitions_on = run.partitions_on;
}

void Recorder::start(OpList* out) {
  auto ls = std::make_unique<ListState>();
  ls->rec = this;
  ls->out = out;
  ls->extent.assign(trace_.regions.size(), 0);
  t_recording.list = ls.get();
  std::lock_guard lock(mu_);
  lists_.push_back(std::move(ls));
}

void Recorder::begin_head() { start(&trace_.head); }
void Recorder::begin_parts(size_t n) { trace_.parts.resize(n); }
void Recorder::begin_part(size_t part) { start(&trace_.parts.at(part)); }
void Recorder::begin_tail() { start(&trace_.tail); }
void Recorder::end() { t_recording.list = nullptr; }

bool Recorder::resolve(ListState& ls, const std::byte* p, int64_t bytes, Addr& out) {
  auto match = [&](const Range& r) {
    if (p < r.begin || p + bytes > r.end) return false;
    out = {r.region, p - r.begin};
    int64_t& e = ls.extent[r.region];
    e = std::max(e, out.offset + bytes);
    return true;
  };
  auto it = std::upper_bound(fixed_.begin(), fixed_.end(), p,
                             [](const std::byte* q, const Range& r) { return q < r.begin; });
  if (it != fixed_.begin() && match(*std::prev(it))) return true;
  {
    std::lock_guard lock(scratch_mu_);
    for (const Range& r : scratch_)
      if (match(r)) return true;
  }
  failed_ = true;  // bytes of no known region: not replayable
  return false;
}

void Recorder::copy(std::byte* dst, const std::byte* src, int64_t bytes) {
  ListState* ls = RecorderAccess::current();
  if (ls == nullptr || bytes == 0) return;
  Recorder& rec = *ls->rec;
  TraceOp op;
  op.bytes = bytes;
  if (!rec.resolve(*ls, dst, bytes, op.dst) || !rec.resolve(*ls, src, bytes, op.src)) return;
  std::vector<TraceOp>& ops = ls->out->ops;
  if (!ops.empty()) {  // one run, where the last copy continues in both regions
    TraceOp& last = ops.back();
    // One memcpy equals the two only if the merged source does not overlap
    // the merged destination (the second would read what the first wrote).
    const bool apart = op.dst.region != op.src.region || last.dst.offset + last.bytes + bytes <= last.src.offset ||
                       last.src.offset + last.bytes + bytes <= last.dst.offset;
    if (last.call == nullptr && apart && last.dst.region == op.dst.region && last.src.region == op.src.region &&
        last.dst.offset + last.bytes == op.dst.offset && last.src.offset + last.bytes == op.src.offset) {
      last.bytes += bytes;
      return;
    }
  }
  if (ops.size() >= kMaxOps) {
    rec.failed_ = true;
    return;
  }
  ops.push_back(op);
}

void Recorder::call(const CoreState& cs, const Instr& in, std::span<const std::span<std::byte>> args) {
  ListState* ls = RecorderAccess::current();
  if (ls == nullptr) return;
  Recorder& rec = *ls->rec;
  const size_t core = static_cast<size_t>(&cs - rec.run_.cores.data());
  const size_t pc = static_cast<size_t>(&in - cs.code.data());
  TraceOp op;
  op.call = &rec.prepared_.cores.at(core).code.at(pc);
  op.tile = cs.tile;
  op.first_arg = static_cast<uint32_t>(ls->out->args.size());
  for (const auto& a : args) {
    TraceArg t;
    t.bytes = static_cast<int64_t>(a.size());
    if (!rec.resolve(*ls, a.data(), t.bytes, t.at)) return;
    ls->out->args.push_back(t);
  }
  if (ls->out->ops.size() >= kMaxOps) {
    rec.failed_ = true;
    return;
  }
  ls->out->ops.push_back(op);
}

void Recorder::scratch(size_t conn, int which, const std::byte* data, int64_t bytes) {
  ListState* ls = RecorderAccess::current();
  if (ls == nullptr) return;
  Recorder& rec = *ls->rec;
  const auto region = static_cast<uint32_t>(rec.scratch_base_ + conn * kScratchPerConn + static_cast<size_t>(which));
  std::lock_guard lock(rec.scratch_mu_);
  std::erase_if(rec.scratch_, [&](const Range& r) { return r.region == region; });
  rec.scratch_.push_back({data, data + bytes, region});
}

namespace {

// The L2 prefetch's lead in bytes rather than calls (the replay's notes
// below): three calls of a 2 x 576 GEMV block, the lead that
// measured best for them, is about 7 KB, and a K-split call of 1 KB or 768 B
// three calls ahead came too late. SmolLM2-135M decode GEMVs,
// bench/sim_decode_bench from DRAM, 3 rounds: six calls ahead instead of
// three took down from 139-150 to 109-121 us and k from 34-35 to 28-32,
// but q (2.3 KB calls) from 41-43 to 42-50; by bytes, down 117-130 ->
// 102-121, k 30-32 -> 26-28, q 37 -> 34-37. `tessera run -n 16 --profile`,
// 5 interleaved rounds: down 4.65 -> 4.10 host ms per token.
constexpr int64_t kFarBytes = 3 * 2304;
constexpr uint32_t kFarMin = 3, kFarMax = 12;

void plan_prefetch(OpList& l, const std::vector<Region>& regions) {
  const TraceOp* prev = nullptr;
  for (size_t i = 0; i < l.ops.size(); ++i) {
    const TraceOp& op = l.ops[i];
    if (op.call == nullptr) continue;
    l.calls.push_back(static_cast<uint32_t>(i));
    l.fetch_first.push_back(static_cast<uint32_t>(l.fetches.size()));
    for (size_t a = 0; a < op.call->args.size(); ++a) {
      const TraceArg& t = l.args[op.first_arg + a];
      if (regions[t.at.region].kind != Region::Kind::host) continue;
      if (prev != nullptr && a < prev->call->args.size()) {
        const Addr& u = l.args[prev->first_arg + a].at;
        if (u.region == t.at.region && u.offset == t.at.offset) continue;
      }
      l.fetches.push_back(t);
    }
    prev = &op;
  }
  l.fetch_first.push_back(static_cast<uint32_t>(l.fetches.size()));
  int64_t bytes = 0;
  for (const TraceArg& t : l.fetches) bytes += t.bytes;
  const int64_t per_call = l.calls.empty() ? 0 : bytes / static_cast<int64_t>(l.calls.size());
  const int64_t lead = per_call > 0 ? (kFarBytes + per_call - 1) / per_call : kFarMin;
  l.far_calls = static_cast<uint32_t>(std::clamp<int64_t>(lead, kFarMin, kFarMax));
}

}  // namespace

std::shared_ptr<const Trace> Recorder::finish(const LaunchStats& stats) {
  if (failed_) return nullptr;
  for (const auto& ls : lists_)
    for (size_t r = 0; r < trace_.regions.size(); ++r)
      trace_.regions[r].extent = std::max(trace_.regions[r].extent, ls->extent[r]);
  trace_.stats = stats;
  int64_t bytes = 0;
  auto count = [&](OpList& l) {
    plan_prefetch(l, trace_.regions);
    bytes += static_cast<int64_t>(l.ops.capacity() * sizeof(TraceOp) +
                                  (l.args.capacity() + l.fetches.capacity()) * sizeof(TraceArg) +
                                  (l.calls.capacity() + l.fetch_first.capacity()) * sizeof(uint32_t));
  };
  count(trace_.head);
  for (OpList& part : trace_.parts) count(part);
  count(trace_.tail);
  if (!trace_.budget.claim(bytes)) return nullptr;
  return std::make_shared<const Trace>(std::move(trace_));
}

// ------------------------------------------------------------------ replay

namespace {

// Host bytes a kernel reads in place (weights aliased by their L1 slots) are
// prefetched one call ahead: a steady lead instead of a burst of misses at
// each call (the interpreter prefetches at landing, a round of every core's
// objects at once). SmolLM2-135M decode, `tessera run -n 40`, 4 interleaved
// rounds on this 2-vCPU machine: 0.0457 s/token one call ahead, 0.0505 two
// calls ahead, 0.0537 without, 0.0617 interpreted. Into L1 (prefetcht0):
// the next call reads them within a few hundred nanoseconds.
// A kernel that prefetches as it reads (KernelDef::prefetches_ahead: the
// GEMVs) is handed that call's bytes instead, and spreads the prefetches over
// its own steps: before the call, a burst of its lines (468 for an LM-head
// call of 30 KB) stalled on the core's miss buffers while nothing computed.
// SmolLM2-135M decode, `tessera run -n 16 --profile`, 4 interleaved rounds:
// logits 3.84 -> 3.06 host ms per token, gate and up 3.6 -> 3.3, total 36.5
// -> 34.7; bench/sim_decode_bench from DRAM, 3 rounds: q 49-58 -> 37-47 us,
// up 104-114 -> 89-94, down 142-173 -> 125-157.
constexpr size_t kAhead = 1;

// And OpList::far_calls ahead into L2 (prefetcht1; at least 3, so that it
// holds about kFarBytes), beside the L1 prefetch: a call
// (a 2 x 576 GEMV block, 2.3 KB) takes about as long as one DRAM miss, so
// one call's lead hides little of it, and more calls ahead into L1 held the
// core's few L1 miss buffers (slower, above). L2 has more in flight. SmolLM2
// decode GEMV rows (q k v o gate up down logits), `tessera run -n 16
// --profile`, 5 interleaved rounds: 25.2 host ms per token without, 21.0
// three calls ahead, 21.6 four, 22.5 six; bench/sim_decode_bench from DRAM,
// 3 rounds: q 56-68 -> 41-51 us, up 124-148 -> 90-96, down 136-186 ->
// 135-151. A kernel that prefetches as it reads takes these too (into L2,
// beside its L1 lead): logits 2.96 -> 2.16 host ms per token, the other
// GEMV rows within noise (`run -n 16 --profile`, 4 interleaved rounds).

// GCC 12 at -O2 drops a loop of __builtin_prefetch here as free of side
// effects (-ffinite-loops): the asm keeps it.
template <int Level>
inline void prefetch_line(const std::byte* p) {
#if defined(__x86_64__)
  if constexpr (Level == 0) asm volatile("prefetcht0 %0" : : "m"(*p));
  else asm volatile("prefetcht1 %0" : : "m"(*p));
#else
  __builtin_prefetch(p, 0, Level == 0 ? 3 : 2);
#endif
}

// The bytes a replay prefetches before call c (OpList::fetches): its host
// args but those the call before it read at the same place, its x, already
// in cache. A down projection's calls read 1 KB of weights beside a resident
// x of 3 KB, so prefetching x again was three quarters of each call's
// prefetches: skipping it took the down rows from 5.30 / 5.21 to 4.56 /
// 4.89 host ms per SmolLM2 token (two sets of 5 interleaved rounds, `run -n
// 16 --profile`; totals 39.3 / 40.1 -> 35.9 / 38.4).
template <int Level>
void prefetch_call(const OpList& list, size_t c, const std::vector<std::byte*>& base) {
  for (uint32_t f = list.fetch_first[c]; f < list.fetch_first[c + 1]; ++f) {
    const TraceArg& t = list.fetches[f];
    const std::byte* p = base[t.at.region] + t.at.offset;
    for (int64_t off = 0; off < t.bytes; off += 64) prefetch_line<Level>(p + off);
  }
}

void run_list(const OpList& list, const std::vector<std::byte*>& base) {
  thread_local std::vector<std::span<std::byte>> spans;
  const std::vector<TraceOp>& ops = list.ops;
  const size_t calls = list.calls.size();
  size_t c = 0;  // the call op i is, once it is one
  for (size_t i = 0; i < ops.size(); ++i) {
    const TraceOp& op = ops[i];
    if (op.call == nullptr) {
      std::memcpy(base[op.dst.region] + op.dst.offset, base[op.src.region] + op.src.offset,
                  static_cast<size_t>(op.bytes));
      continue;
    }
    const Instr& in = *op.call;
    // A kernel that prefetches as it reads gets a later call's bytes when
    // they are one run (a weight block beside a shared x); else they are
    // prefetched here.
    auto hand = [&]<int Level>(size_t n, std::span<const std::byte>& to) {
      if (n >= calls) return;
      const uint32_t f = list.fetch_first[n];
      if (in.kernel->prefetches_ahead && list.fetch_first[n + 1] == f + 1) {
        const TraceArg& t = list.fetches[f];
        to = {base[t.at.region] + t.at.offset, static_cast<size_t>(t.bytes)};
      } else {
        prefetch_call<Level>(list, n, base);
      }
    };
    std::span<const std::byte> ahead, ahead_far;
    hand.template operator()<1>(c + list.far_calls, ahead_far);
    hand.template operator()<0>(c + kAhead, ahead);
    ++c;
    KernelInvocation inv{std::move(spans), in.params, in.bound.get()};
    inv.ahead = ahead;
    inv.ahead_far = ahead_far;
    inv.args.clear();
    for (size_t a = 0; a < in.args.size(); ++a) {
      const TraceArg& t = list.args[op.first_arg + a];
      inv.args.emplace_back(base[t.at.region] + t.at.offset, static_cast<size_t>(t.bytes));
    }
    try {
      if (in.kernel->replay != nullptr && inv.bound != nullptr) in.kernel->replay(inv);
      else in.kernel->run(inv);
    } catch (const DesignError& e) {
      spans = std::move(inv.args);
      throw_error<DesignError>("core {} call '{}': {}", to_string(op.tile), in.kernel->name, e.what());
    }
    spans = std::move(inv.args);
  }
}

}  // namespace

bool replay(const Trace& trace, std::map<TileCoord, std::vector<std::byte>>& mem, HostMemory& host,
            const HostViews* views) {
  thread_local std::vector<std::byte> scratch_arena;
  std::vector<std::byte*> base(trace.regions.size(), nullptr);
  int64_t scratch_bytes = 0;
  for (const Region& r : trace.regions)
    if (r.kind == Region::Kind::scratch) scratch_bytes += (r.extent + 63) / 64 * 64;
  std::vector<std::byte> arena;
  arena.swap(scratch_arena);  // a nested replay on this thread finds it empty
  struct GiveBack {
    std::vector<std::byte>& arena;
    ~GiveBack() { scratch_arena.swap(arena); }
  } give_back{arena};
  if (static_cast<int64_t>(arena.size()) < scratch_bytes) arena.resize(static_cast<size_t>(scratch_bytes));
  int64_t scratch_at = 0;
  for (size_t i = 0; i < trace.regions.size(); ++i) {
    const Region& r = trace.regions[i];
    if (r.extent == 0) continue;
    std::byte* p = nullptr;
    size_t size = 0;
    switch (r.kind) {
      case Region::Kind::tile: {
        auto it = mem.find(r.tile);
        if (it == mem.end()) return false;
        p = it->second.data();
        size = it->second.size();
        break;
      }
      case Region::Kind::host: {
        // A view is only read: the design writes no host buffer it views (check_view).
        auto v = views ? views->find(r.name) : HostViews::const_iterator{};
        if (views && v != views->end()) {
          p = const_cast<std::byte*>(v->second.data());
          size = v->second.size();
        } else {
          auto h = host.find(r.name);
          if (h == host.end()) return false;
          p = h->second.data();
          size = h->second.size();
        }
        break;
      }
      case Region::Kind::scratch:
        base[i] = arena.data() + scratch_at;
        scratch_at += (r.extent + 63) / 64 * 64;
        continue;
    }
    if (static_cast<int64_t>(size) < r.extent || align_of(p) != r.align) return false;
    base[i] = p;
  }
  run_list(trace.head, base);
  if (trace.parts.size() >= 2)
    parallel_for_each(trace.parts.size(), [&](size_t p) { run_list(trace.parts[p], base); });
  else
    for (const OpList& part : trace.parts) run_list(part, base);
  run_list(trace.tail, base);
  return true;
}

}  // namespace tessera::npu::sim
