// Static timing model; see timing.h for the formula and DESIGN.md for its place.
#include "tessera/npu/timing.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>

#include "tessera/npu/allocator.h"
#include "tessera/npu/errors.h"

namespace tessera::npu {
namespace {

constexpr int64_t kWordBytes = 4;  // tile DMAs move 32-bit words

int64_t round_up(int64_t v, int64_t unit) { return unit <= 1 ? v : (v + unit - 1) / unit * unit; }

// Length in elements of the contiguous runs a pattern issues (0 = whole transfer).
int64_t run_elems(const AccessPattern& p) {
  if (p.dims.empty()) return 0;
  if (p.dims.back().stride != 1) return 1;
  int64_t run = p.dims.back().size;
  for (size_t i = p.dims.size() - 1; i-- > 0;) {
    if (p.dims[i].stride != run) break;
    run *= p.dims[i].size;
  }
  return run;
}

// Bytes a DMA pays for `bytes` of payload issued as runs of `run_bytes` (0 =
// one run), each rounded up to `unit`.
int64_t dma_cost(int64_t bytes, int64_t run_bytes, int64_t unit) {
  if (run_bytes <= 0 || run_bytes >= bytes) return round_up(bytes, unit);
  return (bytes / run_bytes) * round_up(run_bytes, unit) + round_up(bytes % run_bytes, unit);
}

class LaunchModel {
 public:
  LaunchModel(const Design& d, const Launch& l, const DeviceSpec& s, const KernelRegistry& r)
      : design_(d), launch_(l), spec_(s), reg_(r) {
    for (const auto& f : l.fifos) fifos_[f.name] = &f;
    for (size_t i = 0; i < l.links.size(); ++i) {
      for (const auto& o : l.links[i].outputs) link_of_output_[o] = i;
    }
    rate_ = spec_.stream_bytes_per_cycle * spec_.clock_hz;
  }

  LaunchTiming run() {
    LaunchTiming t;
    t.name = launch_.name;
    cost_compute(t);
    cost_channels(t);
    t.ddr_seconds = static_cast<double>(t.ddr_burst_bytes) / spec_.ddr_bytes_per_second;
    // Each wait (DmaTask::after_wait) empties the streams and refills them.
    const auto waits = std::count_if(launch_.sequence.begin(), launch_.sequence.end(),
                                     [](const DmaTask& d) { return d.after_wait; });
    t.fill_drain_seconds = fill_drain() * static_cast<double>(1 + waits);
    std::pair<double, const char*> terms[] = {{t.compute_seconds, compute_kind_},
                                              {t.stream_seconds, "stream"},
                                              {t.dma_seconds, "dma"},
                                              {t.ddr_seconds, "ddr"}};
    auto best = terms[0];
    for (auto& term : terms)
      if (term.first > best.first) best = term;
    t.bound = best.second;
    t.total_seconds = best.first + t.fill_drain_seconds;
    return t;
  }

 private:
  const Fifo& fifo(const std::string& name) const {
    auto it = fifos_.find(name);
    if (it == fifos_.end())
      throw_error<DesignError>("launch '{}': FIFO '{}' is not declared", launch_.name, name);
    return *it->second;
  }
  TileKind kind(TileCoord t) const { return spec_.kind_of_row(t.row); }
  const HostBuffer& host(const std::string& name) const {
    for (const auto& h : design_.host_buffers)
      if (h.name == name) return h;
    throw_error<DesignError>("launch '{}': host buffer '{}' is not declared", launch_.name, name);
  }
  int64_t task_bytes(const DmaTask& task) const {
    const HostBuffer& h = host(task.host_buffer);
    int64_t elems = task.pattern.contiguous() ? h.bytes / h.elem_bytes - task.pattern.offset
                                              : task.pattern.elements_per_repeat();
    return elems * task.pattern.repeat * h.elem_bytes;
  }

  // Objects that pass through `name` in this launch, derived from whatever feeds it.
  int64_t objects(const std::string& name) {
    if (auto it = objects_.find(name); it != objects_.end()) return it->second;
    if (!visiting_.insert(name).second)
      throw_error<DesignError>("launch '{}': FIFO '{}' is fed by a cycle of links", launch_.name,
                               name);
    const Fifo& f = fifo(name);
    int64_t n = 0;
    TileKind k = kind(f.producer);
    if (k == TileKind::shim) {
      int64_t bytes = 0;
      for (const auto& task : launch_.sequence)
        if (task.fifo == name && task.to_device) bytes += task_bytes(task);
      n = f.object_bytes > 0 ? bytes / f.object_bytes : 0;
    } else if (k == TileKind::compute) {
      n = produced_by_core(f);
    } else {
      n = objects_from_link(f);
      // An L2 re-send streams every repeat: per cycle of group + repeat *
      // tail objects in, repeat * (group + tail) out.
      const int64_t in_cycle = f.repeat_group + int64_t{f.repeat} * f.repeat_tail;
      n = f.repeat_tail > 0 ? n / in_cycle * f.repeat * (f.repeat_group + f.repeat_tail) : n * f.repeat;
    }
    visiting_.erase(name);
    return objects_[name] = n;
  }

