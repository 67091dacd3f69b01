// Phase 6: integration. runtime::Session (prefill + KV cache + decode, the
// runner `tessera run` uses) prefills the gate prompt and decodes the oracle's
// greedy continuation teacher-forced: at step i the NPU's greedy pick, given
// the oracle's prefix, must be the oracle's token, or the oracle's own logits
// of the two tokens must lie closer than the tie margin (phase6_rules()),
// derived before the run from the rounding model of the logits (the phase-1
// rounding counts summed along the path: phase 3's logits row), never from a
// measured error. Every such tie is listed. Each step's logits are also gated
// on the phase-3 logits cosine floor and the statistical metrics, and every
// op of each decode step locally (phase6_steps.h), so a runtime bug in the
// position, RoPE table or KV cache a step is fed is named at its step and op.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "deploy_internal.h"
#include "diagnose_run.h"
#include "phase6_steps.h"
#include "tessera/core/error.h"
#include "tessera/pipeline/deploy_thresholds.h"
#include "tessera/oracle/taps.h"
#include "tessera/runtime/session.h"

namespace tessera::pipeline::detail {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double u = 1.0 / 256.0;  // bf16 unit roundoff 2^-8

// Phase 3's logits threshold (phase3.json is current: phase 3 passed in this
// run or was verified by sha256 before): its cosine floor and rounding model,
// both derived from the op table before any run; and, for the report only,
// phase 3's measured logit error.
struct Phase3Logits {
  double cos_floor = 0, max_abs = 0;
  NoiseModel noise;
};

Phase3Logits phase3_logits(const fs::path& out) {
  std::ifstream in(out / "phase3.json");
  if (!in) throw_error<InternalError>("phase 6 needs phase3.json in {}", out.string());
  const auto j = nlohmann::json::parse(in);
  Phase3Logits p;
  for (const auto& c : j.at("checks")) {
    if (c.at("name") != "logits") continue;
    const auto& t = c.at("threshold");
    p.cos_floor = t.at("min_cosine").get<double>();
    const auto& n = t.at("noise");
    p.noise.enabled = n.at("enabled").get<bool>();
    p.noise.elem_roundings = n.at("elem_roundings").get<double>();
    p.noise.row_roundings = n.at("row_roundings").get<double>();
    p.noise.path = n.value("path", true);
  }
  p.max_abs = j.at("details").at("logits_max_abs").get<double>();
  return p;
}


// Runtime-path coverage: the session's prefill computes the phase-2 prompt
// through the same executor, host ops and session inputs (RoPE table, KV
// buffers) `tessera run` uses; its layer-0 taps are gated like phase 2's, so a
// runtime bug is caught at the op where it happens, not only in the logits.
void session_tap_checks(Context& ctx, const runtime::Session& s, PhaseResult& r) {
  model::ModelConfig c1 = ctx.config;
  c1.num_layers = 1;
  const auto limits = block_thresholds(compiler::build_graph(c1, ctx.seq(), 0));
  const OracleRun& orc = ctx.oracle();
  for (const auto& [key, got] : s.last_values()) {
    // The session keeps every value (for the local gates); the one-layer
    // thresholds fit layer 0's taps only.
    if (key.rfind("L0.", 0) != 0) continue;
    auto ref = orc.taps.find(key);
    auto lim = limits.find(key);
    if (ref == orc.taps.end() || lim == limits.end()) continue;
    // A bucketed prefill computes pad rows after the prompt's: compare the prompt's rows.
    if (got.size() < ref->second.size()) continue;
    const std::span<const float> rows(got.data(), ref->second.size());
    NoiseModel nm = lim->second.noise;
    nm.row_width = stat_row_width(lim->second.op, c1.head_dim, ref->second.size(), ctx.seq());
    r.checks.push_back(make_check("session prefill " + key, compare(ref->second, rows, nm), lim->second));
  }
}

// A failing session prefill is diagnosed on its own values at once (the
// decode steps replace them), with the host values an honest caller supplies.
std::optional<Diagnosis> diagnose_session_prefill(Context& ctx, const runtime::Session& s,
                                                  const std::vector<int32_t>& padded, int64_t last_real,
                                                  const PhaseResult& r) {
  if (std::all_of(r.checks.begin(), r.checks.end(), [](const GateCheck& c) { return c.passed; })) return std::nullopt;
  try {
    return diagnose_run(ctx, s.last_plan().graph, s.last_values(), host_inputs(ctx.config, padded),
                        "phase 6 session prefill", last_real);
  } catch (const Error& e) {  // advice only: the failed checks stand
    ctx.issues.push_back(fmt::format("diagnosis of the phase 6 session prefill not run: {}", e.what()));
    return std::nullopt;
  }
}

}  // namespace

}  // namespace tessera::pipeline::detail

namespace tessera::pipeline {

// The tie margin of one step: the two logits' errors are independent with the
// predicted sd of each (the rounding model at this row's rms and max), so
// their difference has sd sqrt(2) sd; a gap beyond margin_sigmas of those
// cannot flip without a bug. Never below one bf16 spacing of the largest logit.
double tie_margin(const std::vector<float>& ref, const NoiseModel& nm) {
  double ss = 0, mx = 0;
  for (float v : ref) {
    ss += static_cast<double>(v) * v;
    mx = std::max(mx, std::fabs(static_cast<double>(v)));
  }
  const double ur = bf16_rms_rounding(), rms = std::sqrt(ss / static_cast<double>(ref.size()));
  const double sd = ur * std::sqrt(nm.row_roundings * rms * rms + nm.elem_roundings * mx * mx);
  const auto& rules = phase6_rules();
  return std::max(rule_value(rules, "margin_sigmas") * std::sqrt(2.0) * sd,
                  rule_value(rules, "margin_floor_u") * std::ldexp(1.0, -8) * mx);  // bf16 u
}

}  // namespace tessera::pipeline

