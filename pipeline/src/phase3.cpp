// Phase 3: all N layers + the LM head on the NPU for the gate prompt. Every
// layer's h_out is gated on cosine (a floor that grows with depth and a
// per-layer "no sudden drop" bound, both from the phase-2 budget of one
// block) and on max/mean error growing as sqrt(layers); the logits of the
// last prompt position on cosine, top-1 and top-5 (deploy_thresholds.cpp).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deploy_internal.h"
#include "diagnose_run.h"
#include "tessera/core/error.h"
#include "tessera/pipeline/deploy_thresholds.h"

namespace tessera::pipeline::detail {

namespace {

using Clock = std::chrono::steady_clock;

void token_checks(PhaseResult& r, const std::vector<float>& ref, const std::vector<float>& got,
                  double max_abs) {
  const auto& rules = phase3_rules();
  const auto ref5 = top_ids(ref, 5), got5 = top_ids(got, 5);
  const double gap = ref[static_cast<size_t>(ref5[0])] - ref[static_cast<size_t>(ref5[1])];
  const double margin = rule_value(rules, "top1_gap_factor") * max_abs;
  GateCheck top1{"logits top-1", {}, {}, true, ""};
  top1.threshold.op = "top1";
  top1.threshold.reason = "equal unless the oracle's top-2 gap < 2 x max |logit error|";
  if (got5[0] != ref5[0] && !(gap < margin)) {
    top1.passed = false;
    top1.message = fmt::format("NPU top-1 {} != oracle {} with oracle top-2 gap {:.4g} >= margin {:.4g}",
                               got5[0], ref5[0], gap, margin);
  }
  const std::set<int32_t> g(got5.begin(), got5.end());
  const auto overlap = std::count_if(ref5.begin(), ref5.end(), [&](int32_t id) { return g.count(id) > 0; });
  GateCheck top5{"logits top-5", {}, {}, true, ""};
  top5.threshold.op = "top5";
  top5.threshold.reason = "overlap >= 4 of 5";
  if (static_cast<double>(overlap) < rule_value(rules, "top5_min_overlap")) {
    top5.passed = false;
    top5.message = fmt::format("top-5 overlap {} < {} (oracle {}, NPU {})", overlap,
                               rule_value(rules, "top5_min_overlap"), fmt::join(ref5, ","), fmt::join(got5, ","));
  }
  r.details["oracle_top5"] = ref5;
  r.details["npu_top5"] = got5;
  r.details["oracle_top2_gap"] = gap;
  r.details["top1_margin"] = margin;
  r.checks.push_back(std::move(top1));
  r.checks.push_back(std::move(top5));
}

}  // namespace

PhaseResult run_phase3(Context& ctx, std::vector<std::string>&) {
  const auto t0 = Clock::now();
  PhaseResult r{3, "model", "passed", {}, 0, nlohmann::json::object()};
  std::shared_ptr<compiler::PackedWeights> pw = ctx.packed();
  const compiler::Plan& plan = ctx.prefill_plan();
  const OracleRun& orc = ctx.oracle();
  const int64_t L = ctx.config.num_layers;
  std::set<std::string> keep = {"logits"};
  for (int64_t l = 0; l < L; ++l) keep.insert(fmt::format("L{}.h_out", l));
  runtime::Executor exec(ctx.opts.spec, *pw);
  const runtime::ExecResult res = exec.run(plan, host_inputs(ctx.config, orc.prompt), &keep,
                                           [&](size_t d, size_t t) { ctx.progress("phase 3: model", d, t); });

  model::ModelConfig c1 = ctx.config;
  c1.num_layers = 1;
  const compiler::Graph g1 = compiler::build_graph(c1, ctx.seq(), 0);
  const Threshold block = block_thresholds(g1).at("L0.h_out");
  const double loss = layer_cosine_loss(g1);
  double prev = 1;
  nlohmann::json cosines = nlohmann::json::array();
  for (int64_t l = 0; l < L; ++l) {
    const std::string key = fmt::format("L{}.h_out", l);
    const Threshold t = depth_threshold(block, loss, static_cast<double>(l + 1), prev);
    NoiseModel nm = t.noise;
    nm.row_width = ctx.config.hidden_size;
    const Metrics m = compare(orc.taps.at(key), npu_value(res, key), nm);
    r.checks.push_back(make_check(key, m, t));
    prev = m.cosine;
    cosines.push_back(m.cosine);
  }
  const std::vector<float> ref = orc.step_row(0, ctx.config.vocab_size);
  const std::vector<float>& got = npu_value(res, "logits");
  const double blocks = static_cast<double>(L) + rule_value(phase3_rules(), "logits_blocks");
  const Threshold lt = depth_threshold(block, loss, blocks, prev);
  const Metrics lm = compare(ref, got, lt.noise);  // one row: the last position's logits
  r.checks.push_back(make_check("logits", lm, lt));
  token_checks(r, ref, got, lm.max_abs);
  for (const auto& c : r.checks)
    if (!c.passed) r.status = "failed";
  r.details["h_out_cosines"] = cosines;
  r.details["layer_cosine_loss"] = loss;
  r.details["logits_max_abs"] = lm.max_abs;
  r.details["logits_scale"] = lm.scale;
  r.details["predicted_seconds"] = res.predicted_seconds;
  r.details["host_seconds"] = res.host_seconds;
  r.details["dispatches"] = plan.dispatches();
  if (r.status == "failed")
    attach(ctx, r, [&] {  // the gate run kept only the layer outputs: re-run keeping every value
      const runtime::Values host = host_inputs(ctx.config, orc.prompt);
      return diagnose_run(ctx, plan.graph, exec.run(plan, host).values, host, "phase 3");
    });
  r.host_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace tessera::pipeline::detail
