// Lowering a model graph to a Plan (plan.h): the per-step choice NPU / host,
// memoized design builds, the weight layout policy and the DDR buffers a plan
// touches. The text / JSON dumps live in plan_dump.cpp.
#include "tessera/compiler/plan.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "tessera/compiler/tile_choices.h"
#include "tessera/core/error.h"
#include "tessera/core/mutants.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/kernels/builders/linear.h"
#include "layout_probe.h"

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

using Probe = DesignCache::Entry::Probe;

Probe weight_probe(const kernels::BuiltOp& op, size_t input) {
  const detail::ProbeResult r = detail::probe_weight(op, input);
  return {r.hash, r.bytes};
}

std::string key_of(const ValueRef& weight, uint32_t hash) {
  return fmt::format("{}@{:08x}", weight.str(), hash);
}


// Weight probes outlive one DesignCache: every session, evaluator check and
// tile search lowers through a cache of its own, and each probe of an
// embedding table or LM head packs and hashes hundreds of MB (phase 7 of a
// 2-layer llama-3.2-1b probed its 525 MB table 72 times: 60 % of its host
// time). A built op is a function of the spec, the shape, the tile options
// and the builders' code (a builder mutant, core/mutants.h, changes it), so
// its probe is too; the memo holds a hash and a size per entry.
class ProbeMemo {
 public:
  static ProbeMemo& instance() {
    static ProbeMemo memo;
    return memo;
  }
  std::optional<Probe> find(const std::string& key) const {
    std::lock_guard lock(mu_);
    auto it = probes_.find(key);
    if (it == probes_.end()) return std::nullopt;
    return it->second;
  }
  void add(const std::string& key, Probe p) {
    std::lock_guard lock(mu_);
    probes_.emplace(key, p);
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, Probe> probes_;
};

std::string probe_key(const std::string& spec_hash, const std::string& entry_key, size_t input) {
  return fmt::format("{}|{}|{}|{}", spec_hash, static_cast<int>(active_mutant()), entry_key, input);
}

}  // namespace

std::string detail::cache_key(const kernels::OpShape& shape, const kernels::TileOptions& tiles) {
  std::string k = shape_text(shape);
  for (const auto& [name, v] : tiles) k += fmt::format(" t.{}={}", name, v);
  return k;
}

std::string weight_layout_key(const ValueRef& weight, const kernels::BuiltOp& op, size_t input) {
  return key_of(weight, weight_probe(op, input).hash);
}

// ---------------------------------------------------------------- DesignCache

DesignCache::DesignCache(npu::DeviceSpec spec)
    : spec_(std::move(spec)), spec_hash_(spec_hash(spec_)), tile_choices_(std::make_shared<TileChoices>()) {}

void DesignCache::use_tile_choices(std::shared_ptr<TileChoices> store) {
  TESSERA_CHECK(store != nullptr, "DesignCache: no tile-choice store");
  tile_choices_ = std::move(store);
}

const DesignCache::Entry& DesignCache::get(const kernels::OpShape& shape,
                                           const kernels::TileOptions& tiles) {
  const std::string key = detail::cache_key(shape, tiles);
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) return *it->second;
  }
  // Built outside the lock so that independent shapes build in parallel; a
  // racing duplicate build is identical and simply dropped.
  auto e = std::make_unique<Entry>();
  e->key = key;
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
  const std::string memo_key = probe_key(spec_hash_, entry.key, input);
  const std::optional<Probe> known = ProbeMemo::instance().find(memo_key);
  const Probe p = known ? *known : weight_probe(*entry.op, input);
  if (!known) ProbeMemo::instance().add(memo_key, p);
  std::lock_guard lock(entry.probe_mu);
  entry.probes[input] = p;
  return {key_of(weight, p.hash), p.bytes};
}

const DesignCache::Entry::ActProbe& DesignCache::activation(const Entry& entry, int input) const {
  {
    std::lock_guard lock(entry.probe_mu);
    auto it = entry.act_probes.find(input);
    if (it != entry.act_probes.end()) return it->second;
  }
  const detail::ProbeResult r = input < 0 ? detail::probe_output(*entry.op, 0)
                                          : detail::probe_input(*entry.op, static_cast<size_t>(input));
  std::lock_guard lock(entry.probe_mu);
  auto [it, fresh] =
      entry.act_probes.emplace(input, Entry::ActProbe{detail::activation_key(r), r.bytes, r.buffers});
  return it->second;
}