  int64_t produced_by_core(const Fifo& f) const {
    std::function<int64_t(const std::vector<CoreOp>&)> walk = [&](const std::vector<CoreOp>& ops) {
      int64_t n = 0;
      for (const auto& op : ops) {
        if (op.kind == CoreOp::Kind::loop) n += op.count * walk(op.body);
        if (op.kind == CoreOp::Kind::release && op.port == CoreOp::Port::produce &&
            op.fifo == f.name)
          n += op.count;
      }
      return n;
    };
    for (const auto& c : launch_.cores)
      if (c.tile == f.producer) return walk(c.program);
    return 0;
  }

  int64_t objects_from_link(const Fifo& f) {
    auto it = link_of_output_.find(f.name);
    if (it == link_of_output_.end())
      throw_error<DesignError>("launch '{}': FIFO '{}' leaves mem tile {} but no link feeds it",
                               launch_.name, f.name, to_string(f.producer));
    const Link& link = launch_.links[it->second];
    if (link.inputs.size() == 1 && link.outputs.size() == 1) {  // forward may re-chunk
      const Fifo& in = fifo(link.inputs[0]);
      return f.object_bytes > 0 ? objects(in.name) * in.object_bytes / f.object_bytes : 0;
    }
    int64_t n = -1;  // split: one per input object; join: one per full set of inputs
    for (const auto& in : link.inputs) n = n < 0 ? objects(in) : std::min(n, objects(in));
    return std::max<int64_t>(n, 0);
  }

  void cost_compute(LaunchTiming& t) {
    for (const auto& core : launch_.cores) {
      TileTiming tt;
      tt.tile = core.tile;
      walk_program(core.program, 1, tt);
      const double stall = single_buffer_stall(core);
      tt.seconds = tt.effective_cycles / spec_.clock_hz + stall;
      t.macs += tt.macs;
      if (t.busiest_tile.empty() || tt.seconds > t.compute_seconds) {
        t.compute_seconds = tt.seconds;
        t.busiest_tile = to_string(core.tile);
        const KernelCost& c = tt.cost;
        compute_kind_ = stall > tt.seconds - stall                   ? "stream"
                        : c.vector > c.mac && c.vector >= c.overhead ? "vector"
                        : c.overhead > c.mac                         ? "overhead"
                                                                     : "compute";
      }
      t.tiles.push_back(tt);
    }
  }

  // One call's cost at the kernel's efficiency, and its raw cycles.
  KernelCost call_cost(const CoreOp& op, int64_t* raw = nullptr) const {
    const KernelDef& k = reg_.get(op.kernel);
    const int64_t cyc = k.cycles ? k.cycles(op.params, spec_) : 0;
    if (raw) *raw = cyc;
    const KernelCost cost = k.cost ? k.cost(op.params, spec_) : KernelCost{static_cast<double>(cyc), 0, 0};
    return 1.0 / spec_.efficiency(op.kernel) * cost;
  }

  void walk_program(const std::vector<CoreOp>& ops, int64_t times, TileTiming& tt) const {
    for (const auto& op : ops) {
      if (op.kind == CoreOp::Kind::loop) walk_program(op.body, times * op.count, tt);
      if (op.kind != CoreOp::Kind::call) continue;
      int64_t cyc = 0;
      const KernelCost cost = static_cast<double>(times) * call_cost(op, &cyc);
      const KernelDef& k = reg_.get(op.kernel);
      tt.calls += times;
      tt.cycles += times * cyc;
      tt.effective_cycles += cost.total();
      tt.cost += cost;
      tt.macs += times * (k.macs ? k.macs(op.params) : 0);
    }
  }

  // Seconds a core waits on single-buffered FIFOs: ones with no buffer beyond
  // the objects it holds at once (aircc's omit_pingpong builds these). After
  // the core releases k objects the DMA needs k hops to refill (or drain)
  // them, and the next acquire waits for whatever of that the core's compute
  // since the release did not cover. The first acquire is the fill term's.
  class StallWalk {
   public:
    StallWalk(const LaunchModel& m, std::map<std::string, double> hop) : m_(m), hop_(std::move(hop)) {}
    double run(const std::vector<CoreOp>& ops) {
      walk(ops);
      return stall_;
    }

