// Phase 1: inputs from the oracle's taps, one NPU run per unique (op, dims),
// judged against the oracle op on the same FP32 inputs. See phase1.h.
#include "tessera/pipeline/phase1.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <cmath>
#include <map>

#include "tessera/compiler/graph.h"
#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/kernels/builders/attention.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/npu/timing.h"
#include "tessera/oracle/oracle.h"
#include "tessera/oracle/rope.h"
#include "tessera/pipeline/bf16_reference.h"
#include "tessera/pipeline/local_gate.h"
#include "tessera/pipeline/reference_ops.h"

namespace tessera::pipeline {

using compiler::Graph;
using compiler::Node;
using compiler::ValueKind;
using compiler::ValueRef;

BuilderLookup registered_builders() {
  return [](const std::string& op) -> const kernels::OpBuilder* {
    for (const std::string& n : kernels::op_names())
      if (n == op) return &kernels::op_builder(op);
    return nullptr;
  };
}

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Deterministic prompt ids spread over the whole vocabulary (splitmix64).
int32_t token_for(uint64_t seed, uint64_t i, int64_t vocab) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<int32_t>(z % static_cast<uint64_t>(vocab));
}

std::vector<float> values_of(const Tensor& t) { return t.to_f32_vector(); }

// Everything one pass (prefill or decode) needs: the oracle's taps and the
// host-supplied values, for a one-layer model.
struct PassData {
  std::string phase;
  Graph graph;
  oracle::Taps taps;
  std::map<std::string, std::vector<float>> host;  // by ValueRef::str()
};

// Token i of the gate's sequence: the caller's prompt where it has one (deploy
// gates phase 1 on the prompt every later phase uses), seeded ids after it.
int32_t gate_token(const std::vector<int32_t>& prompt, uint64_t seed, int64_t i, int64_t vocab) {
  if (i < static_cast<int64_t>(prompt.size())) return prompt[static_cast<size_t>(i)];
  return token_for(seed, static_cast<uint64_t>(i), vocab);
}

PassData oracle_pass(const model::ModelConfig& c1, const model::Weights& w1, int64_t seq,
                     int64_t past, uint64_t seed, const std::vector<int32_t>& given) {
  PassData d;
  d.phase = seq == 1 ? "decode" : "prefill";
  d.graph = compiler::build_graph(c1, seq, past);
  const oracle::Oracle orc(c1, w1);
  oracle::KvCache cache = orc.new_cache();
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < past; ++i) prompt.push_back(gate_token(given, seed, i, c1.vocab_size));
  if (past > 0) orc.forward(prompt, cache);
  std::vector<int32_t> tokens;
  for (int64_t i = 0; i < seq; ++i)
    tokens.push_back(gate_token(given, seed, past + i, c1.vocab_size));
  // The cache as the kernel sees it before this call: P rows, then room for S.
  const int64_t kvd = c1.kv_dim(), T = past + seq;
  for (const char* kv : {"k_cache_in", "v_cache_in"}) {
    std::vector<float> buf(static_cast<size_t>(T * kvd), 0.0f);
    const auto& src = kv[0] == 'k' ? cache.keys(0) : cache.values(0);
    std::copy(src.begin(), src.end(), buf.begin());
    d.host[ValueRef{ValueKind::host, kv, 0, false}.str()] = std::move(buf);
  }
  const oracle::TapSet all = oracle::TapSet::all();
  orc.forward(tokens, cache, {oracle::LogitsMode::last, &all, &d.taps});
  std::vector<float> ids(tokens.begin(), tokens.end());
  d.host["host:token_ids"] = std::move(ids);
  const oracle::RopeTable rope = oracle::rope_table(c1, past, seq);
  d.host["host:rope_cos"] = rope.cos;
  d.host["host:rope_sin"] = rope.sin;
  return d;
}

// Values by name: activations computed by the oracle ops along the graph
// (replaced by the oracle's own tap where one exists), host values, and
// weights fetched on demand (they are the big ones).
class Values {
 public:
  Values(const model::ModelConfig& c1, const model::Weights& w1, PassData& d)
      : c1_(c1), w1_(w1), d_(d) {}

  std::vector<float> get(const ValueRef& r) const {
    std::vector<float> v;
    if (r.kind == ValueKind::weight) {
      v = weight(r);
    } else {
      ValueRef whole = r;
      whole.last_row = false;
      const auto& src = r.kind == ValueKind::host ? d_.host : act_;
      auto it = src.find(whole.str());
      TESSERA_CHECK(it != src.end(), "phase 1: value {} was not computed", whole.str());
      v = it->second;
    }
    if (r.last_row) {
      const size_t width = width_of(r, v.size());
      v.erase(v.begin(), v.end() - static_cast<std::ptrdiff_t>(width));
    }
    return v;
  }