// ---------------------------------------------------------------- layout policy

namespace {

// The N block: the builder's default n unless N splits evenly over the
// array's columns into blocks of at most that n (and at least half of it,
// so x is not re-streamed for many more N blocks). A row-major y
// (kRowMajorOutTile) writes exactly N columns and refuses padded N blocks,
// so an N that pads (Qwen2.5's hidden 896 and intermediate 4864 at n = 64
// over 8 columns) would keep every edge it feeds blocked; the exact blocks
// also drop the padded columns' compute.
int64_t exact_n(int64_t N, int64_t n, const npu::DeviceSpec& spec) {
  const int64_t per_column = N / spec.columns;
  if (N % spec.columns != 0 || per_column % n == 0) return n;
  for (int64_t e = n / 4 * 4; e >= std::max<int64_t>(n / 2, 4); e -= 4)
    if (per_column % e == 0) return e;
  return n;
}

}  // namespace

kernels::TileOptions layout_tiles(const kernels::OpShape& shape, const npu::DeviceSpec& spec) {
  if (shape.op != "linear" || shape.dim("M") <= 1) return {};
  // The largest prefill bucket's GEMM blocking. n depends only on N and the
  // array; k is the largest K block that fits L1 next to a 64-row x block, so
  // it also fits every smaller M block: one W layout serves every prefill M.
  // k is chosen for the widest N block (kLayoutN over the columns), so it
  // depends on K alone: the GEMMs reading one x (q, k and v of a narrow KV
  // dim) agree on its K block, and the row-wise producer of x can write
  // that one blocked x for all of them (kGemmX*).
  const int64_t kLayoutM = 2048, kLayoutN = int64_t{spec.columns} * 64;
  const int64_t K = shape.dim("K"), N = shape.dim("N");
  kernels::LinearPlan p = kernels::plan_linear(kLayoutM, K, kLayoutN, spec, {{"gemm", 1}});
  // Whole K blocks where the array allows them: a row-wise producer (rmsnorm,
  // silu_mul) can write only whole blocks of the GEMM's x (kGemmX*), and a
  // padded last block would need its pad columns zeroed in a reused arena
  // buffer. The one-y-object K block of 80 pads K = 2048 to 2080, and fusing
  // the norms into their GEMMs saves more than its larger block does.
  if (K % p.k != 0) {
    const kernels::LinearPlan whole =
        kernels::plan_linear(kLayoutM, K, kLayoutN, spec, {{"gemm", 1}, {"y_depth", 2}});
    if (K % whole.k == 0) p = whole;
  }
  const kernels::LinearPlan np = kernels::plan_linear(kLayoutM, K, N, spec, {{"gemm", 1}, {"k", p.k}});
  return {{"gemm", 1}, {"k", p.k}, {"n", exact_n(N, np.n, spec)}};
}

// ---------------------------------------------------------------- steps, plans

std::string Step::name() const {
  if (launches.size() == 1) return launches.front().name;
  return launches.front().name + ".." + launches.back().name;
}

double Step::seconds() const {
  return kind == StepKind::npu ? dispatch_seconds + relayout_seconds : host_seconds;
}

std::string Step::bound() const { return kind == StepKind::npu ? dispatch_bound : "host"; }

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
  for (const Step& s : steps) n += s.kind == StepKind::npu && layer_of(s) == 0;
  return n;
}

std::map<std::string, double> Plan::bound_seconds() const {
  std::map<std::string, double> by;
  for (const Step& s : steps) {
    by[s.bound()] += s.seconds() - s.relayout_seconds;
    if (s.relayout_seconds > 0) by["relayout"] += s.relayout_seconds;
  }
  return by;
}

int64_t Plan::arena_bytes() const {
  int64_t end = 0;
  for (const BufferDecl& b : buffers)
    if (b.offset >= 0) end = std::max(end, b.offset + b.bytes);
  return end;
}

}  // namespace tessera::compiler