   private:
    void walk(const std::vector<CoreOp>& ops) {
      for (const auto& op : ops) {
        if (op.kind == CoreOp::Kind::loop && op.count > 0) {
          walk(op.body);  // the first trip, then one steady trip for the rest
          if (op.count == 1) continue;
          const double before = stall_;
          walk(op.body);
          stall_ += (stall_ - before) * static_cast<double>(op.count - 2);
        } else if (op.kind == CoreOp::Kind::call) {
          const double secs = m_.call_cost(op).total() / m_.spec_.clock_hz;
          for (auto& [fifo, since] : since_) since += secs;
        } else if (auto h = hop_.find(op.fifo); h != hop_.end()) {
          auto it = since_.find(op.fifo);
          if (op.kind == CoreOp::Kind::release) {
            since_[op.fifo] = 0;
            pending_[op.fifo] = static_cast<double>(op.count) * h->second;
          } else if (it != since_.end()) {
            // Time passes for the other refills too: they run side by side.
            const double wait = std::max(0.0, pending_[op.fifo] - it->second);
            stall_ += wait;
            since_.erase(it);
            for (auto& [fifo, since] : since_) since += wait;
          }
        }
      }
    }
    const LaunchModel& m_;
    std::map<std::string, double> hop_, since_, pending_;
    double stall_ = 0;
  };

  double single_buffer_stall(const Core& core) const {
    std::map<std::string, int64_t> held;  // most objects of a FIFO held at once
    std::function<void(const std::vector<CoreOp>&)> scan = [&](const std::vector<CoreOp>& ops) {
      for (const auto& op : ops) {
        if (op.kind == CoreOp::Kind::acquire) held[op.fifo] = std::max(held[op.fifo], op.count);
        scan(op.body);
      }
    };
    scan(core.program);
    std::map<std::string, double> hop;
    for (const auto& [name, n] : held) {
      const Fifo& f = fifo(name);
      if (f.depth <= n && !shares_memory(f, spec_))
        hop[name] = static_cast<double>(f.object_bytes) / rate_;
    }
    return hop.empty() ? 0.0 : StallWalk(*this, std::move(hop)).run(core.program);
  }

  void cost_channels(LaunchTiming& t) {
    for (const auto& f : launch_.fifos) {
      if (shares_memory(f, spec_)) continue;
      int64_t bytes = objects(f.name) * f.object_bytes;
      add_channel(t, f, f.producer, false, bytes, f.producer_pattern);
      for (size_t i = 0; i < f.consumers.size(); ++i) {
        AccessPattern none;
        const AccessPattern& p = i < f.consumer_patterns.size() ? f.consumer_patterns[i] : none;
        add_channel(t, f, f.consumers[i], true, bytes, p);
      }
    }
  }

  void add_channel(LaunchTiming& t, const Fifo& f, TileCoord tile, bool s2mm, int64_t bytes,
                   const AccessPattern& pattern) {
    ChannelTiming c;
    c.tile = tile;
    c.kind = kind(tile);
    c.s2mm = s2mm;
    c.fifo = f.name;
    c.bytes = bytes;
    if (c.kind == TileKind::shim) {
      for (const auto& task : launch_.sequence) {
        if (task.fifo != f.name || task.to_device == s2mm) continue;
        int elem = host(task.host_buffer).elem_bytes;
        c.dma_bytes += dma_cost(task_bytes(task), run_elems(task.pattern) * elem,
                                spec_.shim_burst_bytes);
      }
      t.ddr_bytes += bytes;
      t.ddr_burst_bytes += c.dma_bytes;
    } else {
      int64_t run = run_elems(pattern) * f.elem_bytes;
      c.dma_bytes = objects(f.name) * dma_cost(f.object_bytes, run, kWordBytes);
      (c.kind == TileKind::mem ? t.l2_bytes : t.l1_bytes) += bytes;
    }
    c.stream_seconds = static_cast<double>(c.bytes) / rate_;
    c.dma_seconds = static_cast<double>(c.dma_bytes) / rate_ +
                    static_cast<double>(objects(f.name)) * spec_.dma_object_overhead_cycles /
                        spec_.clock_hz;
    std::string label = fmt::format("{} {} {}", f.name, to_string(tile), s2mm ? "in" : "out");
    if (t.busiest_port.empty() || c.stream_seconds > t.stream_seconds) {
      t.stream_seconds = c.stream_seconds;
      t.busiest_port = label;
    }
    if (t.busiest_channel.empty() || c.dma_seconds > t.dma_seconds) {
      t.dma_seconds = c.dma_seconds;
      t.busiest_channel = label;
    }
    t.channels.push_back(c);
  }