  // Evaluates every node with the oracle ops; taps replace computed values.
  void evaluate() {
    for (const Node& n : d_.graph.nodes) {
      std::vector<std::vector<float>> in;
      for (const ValueRef& r : n.inputs) in.push_back(get(r));
      std::vector<std::span<const float>> spans(in.begin(), in.end());
      std::vector<float> out = reference_op(n.shape, spans);
      act_[n.output.str()] = tap_or(n, std::move(out));
    }
  }

 private:
  std::vector<float> weight(const ValueRef& r) const {
    for (const auto& s : model::tensor_specs(c1_))
      if (s.layer == r.layer && model::role_name(s.role) == r.name) return values_of(w1_.get(s.name));
    throw_error<InternalError>("phase 1: no weight {} in {}", r.str(), c1_.name);
  }

  size_t width_of(const ValueRef& r, size_t numel) const {
    const auto rows = static_cast<size_t>(d_.graph.seq);
    TESSERA_CHECK(numel % rows == 0, "{} has {} values, not {} rows", r.str(), numel, rows);
    return numel / rows;
  }

  std::vector<float> tap_or(const Node& n, std::vector<float> computed) const {
    const ValueRef& o = n.output;
    const bool is_tap = o.layer >= 0 ? oracle::is_layer_tap(o.name) : oracle::is_model_tap(o.name);
    if (!is_tap || !d_.taps.contains(o.layer, o.name)) return computed;
    const Tensor& t = d_.taps.get(o.layer, o.name);
    auto s = t.as<float>();
    std::vector<float> tap(s.begin(), s.end());
    // The graph must reproduce the oracle: same ops in fp32, so only summation
    // order differs (bias inside vs after the GEMM).
    const Metrics m = compare(tap, computed);
    if (m.count != static_cast<int64_t>(tap.size()) || !(m.max_rel <= 1e-4) || !(m.cosine >= 0.99999))
      throw_error<InternalError>("phase 1: graph node {} (L{}) disagrees with the oracle tap {}: "
                                 "max_rel {:.3g}, cosine {:.6f} ({} vs {} values)",
                                 n.name, n.layer, o.str(), m.max_rel, m.cosine, computed.size(),
                                 tap.size());
    return tap;
  }

  const model::ModelConfig& c1_;
  const model::Weights& w1_;
  PassData& d_;
  std::map<std::string, std::vector<float>> act_;
};

// argmax ids may differ from the oracle's only where the oracle's own logits
// tie at bf16 precision: two fp32 logits up to one bf16 spacing apart (2u
// relative, u = 2^-8) can round to the same bf16 value, and the NPU, seeing
// only that value, keeps the lower index. Its pick is then as right as the
// oracle's.
Metrics argmax_metrics(const std::vector<float>& logits, int64_t V, std::vector<float> ref,
                       std::vector<float> got) {
  for (size_t m = 0; m < ref.size(); ++m) {
    const auto gi = static_cast<int64_t>(got[m]);
    if (gi == static_cast<int64_t>(ref[m]) || gi < 0 || gi >= V) continue;
    const float best = logits[m * static_cast<size_t>(V) + static_cast<size_t>(ref[m])];
    const float pick = logits[m * static_cast<size_t>(V) + static_cast<size_t>(gi)];
    if (best - pick <= std::ldexp(std::fabs(best), -7)) got[m] = ref[m];
  }
  return compare(ref, got);
}

using Inputs = std::vector<std::vector<float>>;

// The block order the attention design runs (bf16_reference.h), from the
// builder's own plan for the tiles it chose: prefill folds each row's keys in
// blocks of bk into one state; decode gives every tile a chain of nb blocks.
AttnSchedule attn_schedule(const kernels::OpShape& s, const kernels::BuiltOp& built,
                           const npu::DeviceSpec& spec) {
  if (s.op == "attention_prefill" && built.tiles.count("cascade")) {
    const kernels::CascadePlan p = kernels::plan_attention_cascade(s, spec, built.tiles);
    return {p.bk, p.cps, true};
  }
  if (s.op == "attention_prefill") return {kernels::plan_attention_prefill(s, spec, built.tiles).bk, 0};
  if (s.op == "attention_decode") {
    const kernels::DecodePlan p = kernels::plan_attention_decode(s, spec, built.tiles);
    return {p.bk, p.nb};
  }
  return {};
}

