// The evaluator's measurements: the NPU (runtime::Session on the modelled
// device, the runner `tessera run` uses) against the FP32 oracle on the source
// weights, on prompts the deploy never saw, and determinism.
//
// Every limit is fixed before the run from the canonical tables, for the
// shape being run (deploy_thresholds.h):
//  - layer l's h_out cosine >= 1 - (l+1) * loss, loss = the cosine one block
//    may lose (phase 3's floor, re-derived for this prompt length);
//  - logits: the phase-3 budget of L + 1 blocks (max_rel, mean_rel, cosine);
//  - top-1 may differ only when the oracle's top-2 gap is below
//    top1_gap_factor x the logits max_rel budget x max |logit| (two logits
//    moving by at most that in opposite directions), else a FAIL; a tolerated
//    tie is a warning naming the gap;
//  - top-5 overlap >= top5_min_overlap (phase 3's rule);
//  - NLL gap: log-softmax moves by at most 2 max_i |d logit_i| per token, so
//    |mean NLL(NPU) - NLL(oracle)| <= mean_t 2 x max_rel budget x max |logit_t|
//    (FAIL beyond); the typical move is 2 x the mean_rel budget (a warning
//    beyond: a systematic bias the max bound cannot see).
// Known weakness: these are worst-case budgets. The logits max_rel budget
// grows as sqrt(L + 1) (0.55 of max |logit| at 30 layers, SmolLM2), so at
// depth the top-1 margin (~25 logits) and the NLL bound tolerate almost any
// disagreement; the cosine floors are what binds there (SmolLM2's decode
// logits: 0.99779 against 0.99604). A tighter margin needs a tighter canonical
// budget, not a figure taken from this run.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>

#include <fmt/format.h>

#include "evaluate_internal.h"
#include "tessera/compiler/graph.h"
#include "tessera/model/model_dir.h"
#include "tessera/oracle/oracle.h"
#include "tessera/pipeline/deploy_thresholds.h"
#include "tessera/pipeline/metrics.h"
#include "tessera/runtime/session.h"