namespace tessera::pipeline::detail {

PhaseResult run_phase6(Context& ctx, std::vector<std::string>&) {
  const auto t0 = Clock::now();
  PhaseResult r{6, "integration", "passed", {}, 0, nlohmann::json::object()};
  const OracleRun& orc = ctx.oracle();
  const Phase3Logits p3 = phase3_logits(ctx.out);
  runtime::SessionOptions so;
  so.style = ctx.opts.style;
  so.prefill_passes = ctx.plan_options(false).passes;  // the plans phases 4 / 5 kept
  so.decode_passes = ctx.plan_options(true).passes;
  so.tile_choices = ctx.cache().shared_tile_choices();  // phases 4 / 5's tune-tiles decisions
  // Every value of the prompt's forward: the local gates condition each op on them.
  for (const compiler::Node& node : compiler::build_graph(ctx.config, ctx.seq(), 0).nodes)
    so.keep.insert(node.output.str());
  runtime::Session s(ctx.config, ctx.packed(), ctx.opts.spec, so);
  std::vector<float> logits = s.prefill(orc.prompt);
  session_tap_checks(ctx, s, r);
  std::vector<int32_t> padded = orc.prompt;  // a bucketed prefill pads with token 0
  padded.resize(static_cast<size_t>(s.last_plan().graph.seq), 0);
  const auto last_real = static_cast<int64_t>(orc.prompt.size()) - 1;
  const int64_t local = add_local_checks(ctx, s.last_plan().graph, s.last_values(), padded,
                                         "session prefill local ", r, last_real);
  std::optional<Diagnosis> diagnosis = diagnose_session_prefill(ctx, s, padded, last_real, r);
  DecodeStepGate step_gate(ctx, s, static_cast<int64_t>(orc.prompt.size()));
  const runtime::CallTiming prefill = s.last_timing();
  double dec_pred = 0, dec_host = 0;
  nlohmann::json ties = nlohmann::json::array(), npu_tokens = nlohmann::json::array();
  const size_t n = orc.continuation.size();
  for (size_t i = 0; i < n; ++i) {
    const std::vector<float> ref = orc.step_row(i, ctx.config.vocab_size);
    const int32_t want = orc.continuation[i];
    const int32_t got = runtime::argmax(logits);
    npu_tokens.push_back(got);
    Threshold t{"logits", 1e9, 1e9, p3.cos_floor, p3.cos_floor,
                "logits cosine as phase 3's logits floor, statistics under phase 3's logits rounding "
                "model; the token must equal the oracle's unless the oracle's logit gap to the NPU's "
                "pick is below the tie margin", p3.noise};
    GateCheck c = make_check(fmt::format("token {}", i), compare(ref, logits, p3.noise), t);
    if (got != want) {
      const double margin = tie_margin(ref, p3.noise);
      const double gap = ref[static_cast<size_t>(want)] - ref[static_cast<size_t>(got)];
      ties.push_back({{"step", i}, {"oracle", want}, {"npu", got}, {"gap", gap}, {"margin", margin},
                      {"tolerated", gap < margin}});
      if (!(gap < margin)) {
        c.passed = false;
        c.message = fmt::format("NPU token {} != oracle token {} at step {}: oracle logit gap {:.4g} >= "
                                "tie margin {:.4g}", got, want, i, gap, margin);
      }
    }
    r.checks.push_back(std::move(c));
    ctx.progress("phase 6: decode", i + 1, n);
    if (i + 1 == n) break;
    logits = s.decode(want);  // teacher-forced: the oracle's prefix
    step_gate.check(s, i, want, r);
    dec_pred += s.last_timing().predicted_seconds;
    dec_host += s.last_timing().host_seconds;
  }
  for (const auto& c : r.checks)
    if (!c.passed) r.status = "failed";
  const double steps = std::max<double>(1, static_cast<double>(n) - 1);
  r.details = {{"oracle_tokens", orc.continuation},
               {"local_checks", local},
               {"decode_step_checks", {{"passed", step_gate.passed()}, {"failed_steps", step_gate.failed()}}},
               {"npu_tokens", npu_tokens},
               {"disagreements", ties},
               {"phase3_logits_max_abs", p3.max_abs},
               {"prefill_tokens", prefill.tokens},
               {"prefill_predicted_seconds", prefill.predicted_seconds},
               {"prefill_host_seconds", prefill.host_seconds},
               {"decode_steps", n - 1},
               {"decode_predicted_seconds_per_token", dec_pred / steps},
               {"decode_host_seconds_per_token", dec_host / steps},
               {"decode_predicted_tokens_per_second", dec_pred > 0 ? steps / dec_pred : 0.0}};
  // The first failure's own diagnosis: the session prefill's, else the
  // first failing decode step's, else the executor's first decode step.
  if (!diagnosis) diagnosis = step_gate.diagnosis();
  if (r.status == "failed") attach(ctx, r, [&] { return diagnosis ? diagnosis : diagnose_decode(ctx); });
  r.host_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace tessera::pipeline::detail