// The op's own roofline (phase1.h): bf16 logical tensors each moved once,
// capped by what the design moves (a gather reads only some table rows).
void set_roofline(KernelResult& r, const kernels::BuiltOp& built, const npu::DispatchTiming& t,
                  const npu::DeviceSpec& spec) {
  int64_t logical = 0;
  for (const auto* list : {&built.inputs, &built.outputs})
    for (const kernels::OpTensor& x : *list) logical += shape_numel(x.shape) * 2;
  const double ddr = static_cast<double>(std::min(logical, t.ddr_bytes)) / spec.ddr_bytes_per_second;
  const double compute =
      t.peak_macs_per_second > 0 ? static_cast<double>(t.macs) / t.peak_macs_per_second : 0.0;
  r.roofline_seconds = std::max(ddr, compute);
  r.roofline_bound = compute > ddr ? "compute" : "ddr";
}

KernelResult run_kernel(const Graph& g, const compiler::UniqueOp& unique,
                        const std::function<Inputs()>& fetch, const npu::DeviceSpec& spec,
                        const Phase1Options& opts, const BuilderLookup& lookup) {
  const Node& node = g.nodes[unique.nodes.front()];
  std::vector<bool> activation;
  for (const ValueRef& ref : node.inputs) activation.push_back(ref.kind == ValueKind::activation);
  KernelResult r;
  r.node = node.name;
  for (size_t i : unique.nodes)
    if (std::find(r.nodes.begin(), r.nodes.end(), g.nodes[i].name) == r.nodes.end())
      r.nodes.push_back(g.nodes[i].name);
  r.shape = compiler::shape_text(unique.shape);
  r.threshold = kernel_threshold(unique.shape);
  const auto t0 = Clock::now();
  const kernels::OpBuilder* b = lookup(unique.shape.op);
  if (b == nullptr) {
    r.status = KernelStatus::no_builder;
    r.message = "no builder for op " + unique.shape.op;
    return r;
  }
  kernels::BuiltOp built;
  try {
    built = b->build(unique.shape, spec);
    kernels::ensure_tile_kernels_registered();
    const npu::DispatchTiming t = npu::estimate_time(built.design, spec);
    r.predicted_seconds = t.total_seconds;
    r.bound = t.bound;
    r.utilization = t.utilization;
    r.macs = t.macs;
    r.ddr_bytes = t.ddr_bytes;
    r.launch_seconds = t.total_seconds - t.overhead_seconds;
    set_roofline(r, built, t, spec);
  } catch (const Error& e) {
    r.status = KernelStatus::build_error;
    r.message = e.what();
    r.host_seconds = since(t0);
    if (opts.on_failure) opts.on_failure({r, unique.shape, nullptr, activation, nullptr, std::current_exception(), g.seq, g.past});
    return r;
  }
  if (!opts.simulate) {
    r.status = KernelStatus::not_judged;
    r.message = "built, validated and timed; not simulated (no metrics)";
    r.host_seconds = since(t0);
    return r;
  }
  const Inputs in = fetch();
  std::vector<float> out;
  try {
    const kernels::OpRun run = kernels::run_op(built, in, spec);
    out = run.outputs.at(0);
    std::vector<std::span<const float>> spans(in.begin(), in.end());
    std::vector<float> ref = reference_op(unique.shape, spans);
    if (unique.shape.op == "argmax") {
      r.metrics = argmax_metrics(in[0], unique.shape.dim("V"), std::move(ref), run.outputs.at(0));
    } else {
      NoiseModel nm = r.threshold.noise;
      const int64_t hd = unique.shape.dims.count("head_dim") ? unique.shape.dim("head_dim") : 0;
      nm.row_width = stat_row_width(unique.shape.op, hd, ref.size(), g.seq);
      r.metrics = compare(ref, run.outputs.at(0), nm);
    }
    if (const auto bounds = bf16_reference(unique.shape, spans, attn_schedule(unique.shape, built, spec))) {
      const Bf16Verdict v = bf16_outside(*bounds, run.outputs.at(0));
      r.metrics.bf16_ref_outside = v.outside;
      r.metrics.bf16_ref_first = v.first;
    }
  } catch (const Error& e) {
    r.status = KernelStatus::run_error;
    r.message = e.what();
    r.host_seconds = since(t0);
    if (opts.on_failure) opts.on_failure({r, unique.shape, &in, activation, nullptr, std::current_exception(), g.seq, g.past});
    return r;
  }
  r.failed = failed_metrics(r.metrics, r.threshold);
  r.status = r.failed.empty() ? KernelStatus::pass : KernelStatus::fail;
  r.host_seconds = since(t0);
  if (!r.failed.empty() && opts.on_failure) opts.on_failure({r, unique.shape, &in, activation, &out, nullptr, g.seq, g.past});
  return r;
}

