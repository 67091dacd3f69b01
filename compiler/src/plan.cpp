// Lowering a model graph to a Plan (plan.h): the per-step choice NPU / host,
// memoized design builds, the weight layout policy and the DDR buffers a plan
// touches. The text / JSON dumps live in plan_dump.cpp.
#include "tessera/compiler/plan.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/kernels/builders/linear.h"

namespace tessera::compiler {

PlanStyle parse_plan_style(std::string_view name) {
  if (name == "per-op") return PlanStyle::per_op;
  if (name == "default") return PlanStyle::standard;
  throw_error<UsageError>("unknown plan style '{}' (styles: per-op, default, iron, mlir-air)", name);
}

const char* plan_style_name(PlanStyle s) {
  return s == PlanStyle::per_op ? "per-op" : "default";
}

// ---------------------------------------------------------------- layout keys

namespace {

// FNV-1a, 64-bit, over 8-byte little-endian words (bytes one by one for a
// tail): the embedding-table probe is hundreds of MB, and a word per multiply
// keeps hashing it well under a second. Folded to 32 bits for the key.
class Fnv1a {
 public:
  void bytes(const std::byte* p, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      mix(w);
    }
    for (; i < n; ++i) mix(static_cast<uint64_t>(p[i]));
  }
  void text(std::string_view s) { bytes(reinterpret_cast<const std::byte*>(s.data()), s.size()); }
  void number(uint64_t v) { mix(v); }
  uint32_t digest() const { return static_cast<uint32_t>(h_ ^ (h_ >> 32)); }

 private:
  void mix(uint64_t w) {
    h_ ^= w;
    h_ *= 0x100000001b3ull;
  }
  uint64_t h_ = 0xcbf29ce484222325ull;
};

using Probe = DesignCache::Entry::Probe;

// Packs the probe tensor into an empty HostMemory: only the buffers pack()
// writes for this input exist afterwards, so they are exactly the weight's.
Probe probe_weight(const kernels::BuiltOp& op, size_t input) {
  TESSERA_CHECK(input < op.inputs.size(), "{}: input {} of {}", op.shape.key(), input,
                op.inputs.size());
  const int64_t n = shape_numel(op.inputs[input].shape);
  // bf16-exact ramp (|v| <= 125/64 needs 7 significand bits): packing cannot
  // round two layouts differently, and distinct positions mostly differ.
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>((i % 251) - 125) / 64.f;
  npu::HostMemory host;
  op.pack(input, values, host);
  values = {};
  Fnv1a h;
  Probe p;
  for (const auto& [name, buf] : host) {  // std::map: name order, stable
    h.text(name);
    h.number(buf.size());
    h.bytes(buf.data(), buf.size());
    p.bytes += static_cast<int64_t>(buf.size());
  }
  p.hash = h.digest();
  return p;
}

std::string key_of(const ValueRef& weight, uint32_t hash) {
  return fmt::format("{}@{:08x}", weight.str(), hash);
}

std::string cache_key(const kernels::OpShape& shape, const kernels::TileOptions& tiles) {
  std::string k = shape_text(shape);
  for (const auto& [name, v] : tiles) k += fmt::format(" t.{}={}", name, v);
  return k;
}

}  // namespace

std::string weight_layout_key(const ValueRef& weight, const kernels::BuiltOp& op, size_t input) {
  return key_of(weight, probe_weight(op, input).hash);
}

// ---------------------------------------------------------------- DesignCache

DesignCache::DesignCache(npu::DeviceSpec spec) : spec_(std::move(spec)) {}

const DesignCache::Entry& DesignCache::get(const kernels::OpShape& shape,
                                           const kernels::TileOptions& tiles) {
  const std::string key = cache_key(shape, tiles);
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) return *it->second;
  }
  // Built outside the lock so that independent shapes build in parallel; a
  // racing duplicate build is identical and simply dropped.
  auto e = std::make_unique<Entry>();
  e->op = std::make_shared<const kernels::BuiltOp>(
      kernels::op_builder(shape.op).build(shape, spec_, tiles));
  kernels::ensure_tile_kernels_registered();
  e->timing = npu::estimate_time(e->op->design, spec_);
  std::lock_guard lock(mu_);
  auto [it, fresh] = entries_.emplace(key, std::move(e));
  return *it->second;
}