  // One object's hop time through `f`, plus the chain feeding it through mem-tile
  // links back to a shim (or a compute tile when `stop_at_compute`).
  double chain(const Fifo& f, bool stop_at_compute, int depth = 0) const {
    double hop = shares_memory(f, spec_) ? 0.0 : static_cast<double>(f.object_bytes) / rate_;
    if (depth > 16 || kind(f.producer) != TileKind::mem) return hop;
    auto it = link_of_output_.find(f.name);
    if (it == link_of_output_.end()) return hop;
    double feed = 0;
    for (const auto& in : launch_.links[it->second].inputs) {
      const Fifo& src = fifo(in);
      if (stop_at_compute && kind(src.producer) == TileKind::compute) {
        feed = std::max(feed, static_cast<double>(src.object_bytes) / rate_);
        continue;
      }
      feed = std::max(feed, chain(src, stop_at_compute, depth + 1));
    }
    return hop + feed;
  }

  double fill_drain() const {
    double fill = 0, drain = 0;
    bool any_compute = !launch_.cores.empty();
    for (const auto& f : launch_.fifos) {
      bool to_compute = false, to_shim = false;
      for (auto c : f.consumers) {
        to_compute |= kind(c) == TileKind::compute;
        to_shim |= kind(c) == TileKind::shim;
      }
      if (to_compute && kind(f.producer) != TileKind::compute) fill = std::max(fill, chain(f, true));
      if (to_shim) drain = std::max(drain, chain(f, any_compute));
    }
    return fill + drain;
  }

  const Design& design_;
  const Launch& launch_;
  const DeviceSpec& spec_;
  const KernelRegistry& reg_;
  double rate_ = 1;
  const char* compute_kind_ = "compute";
  std::map<std::string, const Fifo*> fifos_;
  std::map<std::string, size_t> link_of_output_;
  std::map<std::string, int64_t> objects_;
  std::set<std::string> visiting_;
};

}  // namespace

std::vector<std::string> called_kernels(const Design& design) {
  std::set<std::string> names;
  std::function<void(const std::vector<CoreOp>&)> walk = [&](const std::vector<CoreOp>& ops) {
    for (const auto& op : ops) {
      if (op.kind == CoreOp::Kind::call) names.insert(op.kernel);
      walk(op.body);
    }
  };
  for (const auto& l : design.launches)
    for (const auto& c : l.cores) walk(c.program);
  return {names.begin(), names.end()};
}

DispatchTiming estimate_time(const Design& design, const DeviceSpec& spec,
                             const KernelRegistry& registry) {
  DispatchTiming d;
  d.design = design.name;
  d.overhead_seconds = spec.dispatch_overhead_seconds;
  d.peak_macs_per_second = spec.macs_per_cycle_bf16 * spec.compute_tiles() * spec.clock_hz;
  std::map<std::string, double> contribution = {{"overhead", d.overhead_seconds}};
  d.total_seconds = d.overhead_seconds;
  for (size_t i = 0; i < design.launches.size(); ++i) {
    LaunchTiming t = LaunchModel(design, design.launches[i], spec, registry).run();
    if (i > 0) {
      t.reconfigure_seconds = spec.reconfigure_seconds;
      t.total_seconds += t.reconfigure_seconds;
      contribution["overhead"] += t.reconfigure_seconds;
    }
    contribution[t.bound] += t.total_seconds - t.reconfigure_seconds - t.fill_drain_seconds;
    contribution["fill_drain"] += t.fill_drain_seconds;
    t.utilization = t.total_seconds > 0 ? static_cast<double>(t.macs) /
                                              (d.peak_macs_per_second * t.total_seconds)
                                        : 0;
    d.total_seconds += t.total_seconds;
    d.ddr_bytes += t.ddr_bytes;
    d.l2_bytes += t.l2_bytes;
    d.l1_bytes += t.l1_bytes;
    d.macs += t.macs;
    d.launches.push_back(std::move(t));
  }
  d.bound = "overhead";
  for (const auto& [name, secs] : contribution)
    if (secs > contribution[d.bound]) d.bound = name;
  d.utilization = static_cast<double>(d.macs) / (d.peak_macs_per_second * d.total_seconds);
  return d;
}

}  // namespace tessera::npu