namespace tessera::pipeline::eval {

namespace {

// Reference text for the teacher-forced decode and the NLL gap; the fresh
// prompts are slices of it (the deploy's gate prompt is random ids).
constexpr const char* kReferenceText =
    "The lighthouse keeper climbed the spiral stairs every evening at dusk. He trimmed the wick, "
    "polished the great lens, and wrote the weather into a worn leather book: wind from the west, "
    "a long swell, two fishing boats returning late. In winter the storms came in quick succession, "
    "and he counted the seconds between the flash of lightning and the roll of thunder to judge how "
    "far away the danger was. Nobody visited except the supply boat, which brought flour, lamp oil, "
    "letters from his sister, and once a small grey cat that decided to stay.";

struct Limits {
  std::vector<double> layer_floor;
  Threshold logits;
  double top1_factor = 0, top5_min = 0;
};

// The limits of one forward of `seq` tokens after `past`, from the canonical tables only.
Limits limits_for(const model::ModelConfig& cfg, int64_t seq, int64_t past) {
  model::ModelConfig c1 = cfg;
  c1.num_layers = 1;
  const compiler::Graph g1 = compiler::build_graph(c1, seq, past);
  const Threshold block = block_thresholds(g1).at("L0.h_out");
  const double loss = layer_cosine_loss(g1);
  Limits l;
  for (int64_t i = 0; i < cfg.num_layers; ++i)
    l.layer_floor.push_back(depth_threshold(block, loss, static_cast<double>(i + 1)).min_cosine);
  const auto& r3 = phase3_rules();
  l.logits = depth_threshold(block, loss, static_cast<double>(cfg.num_layers) + rule_value(r3, "logits_blocks"));
  l.top1_factor = rule_value(r3, "top1_gap_factor");
  l.top5_min = rule_value(r3, "top5_min_overlap");
  return l;
}

std::vector<int32_t> top_k(std::span<const float> row, size_t k) {
  std::vector<int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  k = std::min(k, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), [&](int32_t a, int32_t b) {
    const float x = row[static_cast<size_t>(a)], y = row[static_cast<size_t>(b)];
    return x > y || (x == y && a < b);
  });
  ids.resize(k);
  return ids;
}

double max_abs(std::span<const float> v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

double nll(std::span<const float> row, int32_t target) {
  const double mx = *std::max_element(row.begin(), row.end());
  double s = 0;
  for (float x : row) s += std::exp(static_cast<double>(x) - mx);
  return mx + std::log(s) - static_cast<double>(row[static_cast<size_t>(target)]);
}

// The reference text in the deployment's tokenizer, repeated to `need` ids; a
// deployment without a tokenizer gets splitmix64 ids (documented in evaluation.md).
std::vector<int32_t> reference_tokens(const Loaded& d, size_t need, std::string& how) {
  std::vector<int32_t> base;
  const fs::path tok = d.dir / "model/tokenizer.json";
  if (fs::exists(tok)) {
    for (int32_t id : model::load_tokenizer(tok, *d.config).encode(kReferenceText, false))
      if (id >= 0 && id < d.config->vocab_size) base.push_back(id);
    how = "the reference paragraph (evaluate_measure.cpp) in model/tokenizer.json";
  }
  if (base.empty()) {
    uint64_t z = 0x5EEDE7A1u;
    for (int i = 0; i < 97; ++i) {
      z += 0x9E3779B97F4A7C15ull;
      uint64_t x = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
      base.push_back(static_cast<int32_t>((x ^ (x >> 31)) % static_cast<uint64_t>(d.config->vocab_size)));
    }
    how = "97 splitmix64 ids (no tokenizer in the deployment)";
  }
  std::vector<int32_t> out;
  while (out.size() < need) out.insert(out.end(), base.begin(), base.end());
  out.resize(need);
  return out;
}

runtime::SessionOptions session_options(const Loaded& d, runtime::BucketPolicy bucket) {
  runtime::SessionOptions so;
  so.style = d.prefill->style;
  so.prefill_passes = d.prefill->passes;
  so.decode_passes = d.decode->passes;
  so.bucket = bucket;
  return so;
}

void progress(const EvaluateOptions& o, const std::string& what, size_t done, size_t total) {
  if (o.progress) o.progress(what, done, total);
}

// One fresh prompt: per-layer h_out cosine, logits metrics, top-1 / top-5.
nlohmann::json one_prompt(const Loaded& d, const oracle::Oracle& orc, const std::vector<int32_t>& prompt, Checks& c) {
  const model::ModelConfig& cfg = *d.config;
  const auto n = static_cast<int64_t>(prompt.size());
  oracle::KvCache kv = orc.new_cache();
  oracle::TapSet want;
  want.add("h_out");
  oracle::Taps taps;
  const std::vector<float> ref = orc.forward(prompt, kv, {oracle::LogitsMode::last, &want, &taps}).to_f32_vector();
  runtime::SessionOptions so = session_options(d, runtime::BucketPolicy::pow2);
  for (int64_t l = 0; l < cfg.num_layers; ++l) so.keep.insert(fmt::format("L{}.h_out", l));
  runtime::Session s(cfg, d.packed, *d.spec, so);
  const std::vector<float> got = s.prefill(prompt);
  const Limits lim = limits_for(cfg, n, 0);
  const std::string tag = fmt::format("{}-token prompt (bucket {})", n, s.last_timing().compiled_tokens);
  nlohmann::json j = {{"tokens", n}, {"bucket", s.last_timing().compiled_tokens}};
  std::string worst;
  bool layers_ok = true;
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    const std::string key = fmt::format("L{}.h_out", l);
    const std::vector<float> r = taps.get(static_cast<int>(l), "h_out").to_f32_vector();
    auto it = s.last_values().find(key);
    if (it == s.last_values().end() || it->second.size() < r.size()) {
      c.fail("numerics", "per-layer cosine, " + tag, "the NPU session kept no " + key);
      return j;
    }
    const double cos = compare(r, std::span(it->second).first(r.size())).cosine;
    const double floor = lim.layer_floor[static_cast<size_t>(l)];
    j["layer_cosine"].push_back(cos);
    j["layer_floor"].push_back(floor);
    if (!(cos >= floor)) {
      layers_ok = false;
      worst += fmt::format(" {} cosine {:.6f} < {:.6f};", key, cos, floor);
    }
  }
  if (layers_ok) c.ok("numerics", "per-layer cosine, " + tag, fmt::format("every h_out cosine >= its floor (last {:.6f} >= {:.6f})", j["layer_cosine"].back().get<double>(), lim.layer_floor.back()));
  else c.fail("numerics", "per-layer cosine, " + tag, worst);
  const Metrics lm = compare(ref, got);
  const auto bad = failed_metrics(lm, lim.logits);
  const std::string lev = fmt::format("max_rel {:.3g} (<= {:.3g}), mean_rel {:.3g} (<= {:.3g}), cosine {:.6f} (>= {:.6f})",
                                      lm.max_rel, lim.logits.max_rel, lm.mean_rel, lim.logits.mean_rel, lm.cosine,
                                      lim.logits.min_cosine);
  if (bad.empty()) c.ok("numerics", "logits, " + tag, lev);
  else c.fail("numerics", "logits, " + tag, lev);
  const auto r5 = top_k(ref, 5), g5 = top_k(got, 5);
  const double gap = ref[static_cast<size_t>(r5[0])] - ref[static_cast<size_t>(r5[1])];
  const double margin = lim.top1_factor * lim.logits.max_rel * max_abs(ref);
  const std::string ev1 = fmt::format("oracle {} NPU {}; oracle top-2 gap {:.4g}, tie margin {:.4g}", r5[0], g5[0], gap, margin);
  if (r5[0] == g5[0]) c.ok("numerics", "top-1, " + tag, ev1);
  else if (gap < margin) c.warn("numerics", "top-1, " + tag, "tolerated tie: " + ev1);
  else c.fail("numerics", "top-1, " + tag, ev1);
  const auto overlap = std::count_if(r5.begin(), r5.end(), [&](int32_t id) { return std::find(g5.begin(), g5.end(), id) != g5.end(); });
  const std::string ev5 = fmt::format("overlap {} of 5 (>= {})", overlap, lim.top5_min);
  if (static_cast<double>(overlap) >= lim.top5_min) c.ok("numerics", "top-5, " + tag, ev5);
  else c.fail("numerics", "top-5, " + tag, ev5);
  j["logits"] = {{"max_rel", lm.max_rel}, {"mean_rel", lm.mean_rel}, {"cosine", lm.cosine},
                 {"limits", {{"max_rel", lim.logits.max_rel}, {"mean_rel", lim.logits.mean_rel}, {"min_cosine", lim.logits.min_cosine}}}};
  j["top1"] = {{"oracle", r5[0]}, {"npu", g5[0]}, {"gap", gap}, {"margin", margin}};
  j["top5_overlap"] = overlap;
  j["predicted_seconds"] = s.last_timing().predicted_seconds;
  return j;
}

// Prefill of 1 token, then `rows - 1` teacher-forced decode steps over the
// reference tokens: token agreement, decode logits cosine, NLL gap.
nlohmann::json teacher_forced(const Loaded& d, const oracle::Oracle& orc, const std::vector<int32_t>& text,
                              const EvaluateOptions& o, Checks& c) {
  const model::ModelConfig& cfg = *d.config;
  const size_t rows = text.size() - 1;
  oracle::KvCache kv = orc.new_cache();
  const std::vector<float> all =
      orc.forward(std::span(text).first(rows), kv, {oracle::LogitsMode::all, nullptr, nullptr}).to_f32_vector();
  runtime::Session s(cfg, d.packed, *d.spec, session_options(d, runtime::BucketPolicy::exact));
  const auto V = static_cast<size_t>(cfg.vocab_size);
  const Limits lim = limits_for(cfg, 1, static_cast<int64_t>(rows) - 1);
  size_t agree = 0;
  double gap_sum = 0, worst_bound = 0, typical_bound = 0, min_cos = 1;
  nlohmann::json ties = nlohmann::json::array(), fails = nlohmann::json::array();
  std::vector<float> got = s.prefill(std::span(text).first(1));
  for (size_t i = 0; i < rows; ++i) {
    if (i > 0) got = s.decode(text[i]);
    const std::span<const float> ref(all.data() + i * V, V);
    const int32_t ro = top_k(ref, 1)[0], go = top_k(got, 1)[0];
    const double scale = max_abs(ref);
    if (ro == go) ++agree;
    else {
      const double gap = ref[static_cast<size_t>(ro)] - ref[static_cast<size_t>(go)];
      const double margin = lim.top1_factor * lim.logits.max_rel * scale;
      nlohmann::json t = {{"step", i}, {"oracle", ro}, {"npu", go}, {"gap", gap}, {"margin", margin}};
      (gap < margin ? ties : fails).push_back(t);
    }
    min_cos = std::min(min_cos, compare(ref, got).cosine);
    gap_sum += nll(got, text[i + 1]) - nll(ref, text[i + 1]);
    worst_bound += 2 * lim.logits.max_rel * scale;
    typical_bound += 2 * lim.logits.mean_rel * scale;
    progress(o, "evaluate: teacher-forced decode", i + 1, rows);
  }
  const double n = static_cast<double>(rows);
  const double gap = gap_sum / n;
  worst_bound /= n;
  typical_bound /= n;
  const std::string tag = fmt::format("{} positions (1-token prefill + {} decode steps)", rows, rows - 1);
  const std::string ev = fmt::format("{} of {} NPU greedy tokens equal the oracle's; {} tolerated ties, {} beyond the margin{}",
                                     agree, rows, ties.size(), fails.size(),
                                     fails.empty() ? "" : ": first " + fails.front().dump());
  if (!fails.empty()) c.fail("numerics", "teacher-forced token agreement, " + tag, ev);
  else if (!ties.empty()) c.warn("numerics", "teacher-forced token agreement, " + tag, ev + "; ties " + ties.dump());
  else c.ok("numerics", "teacher-forced token agreement, " + tag, ev);
  const std::string cev = fmt::format("min cosine {:.6f} (>= {:.6f})", min_cos, lim.logits.min_cosine);
  if (min_cos >= lim.logits.min_cosine) c.ok("numerics", "decode logits cosine, " + tag, cev);
  else c.fail("numerics", "decode logits cosine, " + tag, cev);
  const std::string nev = fmt::format("mean NLL(NPU) - NLL(oracle) = {:+.4g} nats/token; worst-case bound {:.4g}, typical {:.4g}",
                                      gap, worst_bound, typical_bound);
  if (std::fabs(gap) > worst_bound) c.fail("numerics", "NLL gap on the reference text", nev);
  else if (std::fabs(gap) > typical_bound) c.warn("numerics", "NLL gap on the reference text", nev);
  else c.ok("numerics", "NLL gap on the reference text", nev);
  return {{"positions", rows}, {"agree", agree}, {"agreement", static_cast<double>(agree) / n},
          {"ties", ties}, {"disagreements", fails}, {"min_logits_cosine", min_cos},
          {"logits_floor", lim.logits.min_cosine}, {"nll_gap_mean", gap}, {"nll_gap_worst_bound", worst_bound},
          {"nll_gap_typical_bound", typical_bound}};
}

}  // namespace