size_t DesignCache::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

DesignCache::Layout DesignCache::layout(const ValueRef& weight, const Entry& entry,
                                        size_t input) const {
  {
    std::lock_guard lock(entry.probe_mu);
    auto it = entry.probes.find(input);
    if (it != entry.probes.end()) return {key_of(weight, it->second.hash), it->second.bytes};
  }
  const Probe p = probe_weight(*entry.op, input);
  std::lock_guard lock(entry.probe_mu);
  entry.probes[input] = p;
  return {key_of(weight, p.hash), p.bytes};
}

// ---------------------------------------------------------------- layout policy

kernels::TileOptions layout_tiles(const kernels::OpShape& shape, const npu::DeviceSpec& spec) {
  if (shape.op != "linear" || shape.dim("M") <= 1) return {};
  // The largest prefill bucket's GEMM blocking. n depends only on N and the
  // array; k is the largest K block that fits L1 next to a 64-row x block, so
  // it also fits every smaller M block: one W layout serves every prefill M.
  const int64_t kLayoutM = 2048;
  const kernels::LinearPlan p = kernels::plan_linear(kLayoutM, shape.dim("K"), shape.dim("N"),
                                                     spec, {{"gemm", 1}});
  return {{"gemm", 1}, {"k", p.k}, {"n", p.n}};
}

// ---------------------------------------------------------------- steps, plans

double Step::seconds() const {
  return kind == StepKind::npu ? timing.total_seconds + relayout_seconds : host_seconds;
}

std::string Step::bound() const { return kind == StepKind::npu ? timing.bound : "host"; }

double Plan::predicted_seconds() const {
  double s = 0;
  for (const Step& st : steps) s += st.seconds();
  return s;
}

int64_t Plan::dispatches() const {
  return std::count_if(steps.begin(), steps.end(),
                       [](const Step& s) { return s.kind == StepKind::npu; });
}

int64_t Plan::dispatches_per_layer() const {
  int64_t n = 0;
  for (const Step& s : steps) n += s.kind == StepKind::npu && graph.nodes[s.node].layer == 0;
  return n;
}

namespace {

// Pure data movement: cheaper on the host than a dispatch (plan.h, "default").
bool host_op(const std::string& op) {
  return op == "embedding" || op == "kv_append" || op == "argmax";
}

// Bytes a host step reads and writes: embedding gathers M rows of the table
// (plus the ids), kv_append copies the M new rows into the cache in place,
// argmax reads the bf16 logits and writes an id.
int64_t host_step_bytes(const kernels::OpShape& s) {
  const int64_t M = s.dim("M");
  if (s.op == "embedding") return M * 4 + 2 * M * s.dim("H") * 2;
  if (s.op == "kv_append") return 2 * M * s.dim("kv_dim") * 2;
  if (s.op == "argmax") return M * s.dim("V") * 2 + M * 4;
  throw_error<InternalError>("plan: op '{}' has no host implementation", s.op);
}

int64_t bf16_bytes(const Shape& s) { return shape_numel(s) * 2; }

// Host pack of the activation (and host) inputs, unpack of the outputs.
double relayout_seconds(const Node& node, const kernels::BuiltOp& op, const HostModel& host) {
  int64_t bytes = 0;
  for (size_t i = 0; i < node.inputs.size() && i < op.inputs.size(); ++i)
    if (node.inputs[i].kind != ValueKind::weight) bytes += bf16_bytes(op.inputs[i].shape);
  for (const auto& o : op.outputs) bytes += bf16_bytes(o.shape);
  return static_cast<double>(bytes) / host.bytes_per_second;
}

// Logical bytes of a node's output (bf16; the token id is an int32).
int64_t output_bytes(const Node& n) {
  const auto& s = n.shape;
  if (s.op == "argmax") return s.dim("M") * 4;
  if (s.op == "embedding") return s.dim("M") * s.dim("H") * 2;
  return -1;  // npu steps: from the built op
}

Step lower_host(const Node& node, size_t index, const HostModel& host) {
  Step s;
  s.kind = StepKind::host;
  s.node = index;
  s.name = node.output.str();
  s.shape = node.shape;
  s.host_seconds =
      static_cast<double>(host_step_bytes(node.shape)) / host.bytes_per_second +
      host.step_overhead_seconds;
  // The host reads a weight as the plain row-major bf16 table.
  for (const ValueRef& in : node.inputs)
    s.weight_layouts.push_back(in.kind == ValueKind::weight ? in.str() + "@table" : "");
  return s;
}

class BufferList {
 public:
  void add(const std::string& name, BufferKind kind, int64_t bytes) {
    if (!seen_.insert(name).second) return;
    out_.push_back({name, kind, bytes});
  }
  std::vector<BufferDecl> take() { return std::move(out_); }

