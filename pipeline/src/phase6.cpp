// Phase 6: integration. runtime::Session (prefill + KV cache + decode, the
// runner `tessera run` uses) prefills the gate prompt and decodes the oracle's
// greedy continuation teacher-forced: at step i the NPU's greedy pick, given
// the oracle's prefix, must be the oracle's token, or the oracle's own logits
// of the two tokens must lie closer than the tie margin (phase6_rules()),
// derived from phase 3's measured logit error. Every such tie is listed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "deploy_internal.h"
#include "tessera/core/error.h"
#include "tessera/pipeline/deploy_thresholds.h"
#include "tessera/runtime/session.h"

namespace tessera::pipeline::detail {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double u = 1.0 / 256.0;  // bf16 unit roundoff 2^-8

// Phase 3's measured logit error and its logits cosine floor (phase3.json is
// current: phase 3 passed in this run or was verified by sha256 before).
std::pair<double, double> phase3_figures(const fs::path& out) {
  std::ifstream in(out / "phase3.json");
  if (!in) throw_error<InternalError>("phase 6 needs phase3.json in {}", out.string());
  const auto j = nlohmann::json::parse(in);
  double floor = 0;
  for (const auto& c : j.at("checks"))
    if (c.at("name") == "logits") floor = c.at("threshold").at("min_cosine").get<double>();
  return {j.at("details").at("logits_max_abs").get<double>(), floor};
}

}  // namespace

PhaseResult run_phase6(Context& ctx, std::vector<std::string>&) {
  const auto t0 = Clock::now();
  PhaseResult r{6, "integration", "passed", {}, 0, nlohmann::json::object()};
  const auto& rules = phase6_rules();
  const OracleRun& orc = ctx.oracle();
  const auto [max_abs, cos_floor] = phase3_figures(ctx.out);
  runtime::SessionOptions so;
  so.style = ctx.opts.style;
  so.prefill_passes = ctx.plan_options(false).passes;  // the plans phases 4 / 5 kept
  so.decode_passes = ctx.plan_options(true).passes;
  runtime::Session s(ctx.config, ctx.packed(), ctx.opts.spec, so);
  std::vector<float> logits = s.prefill(orc.prompt);
  const runtime::CallTiming prefill = s.last_timing();
  double dec_pred = 0, dec_host = 0;
  nlohmann::json ties = nlohmann::json::array(), npu_tokens = nlohmann::json::array();
  const size_t n = orc.continuation.size();
  for (size_t i = 0; i < n; ++i) {
    const std::vector<float> ref = orc.step_row(i, ctx.config.vocab_size);
    const int32_t want = orc.continuation[i];
    const int32_t got = runtime::argmax(logits);
    npu_tokens.push_back(got);
    Threshold t{"logits", 1e9, 1e9, cos_floor, cos_floor,
                "logits cosine as phase 3's logits floor; the token must equal the oracle's unless "
                "the oracle's logit gap to the NPU's pick is below the tie margin"};
    GateCheck c = make_check(fmt::format("token {}", i), compare(ref, logits), t);
    if (got != want) {
      const double scale = *std::max_element(ref.begin(), ref.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); });
      const double margin = std::max(rule_value(rules, "margin_factor") * max_abs,
                                     rule_value(rules, "margin_floor_u") * u * std::fabs(scale));
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
    dec_pred += s.last_timing().predicted_seconds;
    dec_host += s.last_timing().host_seconds;
  }
  for (const auto& c : r.checks)
    if (!c.passed) r.status = "failed";
  const double steps = std::max<double>(1, static_cast<double>(n) - 1);
  r.details = {{"oracle_tokens", orc.continuation},
               {"npu_tokens", npu_tokens},
               {"disagreements", ties},
               {"phase3_logits_max_abs", max_abs},
               {"prefill_tokens", prefill.tokens},
               {"prefill_predicted_seconds", prefill.predicted_seconds},
               {"prefill_host_seconds", prefill.host_seconds},
               {"decode_steps", n - 1},
               {"decode_predicted_seconds_per_token", dec_pred / steps},
               {"decode_host_seconds_per_token", dec_host / steps},
               {"decode_predicted_tokens_per_second", dec_pred > 0 ? steps / dec_pred : 0.0}};
  r.host_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace tessera::pipeline::detail