void measure_numerics(const Loaded& d, const EvaluateOptions& o, Checks& c, nlohmann::json& measures) {
  if (!d.runnable()) {
    c.fail("numerics", "NPU vs oracle", "not run: the deployment could not be loaded (see the failures above)");
    return;
  }
  const model::ModelConfig& cfg = *d.config;
  const int64_t context = cfg.default_context();
  const int64_t rows = std::min<int64_t>(o.decode_tokens + 1, context - 1);
  std::string how;
  const std::vector<int32_t> text = reference_tokens(d, static_cast<size_t>(std::max<int64_t>(rows + 1, o.max_prompt + 211)), how);
  measures["reference"] = how;
  const oracle::Oracle orc(cfg, *d.source);
  // The limits of the decode measures, written down before anything runs.
  const Limits dl = limits_for(cfg, 1, rows - 1);
  measures["limits"] = nlohmann::json::array(
      {{{"name", "h_out cosine floor of layer l"}, {"value", dl.layer_floor},
        {"derivation", "1 - (l+1) x the cosine one block may lose (phase-2 h_out budget, deploy_thresholds.cpp), per shape"}},
       {{"name", "logits max_rel / mean_rel / cosine"},
        {"value", {dl.logits.max_rel, dl.logits.mean_rel, dl.logits.min_cosine}},
        {"derivation", "phase 3's budget of L + logits_blocks blocks: sqrt(blocks) x the block's max/mean, cosine loss x blocks"}},
       {{"name", "top-1 tie margin"}, {"value", "top1_gap_factor x logits max_rel x max |logit|"},
        {"derivation", "two logits moving by at most the max error in opposite directions (phase3_rules top1_gap_factor)"}},
       {{"name", "top-5 overlap"}, {"value", dl.top5_min}, {"derivation", "phase3_rules top5_min_overlap"}},
       {{"name", "NLL gap"}, {"value", "FAIL > mean_t 2 x max_rel x max|logit_t|; warning > mean_t 2 x mean_rel x max|logit_t|"},
        {"derivation", "log-softmax moves by at most 2 max_i |d logit_i|; typically 2 x the mean error"}}});
  // 1 token, an odd length, one past the pow2 bucket 16, the longest allowed.
  std::vector<int64_t> lengths = {1, 7, 17, std::min(context, o.max_prompt)};
  std::sort(lengths.begin(), lengths.end());
  lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
  std::erase_if(lengths, [&](int64_t n) { return n > std::min(context, o.max_prompt); });
  size_t done = 0;
  for (int64_t n : lengths) {
    // Slices at different offsets; never the deploy's own gate prompt.
    size_t off = static_cast<size_t>(n * 13) % (text.size() - static_cast<size_t>(n));
    std::vector<int32_t> p(text.begin() + static_cast<std::ptrdiff_t>(off), text.begin() + static_cast<std::ptrdiff_t>(off) + n);
    if (p == d.deploy_prompt) p.front() = (p.front() + 1) % static_cast<int32_t>(cfg.vocab_size);
    measures["prompts"].push_back(one_prompt(d, orc, p, c));
    progress(o, "evaluate: fresh prompts", ++done, lengths.size());
  }
  measures["teacher_forced"] = teacher_forced(d, orc, std::vector<int32_t>(text.begin(), text.begin() + rows + 1), o, c);
}