 private:
  std::set<std::string> seen_;
  std::vector<BufferDecl> out_;
};

}  // namespace

Plan lower(const model::ModelConfig& config, int64_t seq, int64_t past, DesignCache& cache,
           const PlanOptions& opts) {
  Plan p;
  p.model = config.name;
  p.spec = cache.spec().name;
  p.style = opts.style;
  p.seq = seq;
  p.past = past;
  p.context = opts.context > 0 ? opts.context : config.default_context();
  config.check_context(p.context);
  if (seq + past > p.context)
    throw_error<UsageError>("{}: S={} + P={} positions exceed the plan context {} (the KV cache "
                            "capacity)", config.name, seq, past, p.context);
  p.graph = build_graph(config, seq, past);
  BufferList weights, others;
  for (size_t i = 0; i < p.graph.nodes.size(); ++i) {
    const Node& node = p.graph.nodes[i];
    if (opts.style == PlanStyle::standard && host_op(node.shape.op)) {
      Step s = lower_host(node, i, opts.host);
      for (size_t k = 0; k < node.inputs.size(); ++k)
        if (!s.weight_layouts[k].empty())
          weights.add(s.weight_layouts[k], BufferKind::weight,
                      node.shape.dim("V") * node.shape.dim("H") * 2);
      p.steps.push_back(std::move(s));
      continue;
    }
    Step s;
    s.node = i;
    s.name = node.output.str();
    s.shape = node.shape;
    s.tiles = layout_tiles(node.shape, cache.spec());
    const DesignCache::Entry& e = cache.get(node.shape, s.tiles);
    s.op = e.op;
    s.timing = e.timing;
    s.relayout_seconds = relayout_seconds(node, *e.op, opts.host);
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      if (node.inputs[k].kind != ValueKind::weight) {
        s.weight_layouts.emplace_back();
        continue;
      }
      const DesignCache::Layout l = cache.layout(node.inputs[k], e, k);
      weights.add(l.key, BufferKind::weight, l.bytes);
      s.weight_layouts.push_back(l.key);
    }
    p.steps.push_back(std::move(s));
  }
  // Activations: one per node output; the KV caches live in their own
  // buffers (kv_cache below) and the logits leave to the host (io).
  for (const Step& s : p.steps) {
    const Node& n = p.graph.nodes[s.node];
    if (n.name == "k_cache" || n.name == "v_cache" || n.name == "logits") continue;
    const int64_t b = s.op ? bf16_bytes(s.op->outputs.at(0).shape) : output_bytes(n);
    others.add(s.name, BufferKind::activation, b);
  }
  for (int l = 0; l < static_cast<int>(config.num_layers); ++l)
    for (const char* kv : {"k_cache", "v_cache"})
      others.add(fmt::format("L{}.{}", l, kv), BufferKind::kv_cache,
                 p.context * config.kv_dim() * 2);
  others.add("host:token_ids", BufferKind::io, seq * 4);
  // RoPE rows for the S new positions, half a head wide (oracle::rope_table).
  others.add("host:rope_cos", BufferKind::io, seq * config.head_dim / 2 * 2);
  others.add("host:rope_sin", BufferKind::io, seq * config.head_dim / 2 * 2);
  others.add("logits", BufferKind::io, config.vocab_size * 2);
  p.buffers = weights.take();
  for (auto& b : others.take()) p.buffers.push_back(std::move(b));
  return p;
}

}  // namespace tessera::compiler
