// The buffers pass (DDR buffers with lifetimes, one arena slot per
// activation) and reuse-buffers (first-fit arena offsets by liveness).
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "tessera/compiler/passes.h"
#include "tessera/core/error.h"

namespace tessera::compiler {

namespace {

class BufferList {
 public:
  BufferDecl& add(const std::string& name, BufferKind kind, int64_t bytes) {
    auto it = index_.find(name);
    if (it != index_.end()) return out_[it->second];
    index_[name] = out_.size();
    out_.push_back({name, kind, bytes, -1, -1, -1});
    return out_.back();
  }
  BufferDecl* find(const std::string& name) {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &out_[it->second];
  }
  std::vector<BufferDecl> take() { return std::move(out_); }

 private:
  std::map<std::string, size_t> index_;
  std::vector<BufferDecl> out_;
};

bool leaves_arena(const Node& n) {
  return n.name == "k_cache" || n.name == "v_cache" || n.name == "logits";
}

// Host-supplied inputs and the logits that leave to the host.
void add_io(const Plan& p, BufferList& list) {
  for (const Node& n : p.graph.nodes) {
    for (const ValueRef& r : n.inputs) {
      if (r.kind != ValueKind::host) continue;
      if (r.name == "token_ids") list.add(r.str(), BufferKind::io, p.seq * 4);
      // RoPE rows for the S new positions, half a head wide (oracle::rope_table).
      if (r.name == "rope_cos" || r.name == "rope_sin")
        list.add(r.str(), BufferKind::io, p.seq * n.shape.dim("head_dim") / 2 * 2);
    }
    if (n.name == "logits" && n.layer < 0) list.add("logits", BufferKind::io, n.shape.dim("N") * 2);
  }
}

// Weights by layout key (packed bytes from the build pass's memoized probes).
void add_weights(const Plan& p, DesignCache& cache, BufferList& list) {
  for (const Step& s : p.steps)
    for (const Launch& l : s.launches) {
      const Node& n = p.graph.nodes.at(l.node);
      for (size_t k = 0; k < l.weight_layouts.size(); ++k) {
        if (l.weight_layouts[k].empty() || list.find(l.weight_layouts[k])) continue;
        // The host's plain table (embedding on the host): V x H bf16.
        const int64_t bytes =
            l.op ? cache.layout(n.inputs.at(k), cache.get(l.shape, l.tiles), k).bytes
                 : n.shape.dim("V") * n.shape.dim("H") * 2;
        list.add(l.weight_layouts[k], BufferKind::weight, bytes);
      }
    }
}

}  // namespace

std::string pass_buffers(Plan& p, DesignCache& cache, bool bug) {
  BufferList list;
  add_weights(p, cache, list);
  for (size_t i = 0; i < p.steps.size(); ++i)
    for (const Launch& l : p.steps[i].launches) {
      if (leaves_arena(p.graph.nodes.at(l.node))) continue;
      BufferDecl& b = list.add(l.name, BufferKind::activation, l.out_bytes);
      b.first = b.last = static_cast<int64_t>(i);
    }
  for (size_t i = 0; i < p.steps.size(); ++i)
    for (const Launch& l : p.steps[i].launches)
      for (const ValueRef& r : p.graph.nodes.at(l.node).inputs) {
        if (r.kind != ValueKind::activation) continue;
        ValueRef whole = r;
        whole.last_row = false;
        BufferDecl* b = list.find(whole.str());
        // Planted: lifetimes end where the value is made.
        if (b && b->kind == BufferKind::activation && !bug) b->last = static_cast<int64_t>(i);
      }
  for (const Node& n : p.graph.nodes)
    if (n.shape.op == "kv_append")
      list.add(n.output.str(), BufferKind::kv_cache, p.context * n.shape.dim("kv_dim") * 2);
  add_io(p, list);
  p.buffers = list.take();
  int64_t offset = 0, n = 0;
  for (BufferDecl& b : p.buffers) {
    if (b.kind != BufferKind::activation) continue;
    b.offset = offset;
    offset += b.bytes;
    ++n;
  }
  return fmt::format("{} buffers, {} activations in a {} byte arena (one slot each)", p.buffers.size(),
                     n, offset);
}

// First fit by liveness: activations in order of first use (then larger
// first) take the lowest offset that overlaps no live buffer's bytes.
std::string pass_reuse_buffers(Plan& p, DesignCache&, bool bug) {
  const int64_t before = p.arena_bytes();
  std::vector<BufferDecl*> acts;
  for (BufferDecl& b : p.buffers)
    if (b.kind == BufferKind::activation) acts.push_back(&b);
  std::stable_sort(acts.begin(), acts.end(), [](const BufferDecl* a, const BufferDecl* b) {
    return a->first != b->first ? a->first < b->first : a->bytes > b->bytes;
  });
  std::vector<const BufferDecl*> placed;
  for (BufferDecl* b : acts) {
    // Candidate offsets: 0 and the end of every placed buffer that overlaps in time.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const BufferDecl* q : placed)
      if (q->first <= b->last && b->first <= q->last) busy.emplace_back(q->offset, q->offset + q->bytes);
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (const auto& [lo, hi] : busy) {
      if (at + b->bytes <= lo) break;
      at = std::max(at, hi);
    }
    b->offset = bug ? 0 : at;  // planted: liveness ignored
    placed.push_back(b);
  }
  return fmt::format("activation arena {} -> {} bytes (peak live activation DDR)", before,
                     p.arena_bytes());
}

}  // namespace tessera::compiler