// Largest causal score q.k * scale over every (row, head, visible key).
double max_score(const kernels::OpShape& s, const Inputs& in) {
  const bool prefill = s.op == "attention_prefill";
  const int64_t rows = prefill ? s.dim("S") : 1, first = prefill ? s.dim("P") : s.dim("T") - 1;
  const int64_t H = s.dim("heads"), KV = s.dim("kv_heads"), D = s.dim("head_dim");
  const double scale = s.attr("scale", 1.0 / std::sqrt(static_cast<double>(D)));
  double best = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t h = 0; h < H; ++h) {
      const float* q = in[0].data() + (i * H + h) * D;
      const int64_t kvh = h / (H / KV);
      for (int64_t t = 0; t <= first + i; ++t) {
        const float* k = in[1].data() + (t * KV + kvh) * D;
        float dot = 0;
        for (int64_t e = 0; e < D; ++e) dot += q[e] * k[e];
        best = std::max(best, static_cast<double>(dot) * scale);
      }
    }
  return best;
}

// The range probe: real models reach attention scores far above the ~88.7
// where e^x overflows fp32 (a softmax without max subtraction then returns
// NaN), synthetic weights do not. q is scaled by a power of two until the
// largest causal score is >= 100; q and k are pre-rounded to bf16 first so the
// scaling is exact and the oracle sees the very values the tile sees (keeping
// the ordinary attention thresholds meaningful at large scores).
Inputs large_score_inputs(const kernels::OpShape& s, Inputs in) {
  for (int i = 0; i < 2; ++i)
    for (float& x : in[static_cast<size_t>(i)]) x = round_bf16(x);
  const double m = max_score(s, in);
  int shift = 0;
  while (m * std::ldexp(1.0, shift) < 100.0 && shift < 64) ++shift;
  for (float& x : in[0]) x = std::ldexp(x, shift);
  return in;
}

// The small-RMS probe of a norm: x scaled by a power of two (exact on bf16
// values) until its mean square is about 16 eps, where eps moves the row scale
// by ~3 %: a wrong epsilon, invisible at ordinary activation scales, is then
// far outside the rounding noise.
Inputs small_rms_inputs(const kernels::OpShape& s, Inputs in) {
  const double eps = s.attr("eps", 1e-6);
  double ss = 0;
  for (float x : in[0]) ss += static_cast<double>(x) * x;
  const double ms = ss / static_cast<double>(std::max<size_t>(in[0].size(), 1));
  int shift = 0;
  while (ms * std::ldexp(1.0, 2 * shift) > 16 * eps && shift > -64) --shift;
  for (float& x : in[0]) x = std::ldexp(x, shift);
  return in;
}

// The near-tie probe of attention: q scaled down by a power of two (exact on
// bf16 values) until every causal score is below 2^-4 in magnitude, so each
// row's visible keys weigh within e^(2 * 2^-4) ~ 13 % of each other: the
// softmax rows are near ties, and a key the mask or the running sum drops, or
// a mis-weighted merge of key blocks, moves the output by ~1/T of its value
// instead of hiding behind one dominant key.
Inputs near_tie_inputs(const kernels::OpShape& s, Inputs in) {
  for (int i = 0; i < 2; ++i)
    for (float& x : in[static_cast<size_t>(i)]) x = round_bf16(x);
  Inputs neg = in;
  for (float& x : neg[0]) x = -x;
  const double m = std::max(max_score(s, in), max_score(s, neg));  // the largest |score|
  int shift = 0;
  while (m * std::ldexp(1.0, shift) >= 0.0625 && shift > -64) --shift;
  for (float& x : in[0]) x = std::ldexp(x, shift);
  return in;
}

// The far-position probe of RoPE: the same x under the tables of the model's
// last M positions. At the gate's positions (0 .. seq) the lowest-frequency
// pairs turn by less than one bf16 ulp (theta^(-(d-2)/d) * 17 ~ 1e-5 rad for
// theta 1e6), so a bug in their sin term (a sign, a swapped pair) moves almost
// no output; near the context length the same pairs turn by 1e-2 - 1e-1 rad,
// and every such value moves by many ulps.
Inputs far_position_inputs(const model::ModelConfig& c, const kernels::OpShape& s, Inputs in) {
  const int64_t M = s.dim("M");
  const int64_t last = std::max(c.max_position_embeddings, c.default_context());
  const oracle::RopeTable t = oracle::rope_table(c, std::max<int64_t>(last - M, 0), M);
  in[1] = t.cos;
  in[2] = t.sin;
  return in;
}

