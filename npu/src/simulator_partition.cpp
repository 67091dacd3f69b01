// Partitions of a launch: the cores and connections that may run side by
// side on host threads once the broadcasts from a shim have landed
// (simulator.cpp run_partitions), and the host bytes they share.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "simulator_state.h"
#include "tessera/core/error.h"
#include "validator_rules.h"

namespace tessera::npu::sim {
namespace {

// Host memory is shared by every partition. A GEMV whose last column block
// is shifted back to end at the last row rewrites rows of the block before
// it (the same values): two partitions writing the same host bytes side by
// side would race on them (ThreadSanitizer found it). Such tasks are held
// back and land after the partitions, in partition order, as the serial
// order lands them (Connection::defer_task); a partition reading host bytes
// another writes is joined with it.
void resolve_host_overlaps(LaunchState& st, std::vector<LaunchState::Part>& parts) {
  struct Touch {
    int64_t first, last;  // bytes [first, last)
    size_t part, conn, task;  // task: index in the connection's queue
    bool write;
  };
  std::map<std::string, std::vector<Touch>> by_buffer;
  for (size_t p = 0; p < parts.size(); ++p)
    for (size_t i : parts[p].conns) {
      const Connection& c = st.conns[i];
      auto add = [&](const ShimQueue& q, bool write) {
        for (size_t k = 0; k < q.tasks.size(); ++k) {
          const DmaTask* t = q.tasks[k];
          const auto hb = std::find_if(st.design->host_buffers.begin(), st.design->host_buffers.end(),
                                       [&](const HostBuffer& b) { return b.name == t->host_buffer; });
          if (hb == st.design->host_buffers.end())
            throw_error<InternalError>("host buffer '{}' vanished after validation", t->host_buffer);
          for (const auto& [a, b] : pattern_runs(t->pattern, hb->elem_bytes, hb->bytes))
            by_buffer[hb->name].push_back({a, b, p, i, k, write});
        }
      };
      if (c.shim_source) add(c.source_q, false);
      if (c.shim_sink) add(c.sink_q, true);
    }
  std::vector<size_t> parent(parts.size());
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = i;
  auto root = [&](size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  auto defer = [&](const Touch& t) {
    Connection& c = st.conns[t.conn];
    c.defer_task.resize(c.sink_q.tasks.size(), false);
    c.defer_task[t.task] = true;
  };
  bool joined = false;
  for (auto& [name, touches] : by_buffer) {
    std::sort(touches.begin(), touches.end(), [](const Touch& a, const Touch& b) { return a.first < b.first; });
    std::vector<const Touch*> open;  // touches that reach past the current start
    for (const Touch& t : touches) {
      std::erase_if(open, [&](const Touch* o) { return o->last <= t.first; });
      for (const Touch* o : open) {
        if (o->part == t.part || (!o->write && !t.write)) continue;
        if (o->write && t.write) {
          defer(*o);
          defer(t);
        } else if (root(o->part) != root(t.part)) {
          parent[root(o->part)] = root(t.part);
          joined = true;
        }
      }
      open.push_back(&t);
    }
  }
  for (Connection& c : st.conns) {
    c.held_at.assign(c.defer_task.size(), 0);
    for (size_t k = 0; k < c.defer_task.size(); ++k) {
      if (!c.defer_task[k]) continue;
      const DmaTask& t = *c.sink_q.tasks[k];
      const HostBuffer& h = *std::find_if(st.design->host_buffers.begin(), st.design->host_buffers.end(),
                                          [&](const HostBuffer& b) { return b.name == t.host_buffer; });
      c.held_at[k] = c.held_bytes;
      c.held_bytes += detail::stream_bytes(t.pattern, h.bytes, h.elem_bytes);
    }
  }
  if (!joined) return;
  std::map<size_t, LaunchState::Part> merged;  // by the root's first part, so part order holds
  std::map<size_t, size_t> first_of_root;
  for (size_t p = 0; p < parts.size(); ++p) first_of_root.emplace(root(p), p);
  for (size_t p = 0; p < parts.size(); ++p) {
    auto& m = merged[first_of_root.at(root(p))];
    m.cores.insert(m.cores.end(), parts[p].cores.begin(), parts[p].cores.end());
    m.conns.insert(m.conns.end(), parts[p].conns.begin(), parts[p].conns.end());
  }
  parts.clear();
  for (auto& [first, part] : merged) {
    std::sort(part.cores.begin(), part.cores.end());  // the serial order within a partition
    std::sort(part.conns.begin(), part.conns.end());
    parts.push_back(std::move(part));
  }
}

// Partitions of a launch (LaunchState::parts). Pools are joined through
// the cores that use them and the connections that move between them; a
// broadcast from a shim (x to every core of a GEMV) joins nothing: it runs in
// the serial prefix. One partition, or a broadcast from a tile: none.
}  // namespace

void partition(LaunchState& st) {
  std::vector<size_t> parent(st.pools.size());
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = i;
  auto root = [&](size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  auto join = [&](size_t a, size_t b) { parent[root(a)] = root(b); };
  for (const auto& core : st.cores)
    for (const auto& p : core.ports) join(static_cast<size_t>(p.pool), static_cast<size_t>(core.ports[0].pool));
  std::vector<int> conn_pool(st.conns.size(), -1);  // a pool of the connection's partition
  for (size_t i = 0; i < st.conns.size(); ++i) {
    const Connection& c = st.conns[i];
    std::vector<int> pools;
    if (!c.shim_source) pools.push_back(c.source.pool);
    for (const auto& e : c.sinks) pools.push_back(e.pool);
    if (c.shim_source && c.sinks.size() >= 2) {
      st.prefix.push_back(i);
      continue;
    }
    if (pools.empty()) return;  // shim to shim: nothing to place it with
    for (int p : pools) join(static_cast<size_t>(p), static_cast<size_t>(pools[0]));
    conn_pool[i] = pools[0];
  }
  std::map<size_t, LaunchState::Part> by_root;
  for (size_t i = 0; i < st.cores.size(); ++i)
    if (!st.cores[i].ports.empty()) by_root[root(static_cast<size_t>(st.cores[i].ports[0].pool))].cores.push_back(i);
  for (size_t i = 0; i < st.conns.size(); ++i)
    if (conn_pool[i] >= 0) by_root[root(static_cast<size_t>(conn_pool[i]))].conns.push_back(i);
  std::vector<LaunchState::Part> parts;
  for (auto& [r, part] : by_root) parts.push_back(std::move(part));
  resolve_host_overlaps(st, parts);
  size_t placed = 0;
  for (const auto& part : parts) placed += part.cores.size();
  if (parts.size() < 2 || placed != st.cores.size()) {
    st.prefix.clear();
    return;
  }
  st.parts = std::move(parts);
  st.gate_suffix_max.assign(st.wait_gate.size() + 1, 0);
  for (size_t i = st.wait_gate.size(); i-- > 0;)
    st.gate_suffix_max[i] = std::max(st.wait_gate[i], st.gate_suffix_max[i + 1]);
  for (const auto& t : st.launch->sequence)
    if (t.to_device)
      for (const auto& h : st.design->host_buffers)
        if (h.name == t.host_buffer) st.stream_bytes += detail::stream_bytes(t.pattern, h.bytes, h.elem_bytes);
}

}  // namespace tessera::npu::sim