void measure_determinism(const Loaded& d, Checks& c, nlohmann::json& measures) {
  if (!d.runnable()) return;
  const std::vector<int32_t> prompt = {1 % static_cast<int32_t>(d.config->vocab_size), 5, 11, 17, 23, 29, 31};
  runtime::GenerateOptions go;
  go.max_new_tokens = 8;
  go.stop_tokens = {-1};  // never: both runs make all 8 tokens
  std::vector<runtime::GenerateResult> runs;
  for (int i = 0; i < 2; ++i) {
    runtime::Session s(*d.config, d.packed, *d.spec, session_options(d, runtime::BucketPolicy::exact));
    runs.push_back(s.generate(prompt, go));
  }
  auto times = [](const runtime::GenerateResult& r) {
    std::vector<double> t = {r.prefill.predicted_seconds};
    for (const auto& x : r.decode) t.push_back(x.predicted_seconds);
    return t;
  };
  const bool same = runs[0].tokens == runs[1].tokens && times(runs[0]) == times(runs[1]);
  const std::string ev = fmt::format("tokens {} / {}; predicted prefill {:.9g} / {:.9g} s (timing model)",
                                     nlohmann::json(runs[0].tokens).dump(), nlohmann::json(runs[1].tokens).dump(),
                                     runs[0].prefill.predicted_seconds, runs[1].prefill.predicted_seconds);
  if (same) c.ok("determinism", "two sessions, one 7-token prompt, 8 greedy tokens", ev);
  else c.fail("determinism", "two sessions, one 7-token prompt, 8 greedy tokens", ev);
  measures["determinism"] = {{"tokens", runs[0].tokens}, {"identical", same}, {"prefill_predicted_seconds", runs[0].prefill.predicted_seconds}};
}

}  // namespace tessera::pipeline::eval