using Probe = std::function<Inputs(const kernels::OpShape&, Inputs)>;

// The probes an op gets besides the tap inputs (each a KernelResult of its own,
// the node named with the tag).
std::vector<std::pair<const char*, Probe>> probes_of(const model::ModelConfig& c, const std::string& op) {
  if (op == "attention_prefill" || op == "attention_decode")
    return {{":large-scores", large_score_inputs}, {":near-tie", near_tie_inputs}};
  if (op == "rmsnorm" || op == "head_rmsnorm") return {{":small-rms", small_rms_inputs}};
  if (op == "rope")
    return {{":far-positions", [&c](const kernels::OpShape& s, Inputs in) { return far_position_inputs(c, s, std::move(in)); }}};
  return {};
}

// Only layer 0 and the model-level tensors: per-layer shapes are identical.
model::Weights first_layer(const model::ModelConfig& c1, const model::Weights& w) {
  model::Weights out;
  for (const auto& s : model::tensor_specs(c1)) out.add(s.name, w.get(s.name));
  return out;
}

}  // namespace

const char* status_name(KernelStatus s) {
  switch (s) {
    case KernelStatus::pass: return "pass";
    case KernelStatus::fail: return "FAIL";
    case KernelStatus::no_builder: return "NO-BUILDER";
    case KernelStatus::build_error: return "BUILD-ERROR";
    case KernelStatus::run_error: return "RUN-ERROR";
    case KernelStatus::not_judged: return "NOT-JUDGED";
  }
  return "?";
}

Phase1Report run_phase1(const model::ModelConfig& config, const model::Weights& weights,
                        const npu::DeviceSpec& spec, const Phase1Options& opts) {
  if (opts.seq < 1)
    throw_error<UsageError>("phase 1: the sequence length must be >= 1, got {}", opts.seq);
  const auto t0 = Clock::now();
  model::ModelConfig c1 = config;
  c1.num_layers = 1;
  const model::Weights w1 = first_layer(c1, weights);
  const BuilderLookup lookup = opts.builders ? opts.builders : registered_builders();
  Phase1Report rep;
  rep.model = config.name;
  rep.spec = spec.name;
  rep.seq = opts.seq;
  std::vector<std::pair<int64_t, int64_t>> passes;  // (S, P)
  // seq 1 is the first decode step itself (P = 0): there is no prefill to run.
  if (opts.seq == 1) {
    if (opts.decode || opts.prefill) passes.emplace_back(1, 0);
  } else {
    if (opts.prefill) passes.emplace_back(opts.seq, 0);
    if (opts.decode) passes.emplace_back(1, opts.seq);
  }
  for (const auto& [S, P] : passes) {
    PassData d = oracle_pass(c1, w1, S, P, opts.seed, opts.prompt);
    Values values(c1, w1, d);
    values.evaluate();
    for (const auto& u : compiler::unique_ops(d.graph)) {
      const Node& node = d.graph.nodes[u.nodes.front()];
      // The kernel gets the inputs the deployment gives it: bf16 activations
      // (they leave bf16 kernels), weights and KV rows; token ids and the f32
      // RoPE tables as they are (deployed_as_bf16). The oracle op on the same
      // values then differs only by the kernel's internal roundings, which the
      // statistical gates model exactly.
      auto fetch = [&] {
        Inputs in;
        for (const ValueRef& ref : node.inputs) {
          in.push_back(values.get(ref));
          if (deployed_as_bf16(ref)) round_bf16_inplace(in.back());
        }
        return in;
      };
      KernelResult r = run_kernel(d.graph, u, fetch, spec, opts, lookup);
      r.phase = d.phase;
      rep.results.push_back(std::move(r));
      for (const auto& [tag, probe] : probes_of(c1, u.shape.op)) {
        KernelResult p = run_kernel(d.graph, u, [&, probe = probe] { return probe(u.shape, fetch()); }, spec, opts, lookup);
        p.phase = d.phase;
        p.node += tag;
        for (auto& n : p.nodes) n += tag;
        rep.results.push_back(std::move(p));
      }
    }
  }
  rep.host_seconds = since(t0);
  return rep;
}

}  // namespace tessera::pipeline
